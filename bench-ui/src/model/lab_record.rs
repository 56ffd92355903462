//! What one fault-lab run recorded: per side (fenced, unfenced ledger) each contender's
//! grant, faults, client deadline, the lease's server-side end and the `lost` report; every
//! write with its outcome; the ledger read back. All times are ms since the run started, on
//! the page's clock. The lab timeline (`plot::lab_timeline`) and the exports are drawn from
//! it; the counters ([`Tally`]) are computed from the writes.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::lab_form::LabForm;
use super::lab_scenario::WriteOutcome;

/// What kind of fault a span is. `Revoke` is the operator's R1, an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FaultMark {
    Pause,
    Partition,
    Crash,
    Revoke,
}

impl FaultMark {
    /// Its name in the CSV and the chart's classes.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultMark::Pause => "pause",
            FaultMark::Partition => "partition",
            FaultMark::Crash => "crash",
            FaultMark::Revoke => "revoke",
        }
    }
}

/// One fault on a contender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultSpan {
    /// Which.
    pub kind: FaultMark,
    /// When it began.
    pub start: f64,
    /// When it ended; `None` while open (a crash never ends).
    pub end: Option<f64>,
}

/// One contender of one side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabContender {
    /// Its name: "A" (the one the scenario's fault hits) or "B".
    pub name: String,
    /// Its grant's fencing token, once granted.
    pub token: Option<u64>,
    /// When the grant arrived.
    pub granted_at: Option<f64>,
    /// The SDK's local deadline as it last stood (where the client stops trusting the
    /// lease).
    pub deadline_at: Option<f64>,
    /// When the lease ended on the server: its release, or the next contender's grant (B
    /// waits in the key's queue, so the server hands it the key the moment A's hold ends).
    pub lease_end_at: Option<f64>,
    /// When the SDK reported the handle lost (its `lost` event).
    pub lost_at: Option<f64>,
    /// Its faults (from its fault switch, plus the revokes).
    pub faults: Vec<FaultSpan>,
}

/// One ledger write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabWrite {
    /// Index of the writer among its side's contenders.
    pub contender: u32,
    /// The token it wrote with.
    pub token: u64,
    /// When the answer came.
    pub at: f64,
    /// Accepted, fenced out (409 FENCED_OUT) or corrupted (a stale token accepted).
    #[serde(with = "outcome")]
    pub outcome: WriteOutcome,
}

/// One entry of a ledger as read back (GET) after the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerLine {
    /// Its token.
    pub token: u64,
    /// Its text.
    pub entry: String,
    /// Whether the unfenced ledger flagged it stale (never on the fenced one).
    pub stale: bool,
}

/// One side of the lab: the same seeded script against the fenced or the unfenced ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabSide {
    /// Whether its writes go to the fenced ledger.
    pub fenced: bool,
    /// Its key (each side has its own).
    pub key: String,
    /// A, then B.
    pub contenders: Vec<LabContender>,
    /// Its writes, in the order answered.
    pub writes: Vec<LabWrite>,
    /// Its ledger as read back after the run.
    pub ledger: Vec<LedgerLine>,
}

/// The counters of one side, from its writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    /// Writes the ledger took as current.
    pub accepted: u32,
    /// Stale writes the fenced ledger refused (409 FENCED_OUT).
    pub fenced_out: u32,
    /// Stale writes the unfenced ledger took (`stale: true`).
    pub corrupted: u32,
}

impl Tally {
    /// Counts `writes` by outcome.
    pub fn of(writes: &[LabWrite]) -> Self {
        let mut tally = Tally::default();
        for w in writes {
            match w.outcome {
                WriteOutcome::Accepted => tally.accepted += 1,
                WriteOutcome::FencedOut => tally.fenced_out += 1,
                WriteOutcome::Corrupted => tally.corrupted += 1,
            }
        }
        tally
    }
}

impl LabSide {
    /// Its counters.
    pub fn tally(&self) -> Tally {
        Tally::of(&self.writes)
    }

    /// Its label on the page.
    pub fn label(&self) -> &'static str {
        if self.fenced {
            "fenced"
        } else {
            "unfenced"
        }
    }
}

