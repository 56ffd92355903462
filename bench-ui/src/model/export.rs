//! Exports of runs and sweeps as JSON (the whole record, replottable) and CSV (one row per
//! event, for spreadsheets).

use lock_api::LockMode;

use super::lab_record::{outcome_name, LabRecord};
use super::record::RunRecord;
use super::server_clock::ServerClock;
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
    "kind,session,key,fencing_token,mode,attempt,start_ms,end_ms,delay_ms,ceiling_ms,detail";

/// One row per sleep, hold, L7 holder (a sample of a free key is one row without a holder)
/// and L8 event. Kinds: `sleep`, `hold`, `sample`, `event` (its time is the server's commit
/// on the run's clock, `model::server_clock`; its kind and the waiters in `detail`), and one
/// `counter` row per counter (with a stream, `missed by sampling` among them). `mode` is
/// `exclusive` or `shared` for holds and holders; a shared hold's limit, when it has one, is
/// in `detail`.
pub fn run_csv(record: &RunRecord) -> String {
    let mut out = format!("{RUN_CSV_HEADER}\n");
    for s in &record.sleeps {
        out.push_str(&format!(
            "sleep,{},,,,{},,,{},{},\n",
            s.session, s.attempt, s.delay_millis, s.ceiling_millis
        ));
    }
    for h in &record.holds {
        let end = h.released_at.map(|t| format!("{t:.1}")).unwrap_or_default();
        let ledger = if h.mode == LockMode::Shared {
            "no ledger write (shared)"
        } else if h.ledger_accepted {
            "ledger ok"
        } else {
            "ledger refused"
        };
        let limit = h.limit.map(|l| format!(" limit={l}")).unwrap_or_default();
        out.push_str(&format!(
            "hold,{},{},{},{},{},{:.1},{end},,,{ledger} waited={:.1}{limit}\n",
            h.session,
            csv_field(&h.key),
            h.fencing_token,
            h.mode.as_str(),
            h.attempts,
            h.granted_at,
            h.granted_at - h.asked_at
        ));
    }
    for s in &record.samples {
        let limit = s.limit.map(|l| format!(" limit={l}")).unwrap_or_default();
        let mut row = |session: &str, token: &str, mode: &str| {
            out.push_str(&format!(
                "sample,{session},{},{token},{mode},,{:.1},,,,waiters={}{limit}\n",
                csv_field(&s.key),
                s.at,
                s.waiter_count
            ));
        };
        if s.holders.is_empty() {
            row("", "", "");
        }
        let mode = s.mode.unwrap_or_default().as_str();
        for (holder_id, token) in &s.holders {
            let session = record
                .holder_index(&s.key, *token)
                .map(|i| i.to_string())
                .unwrap_or_else(|| csv_field(holder_id));
            row(&session, &token.to_string(), mode);
        }
    }
    if let Some(clock) = ServerClock::fit(&record.events) {
        for o in &record.events {
            let e = &o.event;
            let session = e
                .fencing_token
                .and_then(|t| record.holder_index(&e.key, t))
                .map(|i| i.to_string())
                .unwrap_or_default();
            let token = e.fencing_token.map(|t| t.to_string()).unwrap_or_default();
            let mode = e.mode.map(LockMode::as_str).unwrap_or_default();
            out.push_str(&format!(
                "event,{session},{},{token},{mode},,{:.1},,,,{} waiters={}\n",
                csv_field(&e.key),
                clock.to_run(e.at_millis),
                e.kind.as_str(),
                e.waiter_count
            ));
        }
    }
    for (name, value) in record.counters.entries() {
        out.push_str(&format!("counter,,,,,,,,,,{name}={value}\n"));
    }
    out
}

/// Header of [`sweep_csv`].
pub const SWEEP_CSV_HEADER: &str = "strategy,contenders,l4_calls,grants,gave_up,\
    calls_per_grant,completion_ms,utilisation,max_over_median_wait";

/// One row per sweep point.
pub fn sweep_csv(sweep: &SweepResult) -> String {
    let mut out = format!("{SWEEP_CSV_HEADER}\n");
    for p in &sweep.points {
        let per_grant = p
            .counters
            .calls_per_grant()
            .map(|v| format!("{v:.3}"))
            .unwrap_or_default();
        let figure = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
        out.push_str(&format!(
            "{},{},{},{},{},{per_grant},{:.1},{},{}\n",
            p.strategy.id(),
            p.contenders,
            p.counters.l4_calls,
            p.counters.grants,
            p.counters.gave_up,
            p.completion_millis,
            figure(p.utilisation),
            figure(p.max_over_median),
        ));
    }
    out
}

