//! Injected faults of one contender (the dashboard's fault lab and its simulation): a
//! [`FaultSwitch`] hands a client the clock and the transport it runs on, and
//! [`FaultSwitch::inject`] makes them misbehave from the instant of the call, as a real
//! process and network would. Each fault is modelled at the seams the SDK already has, so
//! the SDK under test is the unchanged one, and the same code runs live and simulated:
//!
//! - **Pause** (a stop-the-world GC pause, a SIGSTOP, a VM migration): the process's timers
//!   and requests stop. A sleep of the switch's clock whose end falls inside a pause ends
//!   when the pause ends (the process wakes late, as a paused one does, and finds the time
//!   moved on: `now()` is never held back); a request made during a pause leaves at its end,
//!   and an answer that arrives during one is read at its end. The heartbeat task sleeps on
//!   the client's clock and sends through its transport, so it sends nothing during the
//!   pause either. What the process's own code does between two awaits cannot be stopped
//!   from outside: a worker awaits [`FaultSwitch::gate`] before a side effect, so a paused
//!   worker writes only after the pause, with the token it had.
//! - **Partition** (a cable pulled, a firewall, a black-holed route): requests fail or hang.
//!   With `hang: false` each request fails at once with [`TransportError::Network`] (a refused
//!   connection); with `hang: true` it hangs until the partition heals and then fails the
//!   same way (packets dropped; the SDK's own timeout on its clock usually ends it first).
//!   Either way nothing reaches the server, and an answer that comes back while a partition
//!   is in force is lost: the SDK treats both exactly as it treats a dropped connection. The
//!   process itself runs on.
//! - **Crash** (a process killed): nothing more reaches the server, ever — no L2, no L3 on
//!   close or drop, no L6 — so the server learns of it only when the session's TTL passes.
//!   Every request fails at once with [`TransportError::Network`]. The client's local tasks
//!   run down on their own (its heartbeats fail until its session is lost locally, freeing
//!   their memory); nobody outside sees them, and the worker's code asks
//!   [`FaultSwitch::is_crashed`] to stop doing work.
//!
//! All times are readings of the clock given to [`FaultSwitch::new`]; nothing here reads or
//! waits on time another way. The component tests are `tests/fault_switch.rs` (an
//! integration test: they drive the client on the simulation's executor, and `sim::lab`
//! builds on this module, so tests in here would close an import circle).

mod clock;
mod transport;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::Clock;
use crate::error::TransportError;
use crate::spawn::BoxFuture;
use crate::transport::{Intercepted, Transport};

use clock::FaultClock;
use transport::FaultIntercept;

/// A fault to inject into one contender, from the instant of [`FaultSwitch::inject`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The contender's work and heartbeats stop for the duration (a GC pause).
    Pause(Duration),
    /// Its requests fail with [`TransportError::Network`] (`hang: false`) or hang until the
    /// partition heals and then fail (`hang: true`), heartbeats included.
    Partition {
        /// How long until the partition heals.
        length: Duration,
        /// Whether requests hang until the heal (dropped packets) rather than fail at once
        /// (refused connections).
        hang: bool,
    },
    /// It vanishes: from now on every request fails and nothing reaches the server (no L3,
    /// no L6).
    Crash,
}

impl Fault {
    /// The kind of fault, without its parameters.
    pub fn kind(self) -> FaultKind {
        match self {
            Fault::Pause(_) => FaultKind::Pause,
            Fault::Partition { .. } => FaultKind::Partition,
            Fault::Crash => FaultKind::Crash,
        }
    }
}

/// What kind of fault a [`FaultSpan`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// [`Fault::Pause`].
    Pause,
    /// [`Fault::Partition`].
    Partition,
    /// [`Fault::Crash`].
    Crash,
}

impl FaultKind {
    /// Its name on the dashboard and in logs: `pause`, `partition`, `crash`.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::Crash => "crash",
        }
    }
}

/// One injected fault on the timeline: `[start, end)` in the switch's clock times; `end` is
/// `None` for a crash, which never ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSpan {
    /// Which fault.
    pub kind: FaultKind,
    /// When it was injected.
    pub start: Duration,
    /// When it ends (`None`: never).
    pub end: Option<Duration>,
}

impl FaultSpan {
    /// Whether the fault is in force at `at`.
    pub fn covers(&self, at: Duration) -> bool {
        self.start <= at && self.end.is_none_or(|end| at < end)
    }
}

/// The faults of one contender and the seams they act through. One per contender; cheap to
/// clone (clones share the faults).
#[derive(Clone)]
pub struct FaultSwitch {
    shared: Arc<Shared>,
}

/// What a switch and the clock and transports it handed out share.
struct Shared {
    /// The real clock: every time is read, and every wait made, on it.
    clock: Arc<dyn Clock>,
    /// Every fault injected, in injection order, with whether a partition hangs.
    faults: Mutex<Vec<(FaultSpan, bool)>>,
}

