//! L8 `GET /v1/locks/{key}/events`: the ordered stream of a key's holder changes.
//!
//! Served two ways from one feed, with the same ids and the same rules:
//! - `text/event-stream` (SSE, the default): one `event: <kind>` / `id: <id>` / `data: <JSON
//!   of [`WatchEvent`]>` record per change, a `: keep-alive` comment every 15 s; resume with
//!   `Last-Event-ID` or `?after=`.
//! - `Accept: application/json`: a long poll answering [`EventBatch`], the events after
//!   `?after=` (waiting up to `?waitMillis=` for the first one). This is what the SDK sends
//!   through its request/response transport seam, so the same watch runs in every runtime and
//!   in the simulation.
//!
//! A watch without `after` starts with a `snapshot` (the state now). Every later event carries
//! an `id`; a resume whose `after` the server no longer has (older than the window, from
//! before a restart, or from another store) gets one `reset` with the state now, never a
//! silent gap. Events of a key come in token order, each at most once.

use serde::{Deserialize, Serialize};

use crate::{LockMode, LockState};

/// What happened to the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EventKind {
    /// The first event of a watch without `after`: `state` is the key now.
    Snapshot,
    /// The resume point is gone (older than the window, a restart, a slow consumer that fell
    /// behind): `state` is the key now; events between the two were not delivered.
    Reset,
    /// An L4 granted the key at once.
    Granted,
    /// A queued request was granted the key when the holds before it ended.
    HandedOff,
    /// The holder released it: L6, or its session closed (L3).
    Released,
    /// The hold's TTL, or its session's, ran out.
    Expired,
    /// An operator revoked it (R1).
    Revoked,
    /// The holder replaced its value (L9).
    Proclaimed,
    /// Only the number of waiters changed.
    Waiters,
}

impl EventKind {
    /// The name on the wire (SSE's `event:` line).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Snapshot => "snapshot",
            EventKind::Reset => "reset",
            EventKind::Granted => "granted",
            EventKind::HandedOff => "handedOff",
            EventKind::Released => "released",
            EventKind::Expired => "expired",
            EventKind::Revoked => "revoked",
            EventKind::Proclaimed => "proclaimed",
            EventKind::Waiters => "waiters",
        }
    }

    /// `granted` or `handedOff`: a hold began.
    pub fn is_grant(self) -> bool {
        matches!(self, EventKind::Granted | EventKind::HandedOff)
    }

    /// `released`, `expired` or `revoked`: a hold ended.
    pub fn is_end(self) -> bool {
        matches!(
            self,
            EventKind::Released | EventKind::Expired | EventKind::Revoked
        )
    }

    /// `snapshot` or `reset`: `state` replaces whatever the watcher knew.
    pub fn is_state(self) -> bool {
        matches!(self, EventKind::Snapshot | EventKind::Reset)
    }
}

/// One event of L8. Holder fields are set for grants, ends and `proclaimed`; `state` for
/// `snapshot` and `reset`. Never a session id: holders are named by their holder ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchEvent {
    /// Opaque; resume after this event with `?after=<id>` or `Last-Event-ID`.
    pub id: String,
    pub kind: EventKind,
    pub key: String,
    /// Server wall-clock milliseconds (Unix epoch) at which the change committed.
    pub at_millis: u64,
    /// The hold this event is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<LockMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The hold's value (grants and `proclaimed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Live tickets in the key's queue after this event.
    pub waiter_count: u32,
    /// `snapshot` and `reset`: the key at that instant, as L7 would answer it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<LockState>,
}

impl WatchEvent {
    /// A `snapshot` or `reset` event with id `id`: `state` and its waiter count, no holder
    /// fields (the one shape of both, for the server and the simulated one).
    pub fn of_state(id: String, kind: EventKind, state: LockState, at_millis: u64) -> WatchEvent {
        WatchEvent {
            id,
            kind,
            key: state.key.clone(),
            at_millis,
            fencing_token: None,
            holder_id: None,
            owner: None,
            mode: None,
            limit: None,
            value: None,
            waiter_count: state.waiter_count,
            state: Some(state),
        }
    }
}

/// L8 answer to `Accept: application/json` (the long poll).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventBatch {
    /// In order; empty when `waitMillis` passed without a change.
    pub events: Vec<WatchEvent>,
}

/// Most events one long-poll answer carries; the next poll continues after the last.
pub const BATCH_MAX_EVENTS: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_names_its_kind_as_sse_does_and_leaves_out_what_it_lacks() {
        let event = WatchEvent {
            id: "1".into(),
            kind: EventKind::HandedOff,
            key: "k".into(),
            at_millis: 5,
            fencing_token: Some(7),
            holder_id: Some("h".into()),
            owner: None,
            mode: Some(LockMode::Exclusive),
            limit: None,
            value: None,
            waiter_count: 0,
            state: None,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["kind"], EventKind::HandedOff.as_str());
        assert_eq!(json["fencingToken"], 7);
        assert!(json.get("value").is_none() && json.get("state").is_none());
        let back: WatchEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }
}
