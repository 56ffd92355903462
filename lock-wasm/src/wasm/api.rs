//! The JS API as wasm-bindgen exports: `RawClient`, `RawSession`, `RawHandle`,
//! `RawLeadership` (and `RawStream` from `super::election`).
//!
//! A `RawClient` runs its sessions on a [`Runtime`]: the platform's (fetch, JS timers,
//! crypto RNG) for `new RawClient(...)`, or the test kit's (`super::testkit`, feature
//! `testkit`: an in-process lock service on a manual clock). Everything above the seams is
//! the same code either way.
//!
//! "Raw" because users never see them: `lock-wasm/npm/src/api.js` wraps them into
//! `LockClient`/`Session`/`LockHandle` with `Error` subclasses, `Symbol.asyncDispose` and
//! `using()`, which wasm-bindgen cannot express. Every method that waits returns a
//! `Promise` built from an owned future (wasm-bindgen's async methods cannot borrow `self`
//! across an await); every failure rejects with [`super::js_error::to_js`]. Acquire returns
//! a `RawHandle` or `undefined` — the grant or not-granted, never any other result shape.

// Arcs of !Send JS-backed values are fine here: wasm32 has one thread, and the core's seams
// are `Arc<dyn Trait>` on every target.
#![allow(clippy::arc_with_non_send_sync)]

use std::sync::Arc;
use std::time::Duration;

use futures::future::{select, Either};
use lock_api::HoldKind;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::backoff::RngSource;
use crate::clock::Clock;
use crate::config::ClientConfig;
use crate::election::Leadership;
use crate::error::LockError;
use crate::handle::LockHandle;
use crate::policy::PolicySettings;
use crate::session::{LockClient, LockClientSession};
use crate::transport::Transport;

use super::abort::Aborted;
use super::election::{leader_js, RawStream};
use super::events::JsEvents;
use super::js_error::to_js;
use super::options::{self, AcquireOptions, CampaignOptions, ClientOptions, SessionOptions};
use super::timer::epoch_millis;
use super::trace_context::{CallScope, KeyCallKind, TraceContexts};
use super::{CryptoRngSource, FetchTransport, JsClock, LocalSpawner};

/// The seams a client's sessions run on, and how its clock reads as epoch milliseconds.
#[derive(Clone)]
pub struct Runtime {
    /// L1–L7.
    pub transport: Arc<dyn Transport>,
    /// Every wait and deadline.
    pub clock: Arc<dyn Clock>,
    /// Backoff jitter.
    pub rng: Arc<dyn RngSource>,
    /// `Some(origin)`: the clock's zero is this epoch millisecond (the test kit's time);
    /// `None`: the platform's `Date.now()` stands for the clock's now.
    pub epoch_origin: Option<f64>,
    /// The platform's transport, kept concrete so that each session can carry `traceparent`s
    /// of its own (the npm package's tracing); `None` in the test kit.
    pub fetch: Option<FetchTransport>,
}

impl Runtime {
    /// The platform's: fetch to `base_url`, JS timers, `crypto.getRandomValues`.
    fn platform(fetch: FetchTransport) -> Runtime {
        Runtime {
            transport: Arc::new(fetch.clone()),
            clock: Arc::new(JsClock),
            rng: Arc::new(CryptoRngSource::default()),
            epoch_origin: None,
            fetch: Some(fetch),
        }
    }

    /// The same runtime for one session, whose requests carry the `traceparent`s of the
    /// returned [`TraceContexts`]; `None` for the test kit's, which sends no headers.
    fn with_traces(&self) -> (Runtime, Option<TraceContexts>) {
        let mut runtime = self.clone();
        let Some(fetch) = &self.fetch else {
            return (runtime, None);
        };
        let traces = TraceContexts::default();
        runtime.transport = Arc::new(fetch.clone().with_traces(traces.clone()));
        (runtime, Some(traces))
    }

