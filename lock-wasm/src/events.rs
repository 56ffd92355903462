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
    /// `lock_granted`: L4 granted after `attempts` calls and `waited` since the acquire began,
    /// `queued` of it in the server's wait queue by the granting call.
    Granted {
        /// The key.
        key: String,
        /// The holder id of the session that holds it (never its session id: events reach
        /// logs).
        holder_id: String,
        /// The grant's fencing token.
        fencing_token: u64,
        /// L4 calls this acquire made.
        attempts: u32,
        /// Time from the start of the acquire to the grant.
        waited: Duration,
        /// The granting L4's wait in the key's queue, as the server reports it
        /// (`waitedMillis`; 0 without `waitMillis`).
        queued: Duration,
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
    /// `lock_release_failed`: the L6 of a release got no answer or an error (not LOCK_LOST).
    /// The handle ended anyway and the key's turn passed on; the L6 is re-sent in the
    /// background until the lock's TTL would end it, and a heartbeat that still lists the
    /// grant releases it too. Nothing to do for the caller: it is reported, not thrown, by
    /// `using` when the work under the lock succeeded.
    ReleaseFailed {
        /// The key.
        key: String,
        /// The token of the grant being released.
        fencing_token: u64,
        /// The error's code (`TRANSPORT`, `NOT_LEADER`, ...).
        code: &'static str,
    },
    /// `session_lost`: the session is gone; every handle of it is lost.
    SessionLost {
        /// The session's holder id.
        holder_id: String,
    },
}

/// One field of an event, named once for both of its renderings: the log line (`Display`)
/// and the JS object of the npm package's `onEvent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field<'a> {
    /// `key`: quoted in the log line (a key may hold spaces).
    Key(&'a str),
    /// A word such as a holder id or a reason code.
    Text(&'static str, &'a str),
    /// A count or a fencing token.
    Number(&'static str, u64),
    /// A duration: `<name>Millis` in whole milliseconds in the log line, `<name>Ms` in
    /// fractional milliseconds in JS.
    Millis(&'static str, Duration),
}

impl ClientEvent {
    /// The log event name (`lock_granted`, `contention`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            ClientEvent::Granted { .. } => "lock_granted",
            ClientEvent::Contention { .. } => "contention",
            ClientEvent::NotGranted { .. } => "lock_not_granted",
            ClientEvent::Lost { .. } => "lock_lost",
            ClientEvent::ReleaseFailed { .. } => "lock_release_failed",
            ClientEvent::SessionLost { .. } => "session_lost",
        }
    }

    /// The event's fields, in the order the log line shows them.
    pub fn fields(&self) -> Vec<Field<'_>> {
        use Field::{Key, Millis, Number, Text};
        match self {
            ClientEvent::Granted {
                key,
                holder_id,
                fencing_token,
                attempts,
                waited,
                queued,
            } => vec![
                Key(key),
                Text("holderId", holder_id),
                Number("fencingToken", *fencing_token),
                Number("attempts", u64::from(*attempts)),
                Millis("waited", *waited),
                Millis("queued", *queued),
            ],
            ClientEvent::Contention {
                key,
                attempt,
                delay,
                reason,
            } => vec![
                Key(key),
                Number("attempt", u64::from(*attempt)),
                Millis("delay", *delay),
                Text("reason", reason),
            ],
            ClientEvent::NotGranted {
                key,
                attempts,
                waited,
            } => vec![
                Key(key),
                Number("attempts", u64::from(*attempts)),
                Millis("waited", *waited),
            ],
            ClientEvent::Lost {
                key,
                fencing_token,
                reason,
            } => vec![
                Key(key),
                Number("fencingToken", *fencing_token),
                Text("reason", reason.as_str()),
            ],
            ClientEvent::ReleaseFailed {
                key,
                fencing_token,
                code,
            } => vec![
                Key(key),
                Number("fencingToken", *fencing_token),
                Text("code", code),
            ],
            ClientEvent::SessionLost { holder_id } => vec![Text("holderId", holder_id)],
        }
    }
}

/// A structured log line: `event=contention key="k" attempt=2 delayMillis=73 ...`.
impl fmt::Display for ClientEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "event={}", self.name())?;
        for field in self.fields() {
            match field {
                Field::Key(key) => write!(f, " key={key:?}"),
                Field::Text(name, text) => write!(f, " {name}={text}"),
                Field::Number(name, n) => write!(f, " {name}={n}"),
                Field::Millis(name, d) => write!(f, " {name}Millis={}", d.as_millis()),
            }?;
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn each_event_is_one_log_line_of_its_fields_in_order() {
        let key = || "a b".to_string();
        let lines = [
            (
                ClientEvent::Granted {
                    key: key(),
                    holder_id: "h1".into(),
                    fencing_token: 7,
                    attempts: 2,
                    waited: ms(15),
                    queued: Duration::from_micros(900),
                },
                r#"event=lock_granted key="a b" holderId=h1 fencingToken=7 attempts=2 waitedMillis=15 queuedMillis=0"#,
            ),
            (
                ClientEvent::Contention {
                    key: key(),
                    attempt: 2,
                    delay: ms(73),
                    reason: "LOCK_CONTENDED".into(),
                },
                r#"event=contention key="a b" attempt=2 delayMillis=73 reason=LOCK_CONTENDED"#,
            ),
            (
                ClientEvent::NotGranted {
                    key: key(),
                    attempts: 3,
                    waited: ms(100),
                },
                r#"event=lock_not_granted key="a b" attempts=3 waitedMillis=100"#,
            ),
            (
                ClientEvent::Lost {
                    key: key(),
                    fencing_token: 9,
                    reason: LostReason::NotInHeartbeat,
                },
                r#"event=lock_lost key="a b" fencingToken=9 reason=notInHeartbeat"#,
            ),
            (
                ClientEvent::SessionLost {
                    holder_id: "h1".into(),
                },
                "event=session_lost holderId=h1",
            ),
        ];
        for (event, line) in lines {
            assert_eq!(event.to_string(), line);
        }
    }
}
