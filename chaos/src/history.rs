//! The recorded history of a chaos run: what every contender, the L7 sampler and the fault
//! injector observed, one JSON object per line.
//!
//! Every observation carries a *window* `[sent, recv]` in microseconds of wall-clock time
//! (`CLOCK_REALTIME`, shared by all processes on one machine): the event happened somewhere
//! inside it, and the checker only draws conclusions that hold for every point of every window.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use lock_api::{LockMode, LockState};
use serde::{Deserialize, Serialize};

/// Microseconds since the Unix epoch: the history's shared time base across processes.
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// A time window `[sent, recv]` in microseconds: the observed thing happened inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// When the request left (or the observation started).
    pub sent: u64,
    /// When the answer arrived (or the observation ended).
    pub recv: u64,
}

impl Window {
    /// A window from `sent` to now.
    pub fn since(sent: u64) -> Window {
        Window {
            sent,
            recv: now_micros(),
        }
    }
}

/// What the ledger answered to a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerVerdict {
    /// 204: appended.
    Accepted,
    /// 409 FENCED_OUT: a higher token was seen first.
    FencedOut,
    /// Anything else (server down, timeout): unknown whether it was applied.
    Indeterminate,
}

/// How an acquire call ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcquireOutcome {
    /// `Ok(Some(handle))` with this token.
    Granted { token: u64 },
    /// `Ok(None)`: budget or attempts used up.
    NotGranted,
    /// `Err(_)`, with the error's display text.
    Failed { error: String },
}

/// One observation. `proc` names the process that made it (`c17`, `sampler`, `chaos`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// An acquire call began, with the budget of its policy.
    AcquireStart {
        proc: String,
        key: String,
        at: u64,
        budget_ms: u64,
    },
    /// The acquire call begun by the matching [`Event::AcquireStart`] returned.
    AcquireEnd {
        proc: String,
        key: String,
        at: u64,
        outcome: AcquireOutcome,
    },
    /// A grant: the server issued `token` to `session` inside `window` (the acquire call),
    /// in `mode` (as the grant said; exclusive in histories from before shared holds) and,
    /// for a shared grant, under `limit`.
    Grant {
        proc: String,
        session: String,
        key: String,
        token: u64,
        window: Window,
        #[serde(default)]
        mode: LockMode,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
    },
    /// L6 for `token`; `ok` = 204 (so the lock was live inside the window), else LOCK_LOST
    /// or an indeterminate failure.
    Release {
        proc: String,
        key: String,
        token: u64,
        window: Window,
        ok: bool,
    },
    /// A write to the fenced ledger with `token`. `lost_after` is the SDK handle's
    /// `is_lost()` read right after the answer.
    LedgerWrite {
        proc: String,
        key: String,
        token: u64,
        window: Window,
        verdict: LedgerVerdict,
        lost_after: bool,
    },
    /// L7 read: the exclusive holder (`token`) the server reported inside `window`, if any;
    /// every holder's token (`holders`, either mode), how the key was held (`mode`, `None`
    /// when free) and the shared holders' `limit`. One answer is one instant of the store.
    L7Sample {
        proc: String,
        key: String,
        token: Option<u64>,
        window: Window,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        holders: Vec<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<LockMode>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
    },
    /// The holder of `token` asked its SDK handle whether the hold is lost, inside `window`:
    /// `valid` = not lost, which the SDK only says while the server still holds the lock
    /// (its local deadline ends before the server's lease).
    HoldCheck {
        proc: String,
        key: String,
        token: u64,
        window: Window,
        valid: bool,
    },
    /// A reader holding `token` read the fenced ledger of `key` inside `window`; `highest`
    /// is the highest token it held (each one was certainly granted by then).
    LedgerRead {
        proc: String,
        key: String,
        token: u64,
        window: Window,
        highest: Option<u64>,
    },
    /// The ledger's full content for a key read at the end, in acceptance order.
    LedgerSnapshot { key: String, tokens: Vec<u64> },
    /// A fault the injector caused: `kind` is `pause` (SIGSTOP..SIGCONT of `target`),
    /// `server_kill` (kill -9 and restart) or `etcd_kill`.
    Fault {
        kind: String,
        target: String,
        window: Window,
    },
}

