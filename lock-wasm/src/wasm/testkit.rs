//! `RawKit` (feature `testkit`): the in-process lock service behind the npm package's
//! `lock-wasm/testing` entry.
//!
//! The service is the simulation's model of lock-server ([`SimService`]: tokens, leases,
//! idempotent L4, compare-and-delete L6) on a [`ManualClock`], reached through a
//! [`SimTransport`] with no delay and no loss, so a request completes without the clock
//! moving. The clients are the unchanged SDK core ([`RawClient`] over a kit [`Runtime`]). The
//! JS layer (`lock-wasm/npm/src/testing.js`) drives the clock: it moves time only from timer
//! to timer and lets pending promises settle before and after each.
//!
//! Built into a wasm module of its own (scripts/build-npm.sh), so the main module never
//! carries the service model.

// Arcs of !Send JS-backed values are fine here: wasm32 has one thread.
#![allow(clippy::arc_with_non_send_sync)]

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use lock_api::{ErrorBody, ErrorCode, Holder, LockMode, LockState, Unavailability};
use wasm_bindgen::prelude::*;

use crate::backoff::SeededRngSource;
use crate::clock::{Clock, ManualClock};
use crate::error::TransportError;
use crate::sim::{Faults, Network, SimService, SimTransport};
use crate::transport::{Answer, Intercept, Intercepted, Outgoing, Transport, TransportExt};

use super::api::{RawClient, Runtime};
use super::js_error::to_js;
use super::options::ClientOptions;

/// Sessions whose requests fail as a cut network would make them fail.
type Partitioned = Rc<RefCell<BTreeSet<String>>>;

/// The retry hint of the kit's STORE_UNAVAILABLE answers (ASSUMPTION: 200 ms, as the etcd
/// backend's for `no_quorum`).
const STORE_RETRY_AFTER_MILLIS: u64 = 200;

/// An in-process lock service on a manual clock, and the clients that talk to it.
#[wasm_bindgen]
pub struct RawKit {
    clock: ManualClock,
    service: SimService,
    /// The service as the clients reach it (no delay, no loss), for the holder read.
    network: SimTransport,
    partitions: Partitions,
    /// `network` behind `partitions`: what the clients talk to.
    transport: Arc<dyn Transport>,
    rng: Arc<SeededRngSource>,
}

#[wasm_bindgen]
impl RawKit {
    /// A kit whose backoff jitter is drawn from `seed` (session ids and tokens are
    /// deterministic anyway).
    #[wasm_bindgen(constructor)]
    pub fn new(seed: f64) -> RawKit {
        let clock = ManualClock::new();
        let service = SimService::new(clock.clone(), Faults::default());
        let direct = Network {
            delay_millis: (0, 0),
            loss: 0.0,
        };
        let network = SimTransport::new(service.clone(), direct, seed as u64);
        let partitions = Partitions::default();
        RawKit {
            transport: Arc::new(Intercepted::new(
                Arc::new(network.clone()),
                partitions.clone(),
            )),
            network,
            partitions,
            rng: Arc::new(SeededRngSource::new(seed as u64)),
            clock,
            service,
        }
    }

    /// A `RawClient` whose sessions talk to this kit; `options`: `{ defaults }`.
    pub fn client(&self, options: JsValue) -> Result<RawClient, JsValue> {
        let runtime = Runtime {
            transport: self.transport.clone(),
            clock: Arc::new(self.clock.clone()),
            rng: self.rng.clone(),
            epoch_origin: Some(0.0),
            fetch: None,
        };
        ClientOptions::parse_kit(options)
            .and_then(|opts| RawClient::over(runtime, &opts))
            .map_err(|e| to_js(&e))
    }

    /// The kit's time in milliseconds since it was created.
    #[wasm_bindgen(js_name = nowMs)]
    pub fn now_ms(&self) -> f64 {
        millis(self.clock.now())
    }

    /// Fires the earliest pending timer if it is due by `limit_ms`, moving the clock exactly
    /// to its instant (timers sit at nanosecond instants that a millisecond float cannot
    /// always name: moving to a rounded float could stop just short of one forever). Returns
    /// whether a timer fired.
    #[wasm_bindgen(js_name = fireNextTimer)]
    pub fn fire_next_timer(&self, limit_ms: f64) -> bool {
        match self.clock.next_awaited_timer() {
            Some(at) if millis(at) <= limit_ms => {
                self.clock.advance_to(at);
                true
            }
            _ => false,
        }
    }

    /// Moves the clock to `ms` (never backwards) and wakes every timer due by then.
    #[wasm_bindgen(js_name = advanceTo)]
    pub fn advance_to(&self, ms: f64) {
        self.clock
            .advance_to(Duration::from_nanos((ms * 1e6).round() as u64));
    }

