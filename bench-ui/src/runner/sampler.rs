//! The L7 sampler: reads every key of the run each `sampleMillis`, which is what the holder
//! timeline is drawn from. L7 is advisory (true at the instant of the read), so the
//! timeline's resolution is the sampling interval.

use std::time::Duration;

use lock_api::{LockMode, LockState};
use lock_wasm::TransportExt;

use crate::model::config::{key_name, ExperimentConfig};
use crate::model::record::Sample;

use super::recorder::Recorder;
use super::{Env, REQUEST_TIMEOUT};

/// Samples until dropped. Failed reads are skipped (the contenders report server trouble).
pub async fn sample_forever(
    env: &Env,
    recorder: &Recorder,
    config: &ExperimentConfig,
    run_id: &str,
) {
    let keys: Vec<String> = (0..config.keys).map(|k| key_name(run_id, k)).collect();
    let every = Duration::from_millis(config.sample_millis);
    loop {
        let reads = keys
            .iter()
            .map(|key| env.transport.read_lock(key, REQUEST_TIMEOUT));
        let states = futures::future::join_all(reads).await;
        let at = recorder.elapsed_millis();
        {
            let mut record = recorder.lock();
            for state in states.into_iter().flatten() {
                record.samples.push(sample(at, state));
            }
        }
        env.clock.sleep(every).await;
    }
}

/// One L7 answer as the record keeps it: every holder and the key's mode. A server before
/// shared holds lists no `holders` and no mode, only its one exclusive `holder`.
fn sample(at: f64, state: LockState) -> Sample {
    let listed = if state.holders.is_empty() {
        state.holder.into_iter().collect()
    } else {
        state.holders
    };
    let holders: Vec<(String, u64)> = listed
        .into_iter()
        .map(|h| (h.holder_id, h.fencing_token))
        .collect();
    let mode = state
        .mode
        .or((!holders.is_empty()).then_some(LockMode::Exclusive));
    Sample {
        at,
        key: state.key,
        mode,
        holders,
        limit: state.limit,
        waiter_count: state.waiter_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_api::Holder;

    fn holder(id: &str, fencing_token: u64) -> Holder {
        Holder {
            value: None,
            holder_id: id.into(),
            owner: None,
            fencing_token,
            remaining_millis: 100,
        }
    }

    #[test]
    fn every_holder_is_kept_with_the_keys_mode() {
        let state = LockState {
            key: "k".into(),
            mode: Some(LockMode::Shared),
            holder: None,
            holders: vec![holder("a", 3), holder("b", 4)],
            limit: Some(5),
            waiter_count: 1,
        };
        let s = sample(7.0, state);
        assert_eq!(s.holders, [("a".to_string(), 3), ("b".to_string(), 4)]);
        assert_eq!((s.mode, s.limit), (Some(LockMode::Shared), Some(5)));
    }

    #[test]
    fn an_answer_with_only_the_exclusive_holder_is_read_as_before() {
        let s = sample(7.0, s_state());
        assert_eq!(s.holders, [("a".to_string(), 3)]);
        assert_eq!(s.mode, Some(LockMode::Exclusive));
        let free = LockState {
            holder: None,
            ..s_state()
        };
        assert_eq!(sample(8.0, free).mode, None, "a free key has no mode");
    }

    fn s_state() -> LockState {
        LockState {
            key: "k".into(),
            mode: None,
            holder: Some(holder("a", 3)),
            holders: vec![],
            limit: None,
            waiter_count: 0,
        }
    }
}