/// A fault-lab run as pretty JSON: its scenario and settings, and per side its faults,
/// leases, writes with their outcomes and the ledger read back.
pub fn lab_json(record: &LabRecord) -> String {
    serde_json::to_string_pretty(record).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// Header of [`lab_csv`].
pub const LAB_CSV_HEADER: &str = "kind,side,contender,fencing_token,start_ms,end_ms,detail";

/// One row per fault, lease (grant to server-side end, its deadline and `lost` in
/// `detail`), write (its outcome in `detail`) and ledger entry read back, then one `setting`
/// row with the form as the page's URL writes it.
pub fn lab_csv(record: &LabRecord) -> String {
    let mut out = format!("{LAB_CSV_HEADER}\n");
    let ms = |t: Option<f64>| t.map(|t| format!("{t:.1}")).unwrap_or_default();
    for side in &record.sides {
        let label = side.label();
        for c in &side.contenders {
            let token = c.token.map(|t| t.to_string()).unwrap_or_default();
            for f in &c.faults {
                out.push_str(&format!(
                    "fault,{label},{},{token},{:.1},{},{}\n",
                    c.name,
                    f.start,
                    ms(f.end),
                    f.kind.as_str()
                ));
            }
            if c.granted_at.is_some() {
                out.push_str(&format!(
                    "lease,{label},{},{token},{},{},deadline={} lost={}\n",
                    c.name,
                    ms(c.granted_at),
                    ms(c.lease_end_at),
                    ms(c.deadline_at),
                    ms(c.lost_at)
                ));
            }
        }
        for w in &side.writes {
            let name = side
                .contenders
                .get(w.contender as usize)
                .map_or("", |c| c.name.as_str());
            out.push_str(&format!(
                "write,{label},{name},{},{:.1},,{}\n",
                w.token,
                w.at,
                outcome_name(w.outcome)
            ));
        }
        for l in &side.ledger {
            let stale = if l.stale { " stale" } else { "" };
            out.push_str(&format!(
                "ledger,{label},,{},,,{}{stale}\n",
                l.token,
                csv_field(&l.entry)
            ));
        }
    }
    out.push_str(&format!(
        "setting,,,,,,{}\n",
        csv_field(&record.form.to_query())
    ));
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
        r.sleeps.push(Sleep {
            session: 0,
            attempt: 2,
            delay_millis: 17,
            ceiling_millis: 40,
        });
        r.holds.push(Hold {
            session: 0,
            key: "bench/r1,k0".into(),
            fencing_token: 7,
            mode: LockMode::Exclusive,
            limit: None,
            attempts: 3,
            asked_at: 2.0,
            granted_at: 12.0,
            released_at: Some(52.5),
            ledger_accepted: true,
        });
        r.samples.push(Sample {
            at: 20.0,
            key: "bench/r1,k0".into(),
            mode: Some(LockMode::Exclusive),
            holders: vec![("holder0".into(), 7)],
            limit: None,
            waiter_count: 2,
        });
        r.counters.grants = 1;
        r
    }

    /// Two readers of a semaphore of 3 permits, then the key free.
    fn shared_record() -> RunRecord {
        let mut r = RunRecord::new("r2", Default::default());
        for (session, token) in [(0, 8), (1, 9)] {
            r.holds.push(Hold {
                session,
                key: "k".into(),
                fencing_token: token,
                mode: LockMode::Shared,
                limit: Some(3),
                attempts: 1,
                asked_at: 0.0,
                granted_at: 1.0,
                released_at: None,
                ledger_accepted: false,
            });
        }
        let sample = |at, holders: Vec<(String, u64)>| Sample {
            at,
            key: "k".into(),
            mode: (!holders.is_empty()).then_some(LockMode::Shared),
            limit: (!holders.is_empty()).then_some(3),
            holders,
            waiter_count: 0,
        };
        r.samples = vec![
            sample(5.0, vec![("a".into(), 8), ("b".into(), 9)]),
            sample(9.0, vec![]),
        ];
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
        assert_eq!(lines[1], "sleep,0,,,,2,,,17,40,");
        assert_eq!(
            lines[2],
            "hold,0,\"bench/r1,k0\",7,exclusive,3,12.0,52.5,,,ledger ok waited=10.0"
        );
        assert_eq!(
            lines[3],
            "sample,0,\"bench/r1,k0\",7,exclusive,,20.0,,,,waiters=2"
        );
        assert_eq!(lines[4], "counter,,,,,,,,,,grants=1");
        let columns = RUN_CSV_HEADER.split(',').count();
        assert_eq!(lines[1].split(',').count(), columns);
        assert_eq!(lines[4].split(',').count(), columns);
    }

    #[test]
    fn the_stream_is_exported_with_what_sampling_missed() {
        use crate::model::server_clock::tests::observed;
        let mut r = record();
        let mut granted = observed(13.0, 1_000, lock_api::EventKind::Granted);
        granted.event.key = "bench/r1,k0".into();
        granted.event.fencing_token = Some(7);
        granted.event.mode = Some(LockMode::Exclusive);
        r.events.push(granted);
        r.counters.missed_by_sampling = Some(0);
        let json: serde_json::Value = serde_json::from_str(&run_json(&r)).unwrap();
        assert_eq!(json["counters"]["missedBySampling"], 0);
        assert_eq!(json["events"][0]["event"]["kind"], "granted");
        let back: RunRecord = serde_json::from_str(&run_json(&r)).unwrap();
        assert_eq!(back, r);
        let csv = run_csv(&r);
        let lines: Vec<_> = csv.lines().collect();
        assert_eq!(
            lines[4],
            "event,0,\"bench/r1,k0\",7,exclusive,,13.0,,,,granted waiters=0"
        );
        assert_eq!(lines.last(), Some(&"counter,,,,,,,,,,missed by sampling=0"));
    }

    #[test]
    fn every_hold_and_holder_carries_its_mode() {
        let r = shared_record();
        let json: serde_json::Value = serde_json::from_str(&run_json(&r)).unwrap();
        let modes: Vec<&str> = json["holds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["mode"].as_str().unwrap())
            .collect();
        assert_eq!(modes, ["shared", "shared"]);
        assert_eq!(json["holds"][0]["limit"], 3);
        assert_eq!(json["samples"][0]["mode"], "shared");
        let back: RunRecord = serde_json::from_str(&run_json(&r)).unwrap();
        assert_eq!(back, r);

        let csv = run_csv(&r);
        let lines: Vec<_> = csv.lines().collect();
        assert_eq!(
            lines[1],
            "hold,0,k,8,shared,1,1.0,,,,no ledger write (shared) waited=1.0 limit=3"
        );
        // One sample row per holder, then the free key's row without one.
        assert_eq!(lines[3], "sample,0,k,8,shared,,5.0,,,,waiters=0 limit=3");
        assert_eq!(lines[4], "sample,1,k,9,shared,,5.0,,,,waiters=0 limit=3");
        assert_eq!(lines[5], "sample,,k,,,,9.0,,,,waiters=0");
        let columns = RUN_CSV_HEADER.split(',').count();
        assert!(
            lines.iter().all(|l| l.split(',').count() == columns),
            "{csv}"
        );
    }

    #[test]
    fn the_lab_export_carries_faults_and_write_outcomes() {
        let r = crate::model::lab_record::tests::gc_pause();
        let json: serde_json::Value = serde_json::from_str(&lab_json(&r)).unwrap();
        assert_eq!(json["form"]["scenario"], "gc-pause");
        assert_eq!(
            json["sides"][0]["contenders"][0]["faults"][0]["kind"],
            "pause"
        );
        assert_eq!(json["sides"][0]["writes"][1]["outcome"], "fencedOut");
        assert_eq!(json["sides"][1]["writes"][1]["outcome"], "corrupted");
        assert_eq!(json["sides"][1]["ledger"][1]["stale"], true);
        let back: LabRecord = serde_json::from_str(&lab_json(&r)).unwrap();
        assert_eq!(back, r);

        let csv = lab_csv(&r);
        let lines: Vec<_> = csv.lines().collect();
        assert_eq!(lines[0], LAB_CSV_HEADER);
        assert_eq!(lines[1], "fault,fenced,A,1,105.0,2605.0,pause");
        assert_eq!(
            lines[2],
            "lease,fenced,A,1,5.0,1110.0,deadline=905.0 lost=2610.0"
        );
        assert!(lines.contains(&"write,fenced,A,1,10.0,,fencedOut"), "{csv}");
        assert!(
            lines.contains(&"write,unfenced,A,1,10.0,,corrupted"),
            "{csv}"
        );
        assert!(lines.contains(&"ledger,unfenced,,1,,,A stale"), "{csv}");
        assert!(lines
            .last()
            .unwrap()
            .starts_with("setting,,,,,,lab=gc-pause&"));
        let columns = LAB_CSV_HEADER.split(',').count();
        assert!(
            lines.iter().all(|l| l.split(',').count() == columns),
            "{csv}"
        );
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
                utilisation: Some(0.8125),
                max_over_median: None,
            }],
            ..Default::default()
        };
        let csv = sweep_csv(&sweep);
        assert_eq!(
            csv.lines().nth(1),
            Some("equal,10,25,10,0,2.500,812.8,0.812,")
        );
        assert!(sweep_json(&sweep).contains("\"contenders\": 10"));
    }
}
