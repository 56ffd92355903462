//! Leader election on one key (C2 ct2-election): [`LockClientSession::campaign`] →
//! [`Leadership`], and the readers [`LockClient::leader`] (L7) and
//! [`LockClient::observe`] (built on [`crate::watch`]).
//!
//! An election is a key held exclusively: the leader is its holder, the term its fencing
//! token (so terms of one election strictly increase and a fenced resource refuses a
//! deposed leader), the leader's value the hold's value (L4 `value`, replaced by L9).
//! - `campaign` is the queued acquire: an exclusive L4 with `waitMillis` and the value,
//!   re-sent so the ticket keeps its place in the key's FIFO queue, with no total budget: it
//!   waits until granted, fails on a non-retryable error or a lost session, and is cancelled
//!   by dropping it. Candidates are elected in the order they queued.
//! - `Leadership` wraps the grant's [`LockHandle`]: the heartbeat keeps it, its `lost()`
//!   ends the term (deadline passed, session lost, revoked, resigned).
//! - `proclaim` sends L9; once the handle is lost or released it is refused with
//!   `LockLost` without sending anything (a deposed leader must not announce).
//! - `observe` yields the leader (or `None`) after every change of holder or value,
//!   consecutive equal leaders once.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use lock_api::{EventKind, HoldKind, LockMode, LockState, ProclaimRequest, WatchEvent};

use crate::backoff::Backoff;
use crate::error::LockError;
use crate::handle::{LockHandle, LostReason};
use crate::policy::{AcquirePolicy, PolicySettings};
use crate::session::{LockClient, LockClientSession};
use crate::spawn::BoxFuture;
use crate::transport::{call, TransportExt};
use crate::watch::WatchStream;

/// How long each campaign L4 waits in the key's queue (ASSUMPTION; the server's cap is 30 s).
pub const CAMPAIGN_WAIT: Duration = Duration::from_secs(25);

/// An election's leader as readers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// What the leader proclaimed (its hold's value), if anything.
    pub value: Option<String>,
    /// The leader's term: its fencing token.
    pub term: u64,
    /// The leader's public name (L1's `holderId`).
    pub holder_id: String,
}

/// What a candidate asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CampaignOptions {
    /// The value to lead with (UTF-8, at most 1 KiB), e.g. the address it serves at.
    pub value: Option<String>,
    /// The hold's TTL; `None`: the client's default lock TTL.
    pub ttl: Option<Duration>,
}

/// A won election (see the module docs). Cheap to clone; clones share the value.
#[derive(Clone)]
pub struct Leadership {
    session: LockClientSession,
    handle: LockHandle,
    value: Arc<Mutex<Option<String>>>,
}

/// A stream of an election's leader: `Send` natively, not on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub type ObserveStream =
    Pin<Box<dyn Stream<Item = Result<Option<Leader>, LockError>> + Send + 'static>>;
/// A stream of an election's leader: `Send` natively, not on wasm32.
#[cfg(target_arch = "wasm32")]
pub type ObserveStream = Pin<Box<dyn Stream<Item = Result<Option<Leader>, LockError>> + 'static>>;

impl LockClientSession {
    /// Campaigns in `election` on this session until elected (see the module docs). Fails
    /// with `Validation` (bad key, value or TTL; nothing sent), `SessionLost`/`Closed`, or a
    /// non-retryable error; cancel by dropping the future.
    pub async fn campaign(
        &self,
        election: &str,
        options: CampaignOptions,
    ) -> Result<Leadership, LockError> {
        let ttl = options.ttl.unwrap_or_else(|| self.default_lock_ttl());
        let parts = self.shared_parts();
        let policy = campaign_policy(parts.config.request_timeout)?;
        let value = options.value;
        let backoff = Backoff::new(policy.base_backoff(), policy.max_backoff());
        let mut rng = parts.rng.rng();
        let mut failures = 0;
        loop {
            let round = crate::acquire::acquire_valued(
                self.state(),
                election,
                HoldKind::Exclusive,
                ttl,
                &policy,
                value.as_deref(),
            )
            .await;
            let pause = match round {
                Ok(Some(handle)) => {
                    return Ok(Leadership {
                        session: self.clone(),
                        handle,
                        value: Arc::new(Mutex::new(value)),
                    })
                }
                // The round's budget ended while queued: ask again at once, within the
                // ticket's grace period, so it keeps its place.
                Ok(None) => Duration::ZERO,
                Err(err) if err.retryable() && !matches!(err, LockError::Contention { .. }) => {
                    failures += 1;
                    backoff.delay(failures - 1, &mut rng)
                }
                Err(err) => return Err(err),
            };
            if !pause.is_zero() {
                parts.clock.sleep(pause).await;
            }
        }
    }

    /// Watches `key`'s events (see [`crate::watch`]).
    pub fn watch(&self, key: &str) -> WatchStream {
        crate::watch::watch(self.shared_parts(), key, None)
    }
}

/// One campaign round: a queued acquire that waits [`CAMPAIGN_WAIT`] per L4, over a budget
/// of a few such waits; the campaign starts a new round when it ends.
fn campaign_policy(request_timeout: Duration) -> Result<AcquirePolicy, LockError> {
    AcquirePolicy::new(PolicySettings {
        total_budget: (CAMPAIGN_WAIT + request_timeout) * 3,
        wait_millis: CAMPAIGN_WAIT.as_millis() as u64,
        max_attempts: 12,
        ..PolicySettings::default()
    })
}

