//! The wait queue of C3 ("Wait queue"), as functions over the replicas of one deployment
//! (one SQLite server, or several lock-server replicas over one etcd cluster), so every
//! backend runs the same checks; waiters are spread over the replicas in turn. Start each
//! replica with [`options`] (plus backend flags) and call [`run_all`].
//!
//! Every check drives the queue by state (L7's `waiterCount`, the answers), never by how
//! long something took: a bound only says when to give up.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_api::{LockGrant, LockState};
use tokio::task::JoinHandle;

use crate::client::{Api, Reply};
use crate::contract::{eventually, unique_key};
use crate::ServerOptions;

/// Per-key ticket cap the suite's servers are started with (more than [`QUEUED`]).
pub const CAP: u32 = 24;
/// Tickets' grace period the suite's servers are started with: 1.5× the default, so that a
/// re-send (milliseconds after its 409) never misses it on a loaded machine, and short, since
/// three checks wait for it to pass (they poll for that).
pub const GRACE_MS: u64 = 1_500;
/// How many sessions queue in the ordering check.
pub const QUEUED: usize = 20;
/// The longest wait a request may ask for: waiters that must stay queued ask for it.
const LONG_WAIT: u64 = lock_api::limits::WAIT_MILLIS_MAX;
/// A wait that ends while the key is still held, so its request answers 409.
const SHORT_WAIT: u64 = 500;

/// The options every replica of the suite is started with.
pub fn options() -> ServerOptions {
    ServerOptions::new().args([
        "--max-waiters-per-key".to_string(),
        CAP.to_string(),
        "--queue-grace-ms".to_string(),
        GRACE_MS.to_string(),
    ])
}

/// Runs every check; `replicas` are clients of the deployment's replicas (at least one).
pub async fn run_all(replicas: &[Api]) {
    grants_follow_arrival_order_and_hand_off(replicas).await;
    a_crowd_on_a_free_key_is_served_one_call_each(replicas).await;
    a_grant_reports_its_wait(replicas).await;
    a_re_send_within_the_grace_period_keeps_its_place(replicas).await;
    a_waiter_that_stops_asking_leaves_the_queue(replicas).await;
    a_waiter_that_hangs_up_leaves_the_queue(replicas).await;
    an_unclaimed_hand_off_passes_on(replicas).await;
    a_lost_sessions_ticket_vanishes(replicas).await;
    no_barging_while_someone_queues(replicas).await;
    the_cap_counts_every_replicas_waiters(replicas).await;
}

/// The replica for the `n`-th participant.
fn replica(replicas: &[Api], n: usize) -> &Api {
    &replicas[n % replicas.len()]
}

async fn waiters_become(api: &Api, key: &str, count: u32) {
    eventually(&format!("waiterCount becomes {count}"), || async {
        api.lock_state(key).await.waiter_count == count
    })
    .await;
}

/// An L4 with `wait` in the background.
fn send(api: &Api, key: &str, session_id: &str, wait: u64) -> JoinHandle<Reply> {
    let (api, key, id) = (api.clone(), key.to_string(), session_id.to_string());
    tokio::spawn(async move { api.acquire(&key, &id, Some(30_000), Some(wait)).await })
}

/// Where served waiters write down who got the lock, in grant order, and what they saw right
/// after releasing it.
#[derive(Default)]
struct Served {
    order: Vec<(usize, u64)>,
    /// L7 through another replica, right after each release.
    after_release: Vec<LockState>,
    /// Waiters whose successor neither held the key right after their release nor had been
    /// served before it: the release did not hand the key on.
    not_handed_on: Vec<usize>,
}