    /// `at` on the clock as epoch milliseconds.
    fn epoch_millis(&self, at: Duration) -> f64 {
        let at = at.as_secs_f64() * 1000.0;
        match self.epoch_origin {
            Some(origin) => origin + at,
            None => epoch_millis() + at - self.clock.now().as_secs_f64() * 1000.0,
        }
    }
}

/// Settings a client hands to each session it opens.
#[derive(Clone)]
struct Defaults {
    runtime: Runtime,
    lock_ttl: Duration,
    policy: PolicySettings,
    request_timeout: Duration,
}

/// `new RawClient({ baseUrl, token, defaults })`: validated options, no I/O.
#[wasm_bindgen]
pub struct RawClient {
    defaults: Defaults,
}

#[wasm_bindgen]
impl RawClient {
    /// Throws VALIDATION_FAILED naming the offending option.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<RawClient, JsValue> {
        Self::build(options).map_err(|e| to_js(&e))
    }

    fn build(options: JsValue) -> Result<RawClient, LockError> {
        let opts = ClientOptions::parse(options)?;
        let base_url = options::base_url(opts.base_url.as_deref().unwrap_or_default())?;
        let mut fetch = FetchTransport::new(base_url);
        if let Some(token) = &opts.token {
            fetch = fetch.with_token(token)?;
        }
        Self::over(Runtime::platform(fetch), &opts)
    }

    /// A client whose sessions run on `runtime`, with the validated `defaults` of `opts`.
    pub(crate) fn over(runtime: Runtime, opts: &ClientOptions) -> Result<RawClient, LockError> {
        let d = &opts.defaults;
        let config = ClientConfig::default();
        let policy = d.policy.unwrap_or_default().over(PolicySettings::default());
        options::policy(policy, "defaults.policy")?;
        Ok(RawClient {
            defaults: Defaults {
                runtime,
                lock_ttl: options::lock_ttl(
                    d.ttl_ms,
                    options::default_lock_ttl(),
                    "defaults.ttlMs",
                )?,
                policy,
                request_timeout: options::positive(
                    d.request_timeout_ms,
                    config.request_timeout,
                    "defaults.requestTimeoutMs",
                )?,
            },
        })
    }

    /// A core client over this client's seams, for the calls that need no session (L7, L8).
    fn sessionless(&self) -> LockClient {
        let runtime = &self.defaults.runtime;
        LockClient::new(
            runtime.transport.clone(),
            runtime.clock.clone(),
            Arc::new(LocalSpawner),
            runtime.rng.clone(),
        )
        .with_config(ClientConfig {
            request_timeout: self.defaults.request_timeout,
            ..ClientConfig::default()
        })
    }

    /// `key`'s events (L8) from a snapshot, or after the event `after`. Throws
    /// VALIDATION_FAILED for a bad key.
    pub fn watch(&self, key: String, after: Option<String>) -> Result<RawStream, JsValue> {
        checked_key(&key)?;
        Ok(RawStream::events(
            self.sessionless().watch_after(&key, after),
        ))
    }

    /// The leader of `election` after every change, deduplicated.
    pub fn observe(&self, election: String) -> Result<RawStream, JsValue> {
        checked_key(&election)?;
        Ok(RawStream::leaders(self.sessionless().observe(&election)))
    }

    /// Resolves the leader of `election` now (L7): `{ value, term, holderId }` or `null`.
    pub fn leader(&self, election: String) -> js_sys::Promise {
        let client = self.sessionless();
        future_to_promise(async move {
            let leader = client.leader(&election).await.map_err(|e| to_js(&e))?;
            Ok(leader_js(leader.as_ref()))
        })
    }

    /// L1, then heartbeats in the background. Resolves a `RawSession`. `traceparent` (the
    /// W3C header value of the span active at the call, from the npm package's tracing) goes
    /// with L1, the heartbeats and every other request that is not a traced call's own.
    #[wasm_bindgen(js_name = openSession)]
    pub fn open_session(&self, options: JsValue, traceparent: Option<String>) -> js_sys::Promise {
        let mut defaults = self.defaults.clone();
        let (runtime, traces) = defaults.runtime.with_traces();
        defaults.runtime = runtime;
        if let Some(traces) = &traces {
            traces.set_session(traceparent);
        }
        let parsed = SessionOptions::parse(options).and_then(|o| {
            let ttl = o
                .ttl_ms
                .map(|ms| options::ttl(Some(ms), Duration::ZERO, "ttlMs"))
                .transpose()?;
            Ok((ttl, o.owner))
        });
        future_to_promise(async move {
            let (ttl, owner) = parsed.map_err(|e| to_js(&e))?;
            let events = JsEvents::default();
            let config = ClientConfig {
                session_ttl: ttl,
                owner,
                request_timeout: defaults.request_timeout,
                default_lock_ttl: defaults.lock_ttl,
                ..ClientConfig::default()
            };
            // One core client per session: the event sink is per client, and JS listeners
            // are per session.
            let runtime = &defaults.runtime;
            let client = LockClient::new(
                runtime.transport.clone(),
                runtime.clock.clone(),
                Arc::new(LocalSpawner),
                runtime.rng.clone(),
            )
            .with_events(Arc::new(events.clone()))
            .with_config(config);
            let session = client.open_session().await.map_err(|e| to_js(&e))?;
            Ok(RawSession {
                session,
                events,
                defaults,
                traces,
            }
            .into())
        })
    }
}