impl Event {
    /// The L7 sample of `state`, read by `proc` inside `window`.
    pub fn l7_sample(proc: &str, key: &str, state: &LockState, window: Window) -> Event {
        Event::L7Sample {
            proc: proc.into(),
            key: key.into(),
            token: state.holder.as_ref().map(|h| h.fencing_token),
            window,
            holders: state.holders.iter().map(|h| h.fencing_token).collect(),
            mode: state.mode,
            limit: state.limit,
        }
    }

    /// The process that recorded the event (`""` for snapshots).
    pub fn proc(&self) -> &str {
        match self {
            Event::AcquireStart { proc, .. }
            | Event::AcquireEnd { proc, .. }
            | Event::Grant { proc, .. }
            | Event::Release { proc, .. }
            | Event::LedgerWrite { proc, .. }
            | Event::L7Sample { proc, .. }
            | Event::HoldCheck { proc, .. }
            | Event::LedgerRead { proc, .. } => proc,
            Event::Fault { target, .. } => target,
            Event::LedgerSnapshot { .. } => "",
        }
    }
}

/// Appends events to a JSON-lines file, flushing each line so a SIGKILL loses at most one.
pub struct HistoryWriter {
    out: std::io::BufWriter<std::fs::File>,
}

impl HistoryWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> std::io::Result<HistoryWriter> {
        Ok(HistoryWriter {
            out: std::io::BufWriter::new(std::fs::File::create(path)?),
        })
    }

    /// Writes one event as a line.
    pub fn record(&mut self, event: &Event) -> std::io::Result<()> {
        let line = serde_json::to_string(event).map_err(std::io::Error::other)?;
        writeln!(self.out, "{line}")?;
        self.out.flush()
    }
}

/// Reads a JSON-lines history; a torn last line (a killed writer) is skipped, any other bad
/// line is an error.
pub fn read_history(path: &Path) -> std::io::Result<Vec<Event>> {
    let file = std::fs::File::open(path)?;
    let lines: Vec<String> = BufReader::new(file).lines().collect::<Result<_, _>>()?;
    let mut events = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(e) => events.push(e),
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => {
                return Err(std::io::Error::other(format!(
                    "{}:{}: {e}",
                    path.display(),
                    i + 1
                )))
            }
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let events = vec![
            Event::AcquireStart {
                proc: "c1".into(),
                key: "k".into(),
                at: 1,
                budget_ms: 10,
            },
            Event::LedgerWrite {
                proc: "c1".into(),
                key: "k".into(),
                token: 3,
                window: Window { sent: 2, recv: 3 },
                verdict: LedgerVerdict::FencedOut,
                lost_after: true,
            },
        ];
        let mut w = HistoryWriter::create(&path).unwrap();
        for e in &events {
            w.record(e).unwrap();
        }
        drop(w);
        // A torn last line, as a SIGKILL mid-write leaves it, is skipped.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"type\":\"gra")
            .unwrap();
        assert_eq!(read_history(&path).unwrap(), events);
    }

    #[test]
    fn a_grant_from_before_shared_holds_reads_as_exclusive_and_a_shared_one_round_trips() {
        let old = r#"{"type":"grant","proc":"c1","session":"s","key":"k","token":7,"window":{"sent":1,"recv":2}}"#;
        let Event::Grant { mode, limit, .. } = serde_json::from_str(old).unwrap() else {
            panic!("not a grant");
        };
        assert_eq!((mode, limit), (LockMode::Exclusive, None));
        let shared = Event::Grant {
            proc: "s1".into(),
            session: "s".into(),
            key: "sem".into(),
            token: 8,
            window: Window { sent: 1, recv: 2 },
            mode: LockMode::Shared,
            limit: Some(3),
        };
        let line = serde_json::to_string(&shared).unwrap();
        assert!(line.contains(r#""mode":"shared","limit":3"#), "{line}");
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), shared);
    }
}