/// Waiter `n`: one L4 that must be granted (one call per grant: it never re-sends); then it
/// notes its turn, releases and, through another replica, reads L7 and checks that the
/// session `next` (the waiter queued behind it, if any) was handed the key by that release.
fn waiter(
    replicas: &[Api],
    n: usize,
    key: &str,
    session_id: &str,
    next: Option<&str>,
    served: &Arc<Mutex<Served>>,
) -> JoinHandle<()> {
    let (api, other) = (
        replica(replicas, n).clone(),
        replica(replicas, n + 1).clone(),
    );
    let (key, id, served) = (key.to_string(), session_id.to_string(), served.clone());
    let next = next.map(str::to_string);
    tokio::spawn(async move {
        let reply = api.acquire(&key, &id, Some(30_000), Some(LONG_WAIT)).await;
        assert_eq!(reply.status, 200, "waiter {n}: {reply:?}");
        let grant: LockGrant = reply.parse();
        served.lock().unwrap().order.push((n, grant.fencing_token));
        let released = api.release(&key, grant.fencing_token, None).await;
        assert_eq!(released.status, 204, "waiter {n}: {released:?}");
        let seen = other.lock_state(&key).await;
        let handed_on = match &next {
            Some(next) => handed_to(&other, &key, next, n + 1, &served).await,
            None => true,
        };
        let mut served = served.lock().unwrap();
        served.after_release.push(seen);
        if !handed_on {
            served.not_handed_on.push(n);
        }
    })
}

/// Whether waiter `n` (session `session_id`) holds `key` now or was served already: right
/// after a release, whether that release handed the key on. L5 does not touch the queue, so
/// it shows what the release left behind; it is read before looking at who was served,
/// because a served waiter may have released already.
async fn handed_to(
    api: &Api,
    key: &str,
    session_id: &str,
    n: usize,
    served: &Mutex<Served>,
) -> bool {
    let status = api.session_status(session_id).await;
    let holds = status.body["locks"]
        .as_array()
        .is_some_and(|locks| locks.iter().any(|l| l["key"] == key));
    holds || served.lock().unwrap().order.iter().any(|(m, _)| *m == n)
}

/// Sessions queue one after the other (each counted before the next asks) while another
/// holds; the releases hand the lock down the queue in exactly that order, each waiter
/// granted by its one L4 call, with increasing tokens. Hand-off: an L7 read right after each
/// release (before the next holder answers anything) never shows the key free while the
/// queue is non-empty.
pub async fn grants_follow_arrival_order_and_hand_off(replicas: &[Api]) {
    let key = unique_key("queue-order");
    let api = replica(replicas, 0);
    let holder = api.open_session(60_000).await;
    let held = api.acquire_ok(&key, &holder.session_id, 60_000).await;
    let served = Arc::new(Mutex::new(Served::default()));
    let mut sessions = Vec::new();
    for n in 0..QUEUED {
        sessions.push(replica(replicas, n).open_session(60_000).await.session_id);
    }
    let mut waiters = Vec::new();
    for n in 0..QUEUED {
        let next = sessions.get(n + 1).map(String::as_str);
        waiters.push(waiter(replicas, n, &key, &sessions[n], next, &served));
        waiters_become(replica(replicas, n + 1), &key, n as u32 + 1).await;
    }
    let released = api.release(&key, held.fencing_token, None).await;
    assert_eq!(released.status, 204, "{released:?}");
    let first_handed = handed_to(replica(replicas, 1), &key, &sessions[0], 0, &served).await;
    for waiter in waiters {
        waiter.await.unwrap();
    }
    let served = served.lock().unwrap();
    let order: Vec<usize> = served.order.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        order,
        (0..QUEUED).collect::<Vec<_>>(),
        "not served in arrival order"
    );
    let mut last = held.fencing_token;
    for (n, token) in &served.order {
        assert!(*token > last, "waiter {n}'s token {token} after {last}");
        last = *token;
    }
    assert!(
        first_handed,
        "the holder's release did not hand the key to the first waiter"
    );
    for seen in &served.after_release {
        assert!(
            seen.holder.is_some() || seen.waiter_count == 0,
            "the key was free while tickets waited: {seen:?}"
        );
    }
    assert_eq!(
        served.not_handed_on,
        Vec::<usize>::new(),
        "these waiters' releases left the key to nobody"
    );
}