    /// The live exclusive holder of `key` as L7 reports it: `{ holderId, owner, fencingToken,
    /// remainingMs }` (`owner` only when the session has one), or `null` (free, or held
    /// shared: see [`RawKit::holders`]).
    pub fn holder(&self, key: &str) -> JsValue {
        match self.read(key).and_then(|s| s.holder) {
            Some(holder) => holder_object(&holder, None).into(),
            None => JsValue::NULL,
        }
    }

    /// Every live holder of `key` in either mode, in token order, each as in
    /// [`RawKit::holder`] plus its `mode`; empty when the key is free.
    pub fn holders(&self, key: &str) -> js_sys::Array {
        let Some(state) = self.read(key) else {
            return js_sys::Array::new();
        };
        // A service that lists no `holders` (one that predates shared holds) has at most its
        // exclusive `holder`.
        let mode = state.mode.unwrap_or_default();
        let holders = if state.holders.is_empty() {
            state.holder.into_iter().collect()
        } else {
            state.holders
        };
        holders
            .iter()
            .map(|h| JsValue::from(holder_object(h, Some(mode))))
            .collect()
    }

    /// L7 of `key`, as the service answers it now.
    fn read(&self, key: &str) -> Option<LockState> {
        self.network
            .read_lock(key, Duration::ZERO)
            .now_or_never()
            .and_then(Result::ok)
    }

    /// R1: ends `key`'s lock whoever holds it. Returns the revoked token, or `undefined`.
    pub fn revoke(&self, key: &str) -> Option<f64> {
        self.service.revoke(key).map(|token| token as f64)
    }

    /// While `reason` is set (a reason of C3's STORE_UNAVAILABLE, e.g. `"disk_full"`), every
    /// write (L1–L4, L6, L9) answers 503 STORE_UNAVAILABLE with it and is not applied; `None`
    /// ends the outage. An unknown reason is refused (`false`).
    #[wasm_bindgen(js_name = storeUnavailable)]
    pub fn store_unavailable(&self, reason: Option<String>) -> bool {
        let cause = match reason.as_deref().map(Unavailability::from_label) {
            Some(None) => return false,
            Some(Some(cause)) => Some(cause),
            None => None,
        };
        *self.partitions.store.borrow_mut() = cause;
        true
    }

    /// Cuts (`true`) or restores the network path of session `session_id`.
    pub fn partition(&self, session_id: String, cut: bool) {
        let mut partitioned = self.partitions.cut.borrow_mut();
        if cut {
            partitioned.insert(session_id);
        } else {
            partitioned.remove(&session_id);
        }
    }
}

/// `{ holderId, owner?, fencingToken, remainingMs, mode? }` of one L7 holder.
fn holder_object(holder: &Holder, mode: Option<LockMode>) -> js_sys::Object {
    let object = js_sys::Object::new();
    let set = |name: &str, value: JsValue| {
        let _ = js_sys::Reflect::set(&object, &JsValue::from_str(name), &value);
    };
    set("holderId", JsValue::from_str(&holder.holder_id));
    if let Some(owner) = &holder.owner {
        set("owner", JsValue::from_str(owner));
    }
    set(
        "fencingToken",
        JsValue::from_f64(holder.fencing_token as f64),
    );
    set(
        "remainingMs",
        JsValue::from_f64(holder.remaining_millis as f64),
    );
    if let Some(mode) = mode {
        set("mode", JsValue::from_str(mode.as_str()));
    }
    object
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// In front of the kit's service: sessions in `cut` are partitioned, their requests fail
/// at once with a network error (as a refused connection does); while `store` names a
/// cause, writes answer STORE_UNAVAILABLE; the rest pass straight on.
#[derive(Clone, Default)]
struct Partitions {
    cut: Partitioned,
    store: Rc<RefCell<Option<Unavailability>>>,
}

impl Intercept for Partitions {
    async fn around<'a>(&'a self, call: Outgoing<'a>) -> Answer {
        let request = call.request();
        let cut = request
            .session_id()
            .is_some_and(|id| self.cut.borrow().contains(id));
        if cut {
            return Err(TransportError::Network(
                "partitioned by the test kit".to_owned(),
            ));
        }
        let store = *self.store.borrow();
        if let (Some(cause), true) = (store, request.route().writes()) {
            let mut body = ErrorBody::new(ErrorCode::StoreUnavailable, cause.message());
            body.reason = Some(cause.label().to_owned());
            body.retry_after_millis = Some(STORE_RETRY_AFTER_MILLIS);
            return Err(TransportError::Status { status: 503, body });
        }
        call.send().await
    }
}