/// The state of the switch at one instant, for the clock and the transport.
enum InForce {
    /// Nothing: time and requests pass.
    Nothing,
    /// A pause (or overlapping pauses) ending at this instant.
    Paused(Duration),
    /// A partition healing at this instant, and whether requests hang until then.
    Partitioned(Duration, bool),
    /// A crash: for good.
    Crashed,
}

impl Shared {
    /// What is in force at `at`: a crash over a pause (a dead process does not wake) over a
    /// partition (a paused process sends nothing; it meets the partition when it wakes).
    fn at(&self, at: Duration) -> InForce {
        let faults = self.faults.lock().unwrap();
        let covering = || faults.iter().filter(move |(span, _)| span.covers(at));
        if covering().any(|(span, _)| span.kind == FaultKind::Crash) {
            return InForce::Crashed;
        }
        let pause_end = covering()
            .filter(|(span, _)| span.kind == FaultKind::Pause)
            .filter_map(|(span, _)| span.end)
            .max();
        if let Some(end) = pause_end {
            return InForce::Paused(end);
        }
        let partition = covering()
            .filter(|(span, _)| span.kind == FaultKind::Partition)
            .filter_map(|(span, hang)| span.end.map(|end| (end, *hang)))
            .max();
        match partition {
            Some((end, hang)) => InForce::Partitioned(end, hang),
            None => InForce::Nothing,
        }
    }

    /// Waits, on the real clock, until no pause is in force (a pause injected while it
    /// waits is waited out too). `background` makes each wait a background sleep.
    async fn wait_out_pauses(&self, background: bool) {
        loop {
            let now = self.clock.now();
            let InForce::Paused(end) = self.at(now) else {
                return;
            };
            let left = end.saturating_sub(now);
            if background {
                self.clock.background_sleep(left).await;
            } else {
                self.clock.sleep(left).await;
            }
        }
    }
}

/// Why a request of a partitioned or crashed contender failed: what a refused or reset
/// connection gives, so the SDK handles it as one.
fn cut_off(why: &str) -> TransportError {
    TransportError::Network(format!("injected fault: {why}"))
}

impl FaultSwitch {
    /// A switch with no fault yet, on `clock` (the contender's real clock).
    pub fn new(clock: Arc<dyn Clock>) -> FaultSwitch {
        FaultSwitch {
            shared: Arc::new(Shared {
                clock,
                faults: Mutex::default(),
            }),
        }
    }

    /// Injects `fault`, starting now on the switch's clock. A pause or partition of zero
    /// length does nothing; faults may overlap (overlapping pauses end at the last end).
    pub fn inject(&self, fault: Fault) {
        let start = self.shared.clock.now();
        let (end, hang) = match fault {
            Fault::Pause(length) => (Some(start + length), false),
            Fault::Partition { length, hang } => (Some(start + length), hang),
            Fault::Crash => (None, false),
        };
        let span = FaultSpan {
            kind: fault.kind(),
            start,
            end,
        };
        self.shared.faults.lock().unwrap().push((span, hang));
    }

    /// Every fault injected so far, in injection order (for the timeline).
    pub fn spans(&self) -> Vec<FaultSpan> {
        let faults = self.shared.faults.lock().unwrap();
        faults.iter().map(|(span, _)| *span).collect()
    }

    /// Whether the contender has crashed.
    pub fn is_crashed(&self) -> bool {
        let faults = self.shared.faults.lock().unwrap();
        faults.iter().any(|(span, _)| span.kind == FaultKind::Crash)
    }

    /// The fault in force now, if any (a crash over a pause over a partition).
    pub fn in_force(&self) -> Option<FaultKind> {
        match self.shared.at(self.shared.clock.now()) {
            InForce::Nothing => None,
            InForce::Paused(_) => Some(FaultKind::Pause),
            InForce::Partitioned(..) => Some(FaultKind::Partition),
            InForce::Crashed => Some(FaultKind::Crash),
        }
    }

    /// The contender's clock: a sleep whose end falls inside a pause ends when the pause
    /// ends; `now()` is the real clock's.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(FaultClock(self.shared.clone()))
    }

    /// The contender's transport: a request made during a pause waits for its end; during a
    /// partition it fails or hangs; after a crash it fails at once; else passes through to
    /// `inner`. An answer is treated the same way when it comes back.
    pub fn transport(&self, inner: Arc<dyn Transport>) -> Arc<dyn Transport> {
        Arc::new(Intercepted::new(inner, FaultIntercept(self.shared.clone())))
    }

    /// Resolves when no pause is in force (the worker's own code calls it before its write,
    /// so a paused worker writes only after the pause, with the token it had).
    pub fn gate(&self) -> BoxFuture<'static, ()> {
        let shared = self.shared.clone();
        Box::pin(async move { shared.wait_out_pauses(false).await })
    }
}