/// A crowd asks for a free key all at once, spread over the replicas (on etcd, all but one
/// find another create of the key in flight on their replica and wait for it, then queue):
/// every waiter is granted by its one L4 call, whatever it met (the create, a queue that did
/// not exist yet, a lost race), each releases at once, and the tokens increase in grant order.
pub async fn a_crowd_on_a_free_key_is_served_one_call_each(replicas: &[Api]) {
    let key = unique_key("queue-crowd");
    let mut sessions = Vec::new();
    for n in 0..QUEUED {
        sessions.push(replica(replicas, n).open_session(60_000).await.session_id);
    }
    let served = Arc::new(Mutex::new(Vec::new()));
    let crowd: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(n, id)| {
            let (api, key, id, served) = (
                replica(replicas, n).clone(),
                key.clone(),
                id.clone(),
                served.clone(),
            );
            tokio::spawn(async move {
                let reply = api.acquire(&key, &id, Some(30_000), Some(LONG_WAIT)).await;
                assert_eq!(reply.status, 200, "waiter {n}: {reply:?}");
                let grant: LockGrant = reply.parse();
                served.lock().unwrap().push(grant.fencing_token);
                let released = api.release(&key, grant.fencing_token, None).await;
                assert_eq!(released.status, 204, "waiter {n}: {released:?}");
            })
        })
        .collect();
    for waiter in crowd {
        waiter.await.unwrap();
    }
    let tokens = served.lock().unwrap().clone();
    assert_eq!(tokens.len(), QUEUED);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens in grant order: {tokens:?}"
    );
}

/// A grant after a wait says how long it waited (`waitedMillis`): at least the time the
/// holder kept the key after the waiter queued, at most the request's whole round trip; a
/// grant that did not wait says about 0.
pub async fn a_grant_reports_its_wait(replicas: &[Api]) {
    const HELD_ON: Duration = Duration::from_millis(50);
    let key = unique_key("queue-waited");
    let api = replica(replicas, 0);
    let holder = api.open_session(60_000).await;
    let held = api.acquire_ok(&key, &holder.session_id, 60_000).await;
    assert!(held.waited_millis < 1_000, "{held:?}");
    let waiter = replica(replicas, 1).open_session(60_000).await;
    let sent = Instant::now();
    let waiting = send(replica(replicas, 1), &key, &waiter.session_id, LONG_WAIT);
    waiters_become(api, &key, 1).await;
    tokio::time::sleep(HELD_ON).await;
    assert_eq!(
        api.release(&key, held.fencing_token, None).await.status,
        204
    );
    let reply = waiting.await.unwrap();
    let round_trip = sent.elapsed();
    assert_eq!(reply.status, 200, "{reply:?}");
    let grant: LockGrant = reply.parse();
    assert!(
        grant.waited_millis >= HELD_ON.as_millis() as u64,
        "waited {} ms, the key was held {HELD_ON:?} after it queued",
        grant.waited_millis
    );
    assert!(
        u128::from(grant.waited_millis) <= round_trip.as_millis(),
        "waited {} ms within a {round_trip:?} round trip",
        grant.waited_millis
    );
}

/// A key held by one session, with two waiters queued behind it: `first` (replica 1), whose
/// request has just run out (409), and `second` (replica 2), still waiting as a [`waiter`]
/// that notes its turn in `served`.
struct FirstRanOut {
    key: String,
    held: LockGrant,
    first: String,
    /// `first`'s holder id, as L7 names it.
    first_holder: String,
    second: JoinHandle<()>,
    served: Arc<Mutex<Served>>,
}

async fn first_ran_out(replicas: &[Api], name: &str) -> FirstRanOut {
    let key = unique_key(name);
    let api = replica(replicas, 0);
    let holder = api.open_session(60_000).await;
    let held = api.acquire_ok(&key, &holder.session_id, 60_000).await;
    let first = replica(replicas, 1).open_session(60_000).await;
    let (first, first_holder) = (first.session_id, first.holder_id);
    let second = replica(replicas, 2).open_session(60_000).await.session_id;
    let short = send(replica(replicas, 1), &key, &first, SHORT_WAIT);
    waiters_become(api, &key, 1).await;
    let served = Arc::new(Mutex::new(Served::default()));
    let second = waiter(replicas, 2, &key, &second, None, &served);
    waiters_become(api, &key, 2).await;
    short.await.unwrap().assert_error(409, "LOCK_CONTENDED");
    FirstRanOut {
        key,
        held,
        first,
        first_holder,
        second,
        served,
    }
}

fn served_in(served: &Mutex<Served>) -> Vec<usize> {
    served
        .lock()
        .unwrap()
        .order
        .iter()
        .map(|(n, _)| *n)
        .collect()
}