/// One session: acquire, release, close, and the event listener slot.
#[wasm_bindgen]
pub struct RawSession {
    session: LockClientSession,
    events: JsEvents,
    defaults: Defaults,
    traces: Option<TraceContexts>,
}

#[wasm_bindgen]
impl RawSession {
    /// The server's session id.
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> String {
        self.session.id().to_owned()
    }

    /// The session's public name (L1's `holderId`), what L7 shows as its locks' holder.
    #[wasm_bindgen(getter, js_name = holderId)]
    pub fn holder_id(&self) -> String {
        self.session.holder_id().to_owned()
    }

    /// True once closed by its owner or lost.
    #[wasm_bindgen(getter, js_name = isClosed)]
    pub fn is_closed(&self) -> bool {
        self.session.is_closed() || self.session.is_lost()
    }

    /// Sets (or clears, with `undefined`) the one event listener; with `contention_only` it
    /// hears `contention` events only.
    #[wasm_bindgen(js_name = setListener)]
    pub fn set_listener(&self, listener: Option<js_sys::Function>, contention_only: bool) {
        self.events.set(listener, contention_only);
    }

    /// The bounded acquire, after this session's earlier callers of the key are done with it.
    /// Resolves a `RawHandle`, or `undefined` when not granted within the budget; rejects
    /// with the signal's reason when `signal` aborts first.
    ///
    /// `trace` is the npm package's tracing of the call, `{ traceparent }`: each L4 request
    /// carries that header, and the number of L4 requests sent is written to its `attempts`
    /// before the promise settles.
    pub fn acquire(
        &self,
        key: String,
        options: JsValue,
        signal: Option<web_sys::AbortSignal>,
        trace: Option<js_sys::Object>,
    ) -> js_sys::Promise {
        let session = self.session.clone();
        let parsed = self.acquire_settings(options);
        let runtime = self.defaults.runtime.clone();
        let traceparent = trace.as_ref().and_then(|t| text_field(t, "traceparent"));
        let scope = self.trace_scope(KeyCallKind::Acquire, &key, traceparent);
        future_to_promise(async move {
            let settled = async {
                let (ttl, policy, hold) = parsed.map_err(|e| to_js(&e))?;
                let policy = options::policy(policy, "policy").map_err(|e| to_js(&e))?;
                let acquire = Box::pin(session.acquire_hold(&key, hold, ttl, &policy));
                let outcome = match signal {
                    None => acquire.await,
                    Some(signal) => match select(acquire, Box::pin(Aborted::new(signal))).await {
                        Either::Left((outcome, _)) => outcome,
                        // Dropping the acquire future cancels it: its in-flight request is
                        // aborted and the core's guards clear the in-flight mark.
                        Either::Right((reason, _)) => return Err(reason),
                    },
                };
                match outcome {
                    Ok(Some(handle)) => Ok(RawHandle { handle, runtime }.into()),
                    Ok(None) => Ok(JsValue::UNDEFINED),
                    Err(e) => Err(to_js(&e)),
                }
            }
            .await;
            if let (Some(scope), Some(trace)) = (scope, trace) {
                let sent = JsValue::from_f64(scope.sent().into());
                let _ = js_sys::Reflect::set(&trace, &JsValue::from_str("attempts"), &sent);
            }
            settled
        })
    }

