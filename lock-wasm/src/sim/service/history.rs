//! [`History`]: the modelled server's own record of every ticket and hold of every key, in
//! the order they happened. The simulation checks the shared-hold invariants over it (see
//! `invariants`), independently of the state the model keeps to answer requests, so a rule
//! the model breaks shows even when no client noticed.

use std::time::Duration;

use lock_api::HoldKind;

/// One change to a key's tickets or holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A ticket joined the key's queue (tickets are numbered in arrival order, across keys).
    Queued {
        ticket: u64,
        session: String,
        kind: HoldKind,
    },
    /// A ticket left the queue: granted, dead (its grace period passed or its session
    /// ended), or taken over by a fresh grant to its session.
    Left { ticket: u64 },
    /// A hold began: a fresh grant of an L4, or a hand-off to `ticket`.
    Granted {
        token: u64,
        session: String,
        kind: HoldKind,
        ticket: Option<u64>,
    },
    /// A hold ended (L6, R1, L3, its own expiry or its session's).
    Ended { token: u64 },
}

/// A [`Step`] of one key at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub at: Duration,
    pub key: String,
    pub step: Step,
}

/// Every [`Event`] of a run, in order.
#[derive(Debug, Clone, Default)]
pub struct History {
    events: Vec<Event>,
}

impl History {
    /// Appends `step` of `key` at `at`.
    pub(super) fn record(&mut self, at: Duration, key: &str, step: Step) {
        self.events.push(Event {
            at,
            key: key.to_owned(),
            step,
        });
    }

    /// The events so far, oldest first.
    pub fn events(&self) -> &[Event] {
        &self.events
    }
}