/// A waiter whose request ended (its wait ran out) and that re-sends within the grace period
/// is still ahead of the one that queued after it.
pub async fn a_re_send_within_the_grace_period_keeps_its_place(replicas: &[Api]) {
    let scene = first_ran_out(replicas, "queue-resend").await;
    let (api, key) = (replica(replicas, 0), &scene.key);
    let again = waiter(replicas, 1, key, &scene.first, None, &scene.served);
    assert_eq!(
        api.lock_state(key).await.waiter_count,
        2,
        "the first ticket left within its grace period"
    );
    assert_eq!(
        api.release(key, scene.held.fencing_token, None)
            .await
            .status,
        204
    );
    again.await.unwrap();
    scene.second.await.unwrap();
    assert_eq!(
        served_in(&scene.served),
        [1, 2],
        "the re-sent waiter lost its place"
    );
}

/// A waiter whose request ended and that does not ask again leaves the queue once the grace
/// period has passed; the key then goes to the next waiter.
pub async fn a_waiter_that_stops_asking_leaves_the_queue(replicas: &[Api]) {
    let scene = first_ran_out(replicas, "queue-leaves").await;
    let (api, key) = (replica(replicas, 0), &scene.key);
    waiters_become(replica(replicas, 1), key, 1).await;
    assert_eq!(
        api.release(key, scene.held.fencing_token, None)
            .await
            .status,
        204
    );
    scene.second.await.unwrap();
    assert_eq!(served_in(&scene.served), [2]);
    let reply = api.session_status(&scene.first).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body["locks"], serde_json::json!([]), "{reply:?}");
}

/// A waiter whose client hangs up (the request is dropped mid-wait) leaves the queue one
/// grace period later, long before the 30 s wait it asked for would have ended.
pub async fn a_waiter_that_hangs_up_leaves_the_queue(replicas: &[Api]) {
    let key = unique_key("queue-hangs-up");
    let api = replica(replicas, 0);
    let holder = api.open_session(60_000).await;
    let held = api.acquire_ok(&key, &holder.session_id, 60_000).await;
    let gone = replica(replicas, 1).open_session(60_000).await;
    let request = send(replica(replicas, 1), &key, &gone.session_id, LONG_WAIT);
    waiters_become(api, &key, 1).await;
    let hung_up = Instant::now();
    request.abort();
    waiters_become(api, &key, 0).await;
    assert!(
        hung_up.elapsed() < Duration::from_millis(LONG_WAIT),
        "the ticket stayed for the whole wait its request had asked for"
    );
    assert_eq!(
        api.release(&key, held.fencing_token, None).await.status,
        204
    );
    assert_eq!(api.lock_state(&key).await.holder, None);
}

/// The lock handed to a ticket whose request had ended (within its grace period) waits for
/// that session to claim it; nobody does, so it passes to the next waiter once the grace
/// period is over, and the unclaimed grant's token is dead.
pub async fn an_unclaimed_hand_off_passes_on(replicas: &[Api]) {
    let scene = first_ran_out(replicas, "queue-unclaimed").await;
    let (api, key) = (replica(replicas, 0), &scene.key);
    assert_eq!(
        api.release(key, scene.held.fencing_token, None)
            .await
            .status,
        204
    );
    let unclaimed = api.lock_state(key).await;
    scene.second.await.unwrap();
    let handed = match unclaimed.holder {
        Some(h) if h.holder_id == scene.first_holder => h,
        // The grace period may already be over on a very slow machine: nothing to see then.
        _ => return,
    };
    let order = scene.served.lock().unwrap().order.clone();
    assert_eq!(order.len(), 1);
    assert!(order[0].1 > handed.fencing_token);
    let reply = api.release(key, handed.fencing_token, None).await;
    reply.assert_error(409, "LOCK_LOST");
}

