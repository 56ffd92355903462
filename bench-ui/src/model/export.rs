//! Exports of runs and sweeps as JSON (the whole record, replottable) and CSV (one row per
//! event, for spreadsheets).

use super::record::RunRecord;
use super::sweep::SweepResult;

/// The whole run as pretty JSON.
pub fn run_json(record: &RunRecord) -> String {
    // Serialising plain data with string keys cannot fail; fall back to an error object
    // rather than panicking if it ever did.
    serde_json::to_string_pretty(record).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// The whole sweep as pretty JSON.
pub fn sweep_json(sweep: &SweepResult) -> String {
    serde_json::to_string_pretty(sweep).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// Header of [`run_csv`].
pub const RUN_CSV_HEADER: &str =
    "kind,session,key,fencing_token,attempt,start_ms,end_ms,delay_ms,ceiling_ms,detail";

/// One row per sleep, hold and L7 sample. Kinds: `sleep`, `hold`, `sample`, and one
/// `counter` row per counter.
pub fn run_csv(record: &RunRecord) -> String {
    let mut out = format!("{RUN_CSV_HEADER}\n");
    for s in &record.sleeps {
        out.push_str(&format!(
            "sleep,{},,,{},,,{},{},\n",
            s.session, s.attempt, s.delay_millis, s.ceiling_millis
        ));
    }
    for h in &record.holds {
        let end = h.released_at.map(|t| format!("{t:.1}")).unwrap_or_default();
        let ledger = if h.ledger_accepted {
            "ledger ok"
        } else {
            "ledger refused"
        };
        out.push_str(&format!(
            "hold,{},{},{},{},{:.1},{end},,,{ledger}\n",
            h.session,
            csv_field(&h.key),
            h.fencing_token,
            h.attempts,
            h.granted_at
        ));
    }
    for s in &record.samples {
        let (session, token) = match &s.holder {
            Some((id, token)) => (
                record
                    .session_index(id)
                    .map(|i| i.to_string())
                    .unwrap_or_else(|| csv_field(id)),
                token.to_string(),
            ),
            None => (String::new(), String::new()),
        };
        out.push_str(&format!(
            "sample,{session},{},{token},,{:.1},,,,waiters={}\n",
            csv_field(&s.key),
            s.at,
            s.waiter_count
        ));
    }
    for (name, value) in record.counters.entries() {
        out.push_str(&format!("counter,,,,,,,,,{name}={value}\n"));
    }
    out
}

/// Header of [`sweep_csv`].
pub const SWEEP_CSV_HEADER: &str =
    "strategy,contenders,l4_calls,grants,gave_up,calls_per_grant,completion_ms";

/// One row per sweep point.
pub fn sweep_csv(sweep: &SweepResult) -> String {
    let mut out = format!("{SWEEP_CSV_HEADER}\n");
    for p in &sweep.points {
        let per_grant = p
            .counters
            .calls_per_grant()
            .map(|v| format!("{v:.3}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{},{},{},{},{},{per_grant},{:.1}\n",
            p.strategy.id(),
            p.contenders,
            p.counters.l4_calls,
            p.counters.grants,
            p.counters.gave_up,
            p.completion_millis
        ));
    }
    out
}

/// Quotes a field when it holds a comma, quote or newline (RFC 4180).
fn csv_field(value: &str) -> String {
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::counters::Counters;
    use crate::model::record::{Hold, Sample, Sleep};
    use crate::model::sweep::SweepPoint;
    use lock_lab::strategy::Strategy;

    fn record() -> RunRecord {
        let mut r = RunRecord::new("r1", Default::default());
        r.session_ids = vec!["sid0".into()];
        r.sleeps.push(Sleep {
            session: 0,
            attempt: 2,
            delay_millis: 17,
            ceiling_millis: 40,
        });
        r.holds.push(Hold {
            session: 0,
            session_id: "sid0".into(),
            key: "bench/r1,k0".into(),
            fencing_token: 7,
            attempts: 3,
            granted_at: 12.0,
            released_at: Some(52.5),
            ledger_accepted: true,
        });
        r.samples.push(Sample {
            at: 20.0,
            key: "bench/r1,k0".into(),
            holder: Some(("sid0".into(), 7)),
            waiter_count: 2,
        });
        r.counters.grants = 1;
        r
    }

    #[test]
    fn json_round_trips() {
        let r = record();
        let back: RunRecord = serde_json::from_str(&run_json(&r)).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn csv_has_one_row_per_event_and_quotes_keys() {
        let csv = run_csv(&record());
        let lines: Vec<_> = csv.lines().collect();
        assert_eq!(lines[0], RUN_CSV_HEADER);
        assert_eq!(lines[1], "sleep,0,,,2,,,17,40,");
        assert_eq!(lines[2], "hold,0,\"bench/r1,k0\",7,3,12.0,52.5,,,ledger ok");
        assert_eq!(lines[3], "sample,0,\"bench/r1,k0\",7,,20.0,,,,waiters=2");
        assert_eq!(lines[4], "counter,,,,,,,,,grants=1");
        let columns = RUN_CSV_HEADER.split(',').count();
        assert_eq!(lines[1].split(',').count(), columns);
    }

    #[test]
    fn sweep_csv_lists_points() {
        let sweep = SweepResult {
            points: vec![SweepPoint {
                strategy: Strategy::EqualJitter,
                contenders: 10,
                counters: Counters {
                    grants: 10,
                    l4_calls: 25,
                    ..Default::default()
                },
                completion_millis: 812.75,
            }],
            ..Default::default()
        };
        let csv = sweep_csv(&sweep);
        assert_eq!(csv.lines().nth(1), Some("equal,10,25,10,0,2.500,812.8"));
        assert!(sweep_json(&sweep).contains("\"contenders\": 10"));
    }
}
