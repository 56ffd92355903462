//! [`LabScenario`]: the fault lab's five scenarios — their names, what the page says about
//! each, and the settings each starts from ([`LabSettings`]).

use crate::renewal::MIN_SAFETY_MARGIN;

/// One scenario of the fault lab: which fault hits contender A while it holds the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabScenario {
    /// A pauses (a stop-the-world GC) for longer than its lock's TTL.
    GcPause,
    /// A is cut off from the server for longer than its lock's TTL.
    Partitioned,
    /// A crashes.
    Crashed,
    /// An operator revokes A's hold (R1) while A works.
    OperatorRevoke,
    /// The control: A pauses for less than the safety margin.
    ShortPause,
}

/// The knobs of one lab run (live or simulated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabSettings {
    /// Both contenders' lock TTL.
    pub lock_ttl_ms: u64,
    /// Both contenders' session TTL.
    pub session_ttl_ms: u64,
    /// The fault's length: the pause's, the partition's; for a revoke or a crash, how long A
    /// would go on working after it.
    pub fault_ms: u64,
    /// Whether a contender skips its write once its handle is lost (its signal aborted).
    pub honours_signal: bool,
    /// The simulation's seed (network delays, backoff draws).
    pub seed: u64,
}

impl LabScenario {
    /// The five, in the page's order.
    pub fn all() -> [LabScenario; 5] {
        [
            LabScenario::GcPause,
            LabScenario::Partitioned,
            LabScenario::Crashed,
            LabScenario::OperatorRevoke,
            LabScenario::ShortPause,
        ]
    }

    /// Its name in URLs and forms.
    pub fn slug(self) -> &'static str {
        match self {
            LabScenario::GcPause => "gc-pause",
            LabScenario::Partitioned => "partitioned",
            LabScenario::Crashed => "crashed",
            LabScenario::OperatorRevoke => "revoke",
            LabScenario::ShortPause => "short-pause",
        }
    }

    /// The scenario a [`LabScenario::slug`] names.
    pub fn from_slug(slug: &str) -> Option<LabScenario> {
        LabScenario::all().into_iter().find(|s| s.slug() == slug)
    }

    /// Its heading on the page.
    pub fn title(self) -> &'static str {
        match self {
            LabScenario::GcPause => "GC pause longer than the lease",
            LabScenario::Partitioned => "Network partition",
            LabScenario::Crashed => "Crashed holder",
            LabScenario::OperatorRevoke => "Operator revokes the lock",
            LabScenario::ShortPause => "Short pause (control)",
        }
    }

    /// One paragraph for the page: what happens and what it proves.
    pub fn explanation(self) -> &'static str {
        match self {
            LabScenario::GcPause => {
                "A holds the lock and is frozen by a long garbage-collection pause about 100 ms \
                 into its work: its code and its heartbeats stop, so nothing renews the lease. \
                 The server lets the lease expire and hands the key to B, which writes with a \
                 higher fencing token. Then A wakes up, unaware that time passed, and writes with \
                 its old token. The fenced ledger refuses that write (fenced out); the unfenced \
                 ledger accepts it, so a stale holder overwrites newer data (corrupted). A lease \
                 alone cannot stop this, because the pause can strike between any check and the \
                 write: only the resource comparing tokens can. A worker that honours its signal \
                 sees its handle is lost when it wakes and skips the write."
            }
            LabScenario::Partitioned => {
                "A holds the lock when the network between A and the server fails for longer than \
                 the lock's TTL. A keeps running, but its heartbeats fail, so the server lets the \
                 lease expire and grants the key to B, which writes with a higher token. A's SDK \
                 reports the lock lost at its local deadline, but a worker that ignores the signal \
                 carries on and writes with its old token once the network heals. The fenced \
                 ledger refuses the stale write; the unfenced one accepts it. It proves that a \
                 holder cut off from the lock service cannot tell whether it still holds the lock, \
                 and that the token check at the resource is what keeps the data safe."
            }
            LabScenario::Crashed => {
                "A crashes shortly after taking the lock. From then on nothing of A reaches the \
                 server: no heartbeat, no release, no goodbye. B, queued for the key, waits until \
                 A's session TTL passes without a heartbeat; the server then ends A's session, \
                 frees the key, and B takes it and writes. A never writes again, so neither ledger \
                 sees a stale write. It shows that a dead holder costs time (up to a session TTL), \
                 never correctness: the lock does not need the holder's help to be released."
            }
            LabScenario::OperatorRevoke => {
                "While A works, an operator revokes A's hold (force release). The server frees the \
                 key at once and hands it to B, which writes with a higher token. A learns of the \
                 loss at its next heartbeat, whose answer no longer lists the lock, and its \
                 handle's signal fires. A worker that ignores the signal finishes its work and \
                 writes late with its old token: fenced out by the fenced ledger, corrupting the \
                 unfenced one. A worker that honours it skips the write. Revoking is safe for the \
                 data only because the resource checks tokens."
            }
            LabScenario::ShortPause => {
                "The control experiment: A pauses too, but for less than the safety margin the SDK \
                 keeps between its local deadline and the server's lease. The next heartbeat is \
                 still in time, A never loses the lock, writes, and releases it; then B gets the \
                 key and writes with the next token. No write is fenced out and none is stale: \
                 short hiccups cost nothing, and fencing only ever refuses a holder that really \
                 lost its lock."
            }
        }
    }

    /// The settings the scenario starts from: each shows its fault plainly (the pauses and
    /// the partition outlast the lock's TTL plus its safety margin, the control's pause is
    /// shorter than the margin; the crash's session TTL is the shorter, so the session's
    /// end is what frees the key) and A ignores its signal, so the fence has work to do.
    pub fn default_settings(self) -> LabSettings {
        let base = LabSettings {
            lock_ttl_ms: 2_000,
            session_ttl_ms: 6_000,
            fault_ms: 3_000,
            honours_signal: false,
            seed: 1,
        };
        match self {
            LabScenario::GcPause | LabScenario::Partitioned => base,
            LabScenario::Crashed => LabSettings {
                lock_ttl_ms: 5_000,
                session_ttl_ms: 3_000,
                fault_ms: 1_000,
                ..base
            },
            LabScenario::OperatorRevoke => LabSettings {
                fault_ms: 1_500,
                ..base
            },
            LabScenario::ShortPause => LabSettings {
                fault_ms: MIN_SAFETY_MARGIN.as_millis() as u64 - 100,
                ..base
            },
        }
    }
}