/// A queued session that is lost (no heartbeat within its TTL) leaves the queue with its
/// ticket; the key goes to the next live waiter.
pub async fn a_lost_sessions_ticket_vanishes(replicas: &[Api]) {
    let key = unique_key("queue-lost");
    let api = replica(replicas, 0);
    let holder = api.open_session(60_000).await;
    let held = api.acquire_ok(&key, &holder.session_id, 60_000).await;
    // 1 s: the shortest session etcd's lease minimum allows in the test cluster.
    let lost = replica(replicas, 1).open_session(1_000).await;
    let live = replica(replicas, 2).open_session(60_000).await;
    let doomed = send(replica(replicas, 1), &key, &lost.session_id, LONG_WAIT);
    waiters_become(api, &key, 1).await;
    let served = Arc::new(Mutex::new(Served::default()));
    let behind = waiter(replicas, 2, &key, &live.session_id, None, &served);
    waiters_become(api, &key, 2).await;
    waiters_become(replica(replicas, 1), &key, 1).await;
    assert_eq!(
        api.release(&key, held.fencing_token, None).await.status,
        204
    );
    behind.await.unwrap();
    assert_eq!(served.lock().unwrap().order.len(), 1);
    // The lost session's own request ends with its session (or its wait): never granted.
    doomed.abort();
    api.heartbeat(&lost.session_id)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
}

/// While a ticket waits, an L4 with `waitMillis` 0 is refused even at the instant the key
/// frees (here: the holder's TTL runs out and nobody has noticed yet); the waiter gets it.
pub async fn no_barging_while_someone_queues(replicas: &[Api]) {
    let key = unique_key("queue-barging");
    let api = replica(replicas, 0);
    let holder = api.open_session(60_000).await;
    let held = api.acquire_ok(&key, &holder.session_id, 1_000).await;
    let queued = replica(replicas, 1).open_session(60_000).await;
    let barger = replica(replicas, 2).open_session(60_000).await;
    let waiting = send(replica(replicas, 1), &key, &queued.session_id, LONG_WAIT);
    waiters_become(api, &key, 1).await;
    let mut refused = 0;
    while !waiting.is_finished() {
        let reply = replica(replicas, 2)
            .acquire(&key, &barger.session_id, Some(30_000), Some(0))
            .await;
        reply.assert_error(409, "LOCK_CONTENDED");
        refused += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let grant: LockGrant = {
        let reply = waiting.await.unwrap();
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.parse()
    };
    assert_eq!(grant.session_id, queued.session_id);
    assert!(grant.fencing_token > held.fencing_token);
    assert!(refused > 0);
    // Held and nobody queues: refused as always; released: the next attempt gets it.
    replica(replicas, 2)
        .acquire(&key, &barger.session_id, Some(30_000), Some(0))
        .await
        .assert_error(409, "LOCK_CONTENDED");
    assert_eq!(
        api.release(&key, grant.fencing_token, None).await.status,
        204
    );
    let free = replica(replicas, 2)
        .acquire(&key, &barger.session_id, Some(30_000), Some(0))
        .await;
    assert_eq!(free.status, 200, "{free:?}");
}

/// The cap counts the tickets of every replica: with the queue full, one more waiter is
/// refused with 429 at any replica, a non-waiting attempt is not; then everyone is served.
pub async fn the_cap_counts_every_replicas_waiters(replicas: &[Api]) {
    let key = unique_key("queue-cap");
    let api = replica(replicas, 0);
    let holder = api.open_session(60_000).await;
    let held = api.acquire_ok(&key, &holder.session_id, 60_000).await;
    let served = Arc::new(Mutex::new(Served::default()));
    let mut waiters = Vec::new();
    for n in 0..CAP as usize {
        let session = replica(replicas, n).open_session(60_000).await;
        waiters.push(waiter(
            replicas,
            n,
            &key,
            &session.session_id,
            None,
            &served,
        ));
    }
    waiters_become(api, &key, CAP).await;
    for n in 0..replicas.len() {
        let extra = replica(replicas, n).open_session(60_000).await;
        let reply = replica(replicas, n)
            .acquire(&key, &extra.session_id, Some(30_000), Some(LONG_WAIT))
            .await;
        let body = reply.assert_error(429, "CONTENTION_EXCEEDED");
        assert_eq!(body.retry_after_millis, Some(100), "{reply:?}");
        replica(replicas, n)
            .acquire(&key, &extra.session_id, Some(30_000), Some(0))
            .await
            .assert_error(409, "LOCK_CONTENDED");
    }
    assert_eq!(
        api.release(&key, held.fencing_token, None).await.status,
        204
    );
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(served.lock().unwrap().order.len(), CAP as usize);
}
