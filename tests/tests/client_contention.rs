//! The SDK against a real lock-server (C2 ct2-pinned, *Contention terminates*): ten sessions
//! contend for one key; every acquire terminates, client-side hold intervals never overlap,
//! every L7 sample taken inside a hold names that holder, and the total L4 count is bounded
//! (and printed).
//!
//! Real time here is only used to order events, never asserted as a speed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_e2e::{ServerOptions, TestServer};
use lock_wasm::{AcquirePolicy, ClientEvent, EventSink, LockClient, LockError};

const SESSIONS: usize = 10;
const KEY: &str = "payouts/contended key";

/// Sums the L4 attempts each acquire reports in its final event.
#[derive(Default)]
struct AttemptCounter {
    attempts: Mutex<u64>,
    grants: Mutex<u64>,
}

impl EventSink for AttemptCounter {
    fn on_event(&self, event: &ClientEvent) {
        match event {
            ClientEvent::Granted { attempts, .. } => {
                *self.attempts.lock().unwrap() += u64::from(*attempts);
                *self.grants.lock().unwrap() += 1;
            }
            ClientEvent::NotGranted { attempts, .. } => {
                *self.attempts.lock().unwrap() += u64::from(*attempts);
            }
            _ => {}
        }
    }
}

/// One client-side hold: from the grant's return to just before its release was sent.
#[derive(Debug, Clone)]
struct Hold {
    holder_id: String,
    token: u64,
    from: Instant,
    to: Instant,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_sessions_contend_and_exactly_one_holds_at_a_time() {
    let server = TestServer::start(ServerOptions::new());
    let counter = Arc::new(AttemptCounter::default());
    let client = LockClient::native(server.base_url()).with_events(counter.clone());
    let policy = AcquirePolicy::default();

    let holds = Arc::new(Mutex::new(Vec::<Hold>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = tokio::spawn(sample_l7(server.api(), stop.clone()));

    let mut workers = Vec::new();
    for _ in 0..SESSIONS {
        let (client, holds) = (client.clone(), holds.clone());
        workers.push(tokio::spawn(async move {
            let session = client.open_session().await.expect("L1");
            let outcome = session.acquire(KEY, Duration::from_secs(10), &policy).await;
            if let Ok(Some(handle)) = &outcome {
                let from = Instant::now();
                tokio::time::sleep(Duration::from_millis(30)).await;
                assert!(!handle.is_lost(), "a 10 s lock cannot be lost after 30 ms");
                let to = Instant::now();
                holds.lock().unwrap().push(Hold {
                    holder_id: session.holder_id().to_owned(),
                    token: handle.fencing_token(),
                    from,
                    to,
                });
                session.release(handle).await.expect("L6");
            }
            session.close().await.expect("L3");
            outcome.map(|h| h.is_some())
        }));
    }
    let mut granted = 0;
    for worker in workers {
        let outcome = tokio::time::timeout(Duration::from_secs(120), worker)
            .await
            .expect("every acquire terminates")
            .expect("worker panicked");
        match outcome {
            Ok(true) => granted += 1,
            Ok(false) => {}
            Err(e @ LockError::Contention { .. }) => panic!("contention must be Ok(None): {e}"),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let samples = sampler.await.unwrap();

    let mut holds = holds.lock().unwrap().clone();
    holds.sort_by_key(|h| h.from);
    for pair in holds.windows(2) {
        assert!(pair[0].to <= pair[1].from, "overlapping holds: {pair:?}");
        assert!(pair[0].token < pair[1].token, "tokens increase: {pair:?}");
    }
    let mut inside = 0;
    for (sent, answered, holder) in &samples {
        if let Some(h) = holds.iter().find(|h| h.from <= *sent && *answered <= h.to) {
            inside += 1;
            assert_eq!(
                holder.as_ref(),
                Some(&(h.holder_id.clone(), h.token)),
                "an L7 read inside a hold must name exactly that holder"
            );
        }
    }
    let attempts = *counter.attempts.lock().unwrap();
    println!(
        "{SESSIONS} sessions: {granted} granted, {attempts} L4 calls in total, {} L7 samples ({inside} inside a hold)",
        samples.len()
    );
    assert_eq!(granted as u64, *counter.grants.lock().unwrap());
    assert!(granted >= 1, "someone must get the lock");
    assert!(attempts >= SESSIONS as u64);
    assert!(attempts <= (SESSIONS as u64) * u64::from(policy.max_attempts()));
    assert!(!samples.is_empty());
}

/// Reads L7 in a loop until told to stop: (sent, answered, holder).
async fn sample_l7(
    api: lock_e2e::Api,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(Instant, Instant, Option<(String, u64)>)> {
    let mut samples = Vec::new();
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let sent = Instant::now();
        let state = api.lock_state(KEY).await;
        let answered = Instant::now();
        let holder = state.holder.map(|h| (h.holder_id, h.fencing_token));
        samples.push((sent, answered, holder));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    samples
}

/// A hold nested through the handle, release and key encoding against the real server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_holds_release_once_and_keys_are_encoded() {
    let server = TestServer::start(ServerOptions::new());
    let api = server.api();
    let client = LockClient::native(server.base_url());
    let session = client.open_session().await.unwrap();
    let key = "tenant/a b%ü";
    let outer = session
        .acquire_default(key)
        .await
        .unwrap()
        .expect("free key");
    let inner = outer.nest().expect("nested through the handle");
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    session.release(&inner).await.unwrap();
    let held = api
        .lock_state(key)
        .await
        .holder
        .expect("still held by the outer hold");
    assert_eq!(held.fencing_token, outer.fencing_token());
    assert_eq!(held.holder_id, session.holder_id());
    session.release(&outer).await.unwrap();
    assert_eq!(api.lock_state(key).await.holder, None);
    // Releasing again is a no-op; a fresh acquire gets a higher token.
    session.release(&outer).await.unwrap();
    let again = session.acquire_default(key).await.unwrap().unwrap();
    assert!(again.fencing_token() > outer.fencing_token());
    session.close().await.unwrap();
    assert_eq!(
        api.lock_state(key).await.holder,
        None,
        "L3 releases the session's locks"
    );
}