    /// Campaigns in `election` until elected (no budget); resolves a `RawLeadership`;
    /// rejects with the signal's reason when `signal` aborts first.
    pub fn campaign(
        &self,
        election: String,
        options: JsValue,
        signal: Option<web_sys::AbortSignal>,
    ) -> js_sys::Promise {
        let session = self.session.clone();
        let runtime = self.defaults.runtime.clone();
        let parsed = CampaignOptions::parse(options).and_then(|o| {
            let ttl = options::lock_ttl(o.ttl_ms, self.defaults.lock_ttl, "ttlMs")?;
            Ok(crate::election::CampaignOptions {
                value: o.value,
                ttl: Some(ttl),
            })
        });
        future_to_promise(async move {
            let options = parsed.map_err(|e| to_js(&e))?;
            let campaign = Box::pin(session.campaign(&election, options));
            let won = match signal {
                None => campaign.await,
                Some(signal) => match select(campaign, Box::pin(Aborted::new(signal))).await {
                    Either::Left((won, _)) => won,
                    Either::Right((reason, _)) => return Err(reason),
                },
            };
            let leadership = won.map_err(|e| to_js(&e))?;
            let handle = RawHandle {
                handle: leadership.handle().clone(),
                runtime,
            };
            Ok(RawLeadership::new(leadership, handle).into())
        })
    }

    fn acquire_settings(
        &self,
        options: JsValue,
    ) -> Result<(Duration, PolicySettings, HoldKind), LockError> {
        let opts = AcquireOptions::parse(options)?;
        let ttl = options::lock_ttl(opts.ttl_ms, self.defaults.lock_ttl, "ttlMs")?;
        let policy = opts.policy.unwrap_or_default().over(self.defaults.policy);
        Ok((ttl, policy, opts.hold))
    }

    /// The scope of one call's `traceparent`, when traced.
    fn trace_scope(
        &self,
        kind: KeyCallKind,
        key: &str,
        traceparent: Option<String>,
    ) -> Option<CallScope> {
        Some(self.traces.as_ref()?.scope(kind, key, traceparent?))
    }

