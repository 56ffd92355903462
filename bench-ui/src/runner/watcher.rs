//! The L8 watchers: one per key of the run, each following the SDK's `watch` stream into the
//! record, which the holder timeline is drawn from (`model::event_bars`). The stream is the
//! SDK's: JSON long polls through the same transport seam as every other call (so the
//! scripted transport, the simulation and the browser's fetch all serve it), resumed from the
//! last event after a failure, a `reset` when the server cannot resume. What ends a stream is
//! an error the SDK does not retry — an older server answering L8 with 404, a refusal — and
//! that is noted as the record's `stream_error`: the timeline falls back to the L7 samples.
//!
//! Over HTTP/1.1 a browser keeps 6 connections per server, and a watcher's poll holds one
//! while its key is quiet (during a run a key's events come every few ms, so it is mostly
//! answered at once). The polls do not take the wait lanes (`runner::lanes`), which hold 4
//! connections for the server queue's waiting L4s, so a run on the queue watches at most 1 key
//! (1 connection left for releases, heartbeats, the ledger and L7) and any other at most 3;
//! a run with more keys is drawn from its samples and says why ([`unwatched`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use lock_lab::strategy::Strategy;
use lock_wasm::{LockClient, LockError, SeededRngSource};

use crate::model::config::{key_name, ExperimentConfig};
use crate::model::coverage::stream_caught_up;
use crate::model::record::Observed;

use super::recorder::Recorder;
use super::Env;

/// How long a run waits, after its contenders are done, for the streams to show the last
/// releases (ASSUMPTION: 2 s; on loopback they come within a few ms).
pub const SETTLE_WITHIN: Duration = Duration::from_secs(2);

/// How often the wait for the last releases looks at the record.
const SETTLE_POLL: Duration = Duration::from_millis(20);

/// Keys a run on the server queue may watch: the wait lanes hold 4 of the browser's 6
/// connections (see the module docs).
pub const QUEUE_WATCHED_KEYS: u32 = 1;

/// Keys any other run may watch (ASSUMPTION: 3 of the 6 connections, half).
pub const WATCHED_KEYS: u32 = 3;

/// Why a run that would watch its events cannot, if it cannot: too many keys for the
/// browser's connections.
pub fn unwatched(config: &ExperimentConfig) -> Option<String> {
    let most = match config.strategy {
        Strategy::ServerQueue => QUEUE_WATCHED_KEYS,
        _ => WATCHED_KEYS,
    };
    (config.keys > most).then(|| {
        format!(
            "not watched: {} keys' event streams would hold {} of the browser's 6 connections \
             (at most {most} with this strategy); the timeline uses L7 samples",
            config.keys, config.keys
        )
    })
}

/// Follows every key of the run until dropped; never ends. Watches nothing when the run
/// does not watch events, and notes why when it has too many keys to.
pub async fn watch_forever(
    env: &Env,
    recorder: &Recorder,
    config: &ExperimentConfig,
    run_id: &str,
) {
    if !config.watch_events {
        return futures::future::pending().await;
    }
    if let Some(why) = unwatched(config) {
        recorder.note_stream_error(why);
        return futures::future::pending().await;
    }
    // The watch's retry delays draw from the run's seed, like everything else in it.
    let client = LockClient::new(
        env.transport.clone(),
        env.clock.clone(),
        env.spawner.clone(),
        Arc::new(SeededRngSource::new(config.seed)),
    );
    let keys: Vec<String> = (0..config.keys).map(|k| key_name(run_id, k)).collect();
    futures::future::join_all(keys.iter().map(|key| follow(&client, recorder, key))).await;
    futures::future::pending().await
}

/// Records `key`'s events as they arrive, stamped with the run's clock; notes the error that
/// ends the stream.
async fn follow(client: &LockClient, recorder: &Recorder, key: &str) {
    let mut events = client.watch(key);
    while let Some(item) = events.next().await {
        match item {
            // Only what changes the holds is kept: `waiters` (every enqueue and dequeue of
            // a queue run) and `proclaimed` would grow the record the worker reports every
            // 150 ms several times over, and the timeline draws neither.
            Ok(event)
                if !(event.kind.is_state() || event.kind.is_grant() || event.kind.is_end()) => {}
            Ok(event) => {
                let at = recorder.elapsed_millis();
                recorder.lock().events.push(Observed { at, event });
            }
            Err(err) => {
                recorder.note_stream_error(describe(key, &err));
                return;
            }
        }
    }
}

/// Waits until the streams showed every grant of the run and the end of every hold, or
/// [`SETTLE_WITHIN`] passed.
pub async fn settle(env: &Env, recorder: &Recorder) {
    let clock = env.clock.as_ref();
    let start = clock.now();
    loop {
        let caught_up = stream_caught_up(&recorder.lock());
        if caught_up || clock.now() - start >= SETTLE_WITHIN {
            return;
        }
        clock.sleep(SETTLE_POLL).await;
    }
}

/// Why the timeline has no stream, in words.
fn describe(key: &str, err: &LockError) -> String {
    format!("the event stream of {key} stopped (the timeline uses L7 samples instead): {err}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_watches_one_key_and_the_others_three() {
        let config = |strategy, keys| ExperimentConfig {
            strategy,
            keys,
            ..ExperimentConfig::default()
        };
        assert_eq!(unwatched(&config(Strategy::ServerQueue, 1)), None);
        let why = unwatched(&config(Strategy::ServerQueue, 2)).unwrap();
        assert!(
            why.contains("2 keys") && why.contains("L7 samples"),
            "{why}"
        );
        assert_eq!(unwatched(&config(Strategy::FullJitter, 3)), None);
        assert!(unwatched(&config(Strategy::NoJitter, 4)).is_some());
    }
}
