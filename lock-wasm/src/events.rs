//! What the SDK reports about itself: per-attempt events for logs and the JS `onEvent`
//! callback, and its only metric, the `lock_session_lost{backend}` counter.
//!
//! Attempts, delays and waited time are event fields, never metric labels: `lock_acquire` is
//! the server's meter alone (one emitter per metric), and a key or token as a label would
//! break the cardinality budget (C4).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::handle::LostReason;
use crate::spawn::{MaybeSend, MaybeSync};

/// One thing that happened in a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    /// `lock_granted`: L4 granted after `attempts` calls and `waited` since the acquire began.
    Granted {
        /// The key.
        key: String,
        /// The session that holds it.
        session_id: String,
        /// The grant's fencing token.
        fencing_token: u64,
        /// L4 calls this acquire made.
        attempts: u32,
        /// Time from the start of the acquire to the grant.
        waited: Duration,
    },
    /// `contention`: attempt `attempt` was refused (409/429/503 or no answer) and the loop
    /// sleeps `delay` before the next one.
    Contention {
        /// The key.
        key: String,
        /// 1-based number of the refused attempt.
        attempt: u32,
        /// The sleep before the next attempt.
        delay: Duration,
        /// Wire code of the refusal (`LOCK_CONTENDED`, `NOT_LEADER`, `TIMEOUT`, ...).
        reason: String,
    },
    /// `lock_not_granted`: the loop gave up (budget or attempts exhausted).
    NotGranted {
        /// The key.
        key: String,
        /// L4 calls made.
        attempts: u32,
        /// Time spent.
        waited: Duration,
    },
    /// `lock_lost`: a handle became lost without its owner's doing, reported at the instant
    /// the SDK learned it: its deadline passed with no renewal, a heartbeat no longer listed
    /// it, or its session was lost. Once per handle; never for a release or a close.
    Lost {
        /// The key.
        key: String,
        /// The dead token.
        fencing_token: u64,
        /// Why ([`LostReason::DeadlinePassed`], [`LostReason::NotInHeartbeat`] or
        /// [`LostReason::SessionLost`]).
        reason: LostReason,
    },
    /// `session_lost`: the session is gone; every handle of it is lost.
    SessionLost {
        /// The session.
        session_id: String,
    },
}

impl ClientEvent {
    /// The log event name (`lock_granted`, `contention`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            ClientEvent::Granted { .. } => "lock_granted",
            ClientEvent::Contention { .. } => "contention",
            ClientEvent::NotGranted { .. } => "lock_not_granted",
            ClientEvent::Lost { .. } => "lock_lost",
            ClientEvent::SessionLost { .. } => "session_lost",
        }
    }
}

/// A structured log line: `event=contention key="k" attempt=2 delayMillis=73 ...`.
impl fmt::Display for ClientEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "event={}", self.name())?;
        match self {
            ClientEvent::Granted {
                key,
                session_id,
                fencing_token,
                attempts,
                waited,
            } => write!(
                f,
                " key={key:?} sessionId={session_id} fencingToken={fencing_token} attempts={attempts} waitedMillis={}",
                waited.as_millis()
            ),
            ClientEvent::Contention {
                key,
                attempt,
                delay,
                reason,
            } => write!(
                f,
                " key={key:?} attempt={attempt} delayMillis={} reason={reason}",
                delay.as_millis()
            ),
            ClientEvent::NotGranted {
                key,
                attempts,
                waited,
            } => write!(
                f,
                " key={key:?} attempts={attempts} waitedMillis={}",
                waited.as_millis()
            ),
            ClientEvent::Lost {
                key,
                fencing_token,
                reason,
            } => write!(
                f,
                " key={key:?} fencingToken={fencing_token} reason={}",
                reason.as_str()
            ),
            ClientEvent::SessionLost { session_id } => write!(f, " sessionId={session_id}"),
        }
    }
}

/// Receives [`ClientEvent`]s, synchronously, from whatever task produced them. Must not
/// block: it runs inside the acquire loop and the heartbeat task.
pub trait EventSink: MaybeSend + MaybeSync {
    /// Called once per event.
    fn on_event(&self, event: &ClientEvent);
}

/// Drops every event (the default).
pub struct NoEvents;

impl EventSink for NoEvents {
    fn on_event(&self, _event: &ClientEvent) {}
}

/// The SDK's one metric: `lock_session_lost{backend}`. One counter per [`crate::session::LockClient`],
/// labelled only by the backend name the client was configured with.
#[derive(Debug, Default)]
pub struct SessionLostCounter {
    count: AtomicU64,
}

impl SessionLostCounter {
    /// Counts one lost session.
    pub fn increment(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Sessions lost so far.
    pub fn get(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}