/// A whole lab run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabRecord {
    /// The run's id (in its keys).
    pub run_id: String,
    /// The scenario and settings it ran.
    pub form: LabForm,
    /// Fenced, then unfenced.
    pub sides: Vec<LabSide>,
    /// Whether it has finished.
    pub done: bool,
    /// The first error, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl LabRecord {
    /// A run of `form` about to start, on the keys of `run_id`: both sides, contenders A and B.
    pub fn new(run_id: &str, form: LabForm) -> Self {
        let side = |fenced: bool| LabSide {
            fenced,
            key: lab_key(run_id, fenced),
            contenders: ["A", "B"]
                .iter()
                .map(|name| LabContender {
                    name: (*name).to_string(),
                    ..LabContender::default()
                })
                .collect(),
            ..LabSide::default()
        };
        LabRecord {
            run_id: run_id.to_string(),
            form,
            sides: vec![side(true), side(false)],
            done: false,
            error: None,
        }
    }

    /// The latest time recorded, ms: the timeline's end.
    pub fn end(&self) -> f64 {
        let mut end: f64 = 0.0;
        for side in &self.sides {
            for c in &side.contenders {
                let times = [c.granted_at, c.deadline_at, c.lease_end_at, c.lost_at];
                for t in times.into_iter().flatten() {
                    end = end.max(t);
                }
                for f in &c.faults {
                    end = end.max(f.end.unwrap_or(f.start));
                }
            }
            for w in &side.writes {
                end = end.max(w.at);
            }
        }
        end
    }

    /// Keeps the first error: later ones are usually consequences of it.
    pub fn note_error(&mut self, message: impl Into<String>) {
        self.error.get_or_insert_with(|| message.into());
    }
}

/// The key of one side of run `run_id`. Fresh per run, so an earlier run's highest token
/// never fences this one out; under `bench/` like every dashboard key (an auth file's client
/// for the dashboard is scoped to it).
pub fn lab_key(run_id: &str, fenced: bool) -> String {
    let side = if fenced { "fenced" } else { "unfenced" };
    format!("bench/{run_id}/lab-{side}")
}

/// A write outcome's name in JSON, the CSV and the page.
pub fn outcome_name(outcome: WriteOutcome) -> &'static str {
    match outcome {
        WriteOutcome::Accepted => "accepted",
        WriteOutcome::FencedOut => "fencedOut",
        WriteOutcome::Corrupted => "corrupted",
    }
}

/// A write outcome in JSON: its name.
mod outcome {
    use super::*;

    pub fn serialize<S: Serializer>(o: &WriteOutcome, out: S) -> Result<S::Ok, S::Error> {
        out.serialize_str(outcome_name(*o))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<WriteOutcome, D::Error> {
        let text = String::deserialize(input)?;
        [
            WriteOutcome::Accepted,
            WriteOutcome::FencedOut,
            WriteOutcome::Corrupted,
        ]
        .into_iter()
        .find(|o| outcome_name(*o) == text)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown outcome {text:?}")))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn write(contender: u32, token: u64, outcome: WriteOutcome) -> LabWrite {
        LabWrite {
            contender,
            token,
            at: 10.0 * token as f64,
            outcome,
        }
    }

    /// A gc-pause as it goes: B writes, then A wakes and writes its old token.
    pub(crate) fn gc_pause() -> LabRecord {
        let mut r = LabRecord::new("r1", LabForm::default());
        for (side, late) in [(0, WriteOutcome::FencedOut), (1, WriteOutcome::Corrupted)] {
            let s = &mut r.sides[side];
            let a = &mut s.contenders[0];
            a.token = Some(1);
            a.granted_at = Some(5.0);
            a.deadline_at = Some(905.0);
            a.lease_end_at = Some(1_110.0);
            a.lost_at = Some(2_610.0);
            a.faults.push(FaultSpan {
                kind: FaultMark::Pause,
                start: 105.0,
                end: Some(2_605.0),
            });
            s.contenders[1].token = Some(2);
            s.contenders[1].granted_at = Some(1_110.0);
            s.writes = vec![write(1, 2, WriteOutcome::Accepted), write(0, 1, late)];
            s.ledger = vec![LedgerLine {
                token: 2,
                entry: "B".into(),
                stale: false,
            }];
            if side == 1 {
                s.ledger.push(LedgerLine {
                    token: 1,
                    entry: "A".into(),
                    stale: true,
                });
            }
        }
        r
    }

    #[test]
    fn counters_come_from_the_write_outcomes() {
        let r = gc_pause();
        assert_eq!(
            r.sides[0].tally(),
            Tally {
                accepted: 1,
                fenced_out: 1,
                corrupted: 0
            }
        );
        assert_eq!(
            r.sides[1].tally(),
            Tally {
                accepted: 1,
                fenced_out: 0,
                corrupted: 1
            }
        );
        assert_eq!(Tally::of(&[]), Tally::default());
        let control = [
            write(0, 1, WriteOutcome::Accepted),
            write(1, 2, WriteOutcome::Accepted),
        ];
        assert_eq!(Tally::of(&control).accepted, 2);
        assert_eq!(
            Tally::of(&control).fenced_out + Tally::of(&control).corrupted,
            0
        );
    }

    #[test]
    fn each_side_has_its_own_key_and_both_contenders() {
        let r = LabRecord::new("r9", LabForm::default());
        let keys: Vec<&str> = r.sides.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["bench/r9/lab-fenced", "bench/r9/lab-unfenced"]);
        assert!(r.sides.iter().all(|s| s.contenders.len() == 2));
        assert_eq!(r.end(), 0.0);
        assert_eq!(gc_pause().end(), 2_610.0);
    }
}