impl LockClient {
    /// [`LockClientSession::campaign`] on the client's own session.
    pub async fn campaign(
        &self,
        election: &str,
        options: CampaignOptions,
    ) -> Result<Leadership, LockError> {
        self.session().await?.campaign(election, options).await
    }

    /// The leader of `election` now (L7, advisory): the key's exclusive holder.
    pub async fn leader(&self, election: &str) -> Result<Option<Leader>, LockError> {
        let parts = self.parts();
        let hop = parts.config.request_timeout;
        let read = parts.transport.read_lock(election, hop);
        let state = call(&*parts.clock, hop, read)
            .await
            .map_err(|e| LockError::from_transport(e, election))?;
        Ok(leader_of(&state))
    }

    /// Watches `key`'s events from a `snapshot` of now (see [`crate::watch`]).
    pub fn watch(&self, key: &str) -> WatchStream {
        crate::watch::watch(self.parts().clone(), key, None)
    }

    /// Watches `key`'s events after the event `after` (a resume: a `reset` when the server
    /// no longer has it).
    pub fn watch_after(&self, key: &str, after: Option<String>) -> WatchStream {
        crate::watch::watch(self.parts().clone(), key, after)
    }

    /// The leader of `election` after every change of holder or value, starting with the
    /// leader now (`None`: no leader); consecutive equal leaders are yielded once. Ends only
    /// with a non-retryable error, as a watch does.
    pub fn observe(&self, election: &str) -> ObserveStream {
        observe(self.watch(election))
    }
}

/// The leader a watch's events imply, deduplicated.
pub(crate) fn observe(events: WatchStream) -> ObserveStream {
    let mut current: Option<Leader> = None;
    let mut told: Option<Option<Leader>> = None;
    Box::pin(events.filter_map(move |event| {
        let item = match event {
            Err(err) => Some(Err(err)),
            Ok(event) => {
                current = apply(current.take(), &event);
                let changed = told.as_ref() != Some(&current);
                changed.then(|| {
                    told = Some(current.clone());
                    Ok(current.clone())
                })
            }
        };
        futures::future::ready(item)
    }))
}

/// The leader after `event`, given the leader before it.
fn apply(leader: Option<Leader>, event: &WatchEvent) -> Option<Leader> {
    let exclusive = event.mode.unwrap_or(LockMode::Exclusive) == LockMode::Exclusive;
    let about_leader = |l: &Leader| event.fencing_token == Some(l.term);
    match event.kind {
        EventKind::Snapshot | EventKind::Reset => event.state.as_ref().and_then(leader_of),
        kind if kind.is_grant() && exclusive && leader.is_none() => Some(Leader {
            value: event.value.clone(),
            term: event.fencing_token.unwrap_or(0),
            holder_id: event.holder_id.clone().unwrap_or_default(),
        }),
        kind if kind.is_end() && leader.as_ref().is_some_and(about_leader) => None,
        EventKind::Proclaimed => leader.map(|l| match about_leader(&l) {
            true => Leader {
                value: event.value.clone(),
                ..l
            },
            false => l,
        }),
        _ => leader,
    }
}

/// The leader L7's answer names: the exclusive holder.
fn leader_of(state: &LockState) -> Option<Leader> {
    state.holder.as_ref().map(|h| Leader {
        value: h.value.clone(),
        term: h.fencing_token,
        holder_id: h.holder_id.clone(),
    })
}

impl Leadership {
    /// The election (the key).
    pub fn election(&self) -> &str {
        self.handle.key()
    }

    /// The term: the grant's fencing token. Pass it with every side effect the leader makes.
    pub fn term(&self) -> u64 {
        self.handle.fencing_token()
    }

    /// The value last proclaimed (or campaigned with).
    pub fn value(&self) -> Option<String> {
        self.value.lock().unwrap().clone()
    }

    /// The grant's handle.
    pub fn handle(&self) -> &LockHandle {
        &self.handle
    }

    /// True once the term may be over (see [`LockHandle::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.handle.is_lost()
    }

    /// Completes when the term ends, with why (see [`LockHandle::lost`]).
    pub fn lost(&self) -> BoxFuture<'static, LostReason> {
        Box::pin(self.handle.lost())
    }

    /// Replaces the leader's value (L9). Refused with `LockLost` without sending anything
    /// once the handle is lost or released; a 409 from the server is `LockLost` too.
    pub async fn proclaim(&self, value: &str) -> Result<(), LockError> {
        lock_api::limits::validate_value(value)
            .map_err(|message| LockError::validation("value", message))?;
        let key = self.handle.key();
        if self.handle.is_lost() {
            return Err(LockError::LockLost {
                key: key.to_owned(),
            });
        }
        let parts = self.session.shared_parts();
        let request = ProclaimRequest {
            session_id: self.handle.session_id().to_owned(),
            fencing_token: self.handle.fencing_token(),
            value: value.to_owned(),
        };
        let hop = parts.config.request_timeout;
        let sent = parts.transport.proclaim(key, &request, hop);
        call(&*parts.clock, hop, sent)
            .await
            .map_err(|e| LockError::from_transport(e, key))?;
        *self.value.lock().unwrap() = Some(request.value);
        Ok(())
    }

    /// Resigns: releases the hold (the next candidate in the queue is elected).
    pub async fn resign(&self) -> Result<(), LockError> {
        self.session.release(&self.handle).await
    }
}