    /// Releases one hold of `handle` (L6 at the outermost, carrying `traceparent` if given;
    /// a lost lock releases quietly).
    pub fn release(&self, handle: &RawHandle, traceparent: Option<String>) -> js_sys::Promise {
        let session = self.session.clone();
        let traced = self.trace_scope(KeyCallKind::Release, handle.handle.key(), traceparent);
        let handle = handle.handle.clone();
        future_to_promise(async move {
            let _traced = traced;
            session.release(&handle).await.map_err(|e| to_js(&e))?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Stops heartbeats and closes the session (L3, carrying `traceparent` if given).
    pub fn close(&self, traceparent: Option<String>) -> js_sys::Promise {
        if let (Some(traces), Some(traceparent)) = (&self.traces, traceparent) {
            traces.set_closing(Some(traceparent));
        }
        let session = self.session.clone();
        future_to_promise(async move {
            session.close().await.map_err(|e| to_js(&e))?;
            Ok(JsValue::UNDEFINED)
        })
    }
}

/// VALIDATION_FAILED on `key` for a key the contract refuses.
fn checked_key(key: &str) -> Result<(), JsValue> {
    lock_api::limits::validate_key(key)
        .map_err(|e| to_js(&LockError::validation("key", e.to_string())))
}

/// `object[name]` when it is a string.
fn text_field(object: &js_sys::Object, name: &str) -> Option<String> {
    js_sys::Reflect::get(object, &JsValue::from_str(name))
        .ok()?
        .as_string()
}

/// A granted lock.
#[wasm_bindgen]
#[derive(Clone)]
pub struct RawHandle {
    handle: LockHandle,
    runtime: Runtime,
}

#[wasm_bindgen]
impl RawHandle {
    /// The locked key.
    #[wasm_bindgen(getter)]
    pub fn key(&self) -> String {
        self.handle.key().to_owned()
    }

    /// The fencing token; exact as a JS number (tokens stay below 2^53 by contract).
    #[wasm_bindgen(getter, js_name = fencingToken)]
    pub fn fencing_token(&self) -> f64 {
        self.handle.fencing_token() as f64
    }

    /// True once the lock is known or presumed gone.
    #[wasm_bindgen(getter, js_name = isLost)]
    pub fn is_lost(&self) -> bool {
        self.handle.is_lost()
    }

    /// Why the handle was reported lost (`"deadlinePassed"`, ...), or `undefined`.
    #[wasm_bindgen(getter, js_name = lostReason)]
    pub fn lost_reason(&self) -> Option<String> {
        self.handle.lost_reason().map(|r| r.as_str().to_owned())
    }

    /// `"exclusive"` or `"shared"`, as granted.
    #[wasm_bindgen(getter)]
    pub fn mode(&self) -> String {
        self.handle.mode().as_str().to_owned()
    }

    /// A shared grant's limit, or `undefined`.
    #[wasm_bindgen(getter)]
    pub fn limit(&self) -> Option<u32> {
        self.handle.limit()
    }

    /// A nested hold of this grant (same token, no request; the lock goes with the outermost
    /// release), in the handle's own mode or `options.mode`. Throws UPGRADE_NOT_ALLOWED for
    /// an exclusive hold nested under a shared one, LOCK_LOST when the handle is lost or
    /// released, VALIDATION_FAILED for a bad option.
    pub fn nest(&self, options: JsValue) -> Result<(), JsValue> {
        let mode = options::nest_mode(options).map_err(|e| to_js(&e))?;
        let mode = mode.unwrap_or(self.handle.mode());
        self.handle.nest_as(mode).map(drop).map_err(|e| to_js(&e))
    }

    /// Resolves with the reason the moment the handle is reported lost: at its deadline
    /// when no renewal came (a timer, not a read), or when a heartbeat, the session or the
    /// owner ends it. The JS layer aborts the handle's `AbortSignal` on it.
    pub fn lost(&self) -> js_sys::Promise {
        let lost = self.handle.lost();
        future_to_promise(async move { Ok(JsValue::from_str(lost.await.as_str())) })
    }

    /// The conservative deadline as epoch milliseconds (`Date.now()` terms; the test kit's
    /// clock in the kit), for display and for comparing with `Date.now()`; the SDK itself
    /// judges on the monotonic clock.
    #[wasm_bindgen(getter)]
    pub fn deadline(&self) -> f64 {
        self.runtime.epoch_millis(self.handle.deadline())
    }
}

/// A won election.
#[wasm_bindgen]
pub struct RawLeadership {
    leadership: Leadership,
    handle: RawHandle,
}

impl RawLeadership {
    pub(crate) fn new(leadership: Leadership, handle: RawHandle) -> RawLeadership {
        RawLeadership { leadership, handle }
    }
}

#[wasm_bindgen]
impl RawLeadership {
    /// The grant's handle (read once, by the JS layer's `Leadership`).
    #[wasm_bindgen(getter)]
    pub fn handle(&self) -> RawHandle {
        self.handle.clone()
    }

    /// L9; rejects with LOCK_LOST without sending anything once the handle is lost or
    /// released.
    pub fn proclaim(&self, value: String) -> js_sys::Promise {
        let leadership = self.leadership.clone();
        future_to_promise(async move {
            leadership.proclaim(&value).await.map_err(|e| to_js(&e))?;
            Ok(JsValue::UNDEFINED)
        })
    }
}
