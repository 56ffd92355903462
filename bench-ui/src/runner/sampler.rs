//! The L7 sampler: reads every key of the run each `sampleMillis`, which is what the holder
//! timeline is drawn from. L7 is advisory (true at the instant of the read), so the
//! timeline's resolution is the sampling interval.

use std::time::Duration;

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
                record.samples.push(Sample {
                    at,
                    key: state.key,
                    holder: state.holder.map(|h| (h.holder_id, h.fencing_token)),
                    waiter_count: state.waiter_count,
                });
            }
        }
        env.clock.sleep(every).await;
    }
}
