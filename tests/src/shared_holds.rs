//! Shared holds of C3 ("Shared holds": read-write locks and counting semaphores on the key's
//! one queue), as functions over the replicas of one deployment (one SQLite server, or
//! several lock-server replicas over one etcd cluster), so every backend runs the same
//! checks; the sessions of a check are spread over the replicas in turn. Start each replica
//! with [`options`] (plus backend flags) and call [`run_all`].
//!
//! Every check drives the key by state (L7's holders and `waiterCount`, the answers), never
//! by how long something took: a bound only says when to give up.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use lock_api::{paths, LockGrant, LockMode, LockState};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::client::{Api, Reply};
use crate::contract::{eventually, unique_key, EVENTUALLY};
use crate::ServerOptions;

/// Admin token the suite's replicas are started with (R1 of one hold and of all).
pub const ADMIN_TOKEN: &str = "shared-holds-admin-token";
/// Per-key ticket cap of the suite's replicas.
pub const CAP: u32 = 24;
/// Tickets' grace period of the suite's replicas (as the queue suite's, see there).
pub const GRACE_MS: u64 = 1_500;
/// The longest wait a request may ask for: waiters that must stay queued ask for it.
const LONG_WAIT: u64 = lock_api::limits::WAIT_MILLIS_MAX;
/// Lock TTL of every hold the suite takes, unless a check says otherwise.
const TTL: u64 = 30_000;

/// The options every replica of the suite is started with.
pub fn options() -> ServerOptions {
    ServerOptions::new().admin_token(ADMIN_TOKEN).args([
        "--max-waiters-per-key".to_string(),
        CAP.to_string(),
        "--queue-grace-ms".to_string(),
        GRACE_MS.to_string(),
    ])
}

/// Runs every check; `replicas` are clients of the deployment's replicas (at least one),
/// started with [`options`].
pub async fn run_all(replicas: &[Api]) {
    metrics_count_holds_by_mode(replicas).await;
    the_grant_matrix(replicas).await;
    a_semaphore_hands_a_freed_permit_to_the_next_in_line(replicas).await;
    limit_mismatch_names_the_limit_in_force(replicas).await;
    no_barging_past_a_queued_writer(replicas).await;
    readers_behind_the_head_are_batched_up_to_the_first_writer(replicas).await;
    a_writer_is_not_starved_by_a_stream_of_readers(replicas).await;
    an_upgrade_is_refused_and_changes_nothing(replicas).await;
    a_shared_request_of_the_exclusive_holder_gets_its_exclusive_grant(replicas).await;
    each_shared_holder_releases_its_own_hold(replicas).await;
    revoke_every_hold_or_one(replicas).await;
    a_readers_session_end_ends_its_hold_alone(replicas).await;
    a_readers_expiry_ends_its_hold_alone(replicas).await;
    lock_state_shapes(replicas).await;
    sessions_list_each_hold_with_its_mode(replicas).await;
    tokens_strictly_increase_across_shared_grants(replicas).await;
    grants_on_the_wire(replicas).await;
    bad_holds_are_refused_and_store_nothing(replicas).await;
}

/// One session of a check, on the replica it was opened at.
#[derive(Clone)]
struct Party {
    api: Api,
    session: String,
    /// The session's public name, as L7 shows it.
    holder: String,
}

/// The `n`-th session of a check, on replica `n` (round robin).
async fn party(replicas: &[Api], n: usize) -> Party {
    let api = replicas[n % replicas.len()].clone();
    let opened = api.open_session(60_000).await;
    Party {
        api,
        session: opened.session_id,
        holder: opened.holder_id,
    }
}

async fn parties(replicas: &[Api], count: usize) -> Vec<Party> {
    let mut out = Vec::with_capacity(count);
    for n in 0..count {
        out.push(party(replicas, n).await);
    }
    out
}

impl Party {
    /// A shared L4 that does not wait.
    async fn shared(&self, key: &str, limit: Option<u32>) -> Reply {
        self.api
            .acquire_shared(key, &self.session, limit, None)
            .await
    }

    /// An exclusive L4 that does not wait.
    async fn exclusive(&self, key: &str) -> Reply {
        self.api.acquire(key, &self.session, Some(TTL), None).await
    }

    /// A shared L4 that waits in the queue, in the background.
    fn send_shared(&self, key: &str, limit: Option<u32>) -> JoinHandle<Reply> {
        let (me, key) = (self.clone(), key.to_string());
        tokio::spawn(async move {
            me.api
                .acquire_shared(&key, &me.session, limit, Some(LONG_WAIT))
                .await
        })
    }

    /// An exclusive L4 that waits in the queue, in the background.
    fn send_exclusive(&self, key: &str) -> JoinHandle<Reply> {
        let (me, key) = (self.clone(), key.to_string());
        tokio::spawn(async move {
            me.api
                .acquire(&key, &me.session, Some(TTL), Some(LONG_WAIT))
                .await
        })
    }

    async fn release(&self, key: &str, grant: &LockGrant) {
        let reply = self.api.release(key, grant.fencing_token, None).await;
        assert_eq!(reply.status, 204, "release of {grant:?}: {reply:?}");
    }
}

/// The grant in a 200 answer.
fn granted(reply: &Reply) -> LockGrant {
    assert_eq!(reply.status, 200, "not granted: {reply:?}");
    reply.parse()
}

/// The grant a background request was answered.
async fn granted_later(request: JoinHandle<Reply>) -> LockGrant {
    granted(&request.await.expect("request task"))
}

/// A shared grant to `party` under `limit`.
fn assert_shared(grant: &LockGrant, party: &Party, limit: Option<u32>) {
    assert_eq!(grant.session_id, party.session, "{grant:?}");
    assert_eq!(grant.mode, LockMode::Shared, "{grant:?}");
    assert_eq!(grant.limit, limit, "{grant:?}");
}

/// L7's holders, by holder id, in the order it lists them.
fn holder_ids(state: &LockState) -> Vec<String> {
    state.holders.iter().map(|h| h.holder_id.clone()).collect()
}

fn ids(parties: &[&Party]) -> Vec<String> {
    parties.iter().map(|p| p.holder.clone()).collect()
}

/// Polls L7 at `api` until `holders` (by holder id, in token order) hold the key and
/// `waiters` tickets wait; returns that state.
async fn key_becomes(api: &Api, key: &str, holders: &[&Party], waiters: u32) -> LockState {
    let wanted = ids(holders);
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        let state = api.lock_state(key).await;
        if holder_ids(&state) == wanted && state.waiter_count == waiters {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "{key}: never held by {wanted:?} with {waiters} waiters; last {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls L7 at `api` until `waiters` tickets wait for `key`, whoever holds it.
async fn waiters_become(api: &Api, key: &str, waiters: u32) {
    eventually(&format!("{key}: {waiters} waiters"), || async {
        api.lock_state(key).await.waiter_count == waiters
    })
    .await;
}

/// Every hold is granted, and only then: a waiting request is answered only once it holds.
pub async fn the_grant_matrix(replicas: &[Api]) {
    let p = parties(replicas, 4).await;
    let key = unique_key("shared-matrix");
    // Shared beside shared (no limit), exclusive beside neither.
    let a = granted(&p[0].shared(&key, None).await);
    assert_shared(&a, &p[0], None);
    let b = granted(&p[1].shared(&key, None).await);
    assert_shared(&b, &p[1], None);
    p[2].exclusive(&key)
        .await
        .assert_error(409, "LOCK_CONTENDED");
    let state = key_becomes(&p[3].api, &key, &[&p[0], &p[1]], 0).await;
    assert_eq!(state.mode, Some(LockMode::Shared));
    p[0].release(&key, &a).await;
    p[2].exclusive(&key)
        .await
        .assert_error(409, "LOCK_CONTENDED");
    p[1].release(&key, &b).await;
    // Exclusive on a free key; then neither shared nor exclusive beside it.
    let x = granted(&p[2].exclusive(&key).await);
    assert_eq!((x.mode, x.limit), (LockMode::Exclusive, None), "{x:?}");
    p[3].shared(&key, None)
        .await
        .assert_error(409, "LOCK_CONTENDED");
    p[3].shared(&key, Some(2))
        .await
        .assert_error(409, "LOCK_CONTENDED");
    p[0].exclusive(&key)
        .await
        .assert_error(409, "LOCK_CONTENDED");
    p[2].release(&key, &x).await;

    // A semaphore of 2: two holders, the third refused until one leaves.
    let key = unique_key("shared-matrix-limit");
    let a = granted(&p[0].shared(&key, Some(2)).await);
    assert_shared(&a, &p[0], Some(2));
    let b = granted(&p[1].shared(&key, Some(2)).await);
    assert_shared(&b, &p[1], Some(2));
    p[2].shared(&key, Some(2))
        .await
        .assert_error(409, "LOCK_CONTENDED");
    let state = key_becomes(&p[3].api, &key, &[&p[0], &p[1]], 0).await;
    assert_eq!(state.limit, Some(2));
    p[0].release(&key, &a).await;
    let c = granted(&p[2].shared(&key, Some(2)).await);
    assert_shared(&c, &p[2], Some(2));
    p[1].release(&key, &b).await;
    p[2].release(&key, &c).await;
}

/// Permits are handed out in queue order: with a semaphore of 2 full and two waiting, one
/// release lets exactly the first waiter in.
pub async fn a_semaphore_hands_a_freed_permit_to_the_next_in_line(replicas: &[Api]) {
    let p = parties(replicas, 4).await;
    let key = unique_key("shared-permits");
    let a = granted(&p[0].shared(&key, Some(2)).await);
    let b = granted(&p[1].shared(&key, Some(2)).await);
    let third = p[2].send_shared(&key, Some(2));
    key_becomes(&p[0].api, &key, &[&p[0], &p[1]], 1).await;
    let fourth = p[3].send_shared(&key, Some(2));
    key_becomes(&p[0].api, &key, &[&p[0], &p[1]], 2).await;
    p[0].release(&key, &a).await;
    let c = granted_later(third).await;
    assert_shared(&c, &p[2], Some(2));
    assert!(c.fencing_token > b.fencing_token);
    key_becomes(&p[1].api, &key, &[&p[1], &p[2]], 1).await;
    p[1].release(&key, &b).await;
    let d = granted_later(fourth).await;
    assert!(d.fencing_token > c.fencing_token);
    key_becomes(&p[3].api, &key, &[&p[2], &p[3]], 0).await;
    p[2].release(&key, &c).await;
    p[3].release(&key, &d).await;
}

/// LIMIT_MISMATCH carries the limit in force: the shared holders', else the first queued
/// shared ticket's (absent when that is no limit); the request does not queue. A free key
/// with an empty queue takes any limit.
pub async fn limit_mismatch_names_the_limit_in_force(replicas: &[Api]) {
    let p = parties(replicas, 3).await;
    // Against holders under a limit.
    let key = unique_key("shared-mismatch-holders");
    let a = granted(&p[0].shared(&key, Some(3)).await);
    for (limit, wait) in [(Some(2), None), (None, None), (Some(2), Some(LONG_WAIT))] {
        let reply = p[1]
            .api
            .acquire_shared(&key, &p[1].session, limit, wait)
            .await;
        let body = reply.assert_error(409, "LIMIT_MISMATCH");
        assert_eq!(body.limit, Some(3), "{reply:?}");
    }
    p[1].exclusive(&key)
        .await
        .assert_error(409, "LOCK_CONTENDED");
    key_becomes(&p[2].api, &key, &[&p[0]], 0).await;
    p[0].release(&key, &a).await;
    // Against holders without a limit: the body has no `limit`.
    let a = granted(&p[0].shared(&key, None).await);
    let reply = p[1].shared(&key, Some(5)).await;
    reply.assert_error(409, "LIMIT_MISMATCH");
    assert_eq!(reply.body.get("limit"), None, "{reply:?}");
    p[0].release(&key, &a).await;

    // Against the first queued shared ticket while a writer holds.
    let key = unique_key("shared-mismatch-queued");
    let w = granted(&p[0].exclusive(&key).await);
    let queued = p[1].send_shared(&key, Some(4));
    key_becomes(&p[0].api, &key, &[&p[0]], 1).await;
    for wait in [None, Some(LONG_WAIT)] {
        let reply = p[2]
            .api
            .acquire_shared(&key, &p[2].session, Some(2), wait)
            .await;
        let body = reply.assert_error(409, "LIMIT_MISMATCH");
        assert_eq!(body.limit, Some(4), "{reply:?}");
    }
    key_becomes(&p[2].api, &key, &[&p[0]], 1).await;
    p[0].release(&key, &w).await;
    let q = granted_later(queued).await;
    assert_shared(&q, &p[1], Some(4));
    p[1].release(&key, &q).await;
    // Free again, nobody queued: any limit goes.
    let any = granted(&p[2].shared(&key, Some(7)).await);
    assert_shared(&any, &p[2], Some(7));
    p[2].release(&key, &any).await;
}

/// While a writer queues, a shared L4 with `waitMillis` 0 is refused even though readers
/// hold the key and would admit it: nobody overtakes the queue.
pub async fn no_barging_past_a_queued_writer(replicas: &[Api]) {
    let p = parties(replicas, 4).await;
    let key = unique_key("shared-no-barging");
    let a = granted(&p[0].shared(&key, None).await);
    let b = granted(&p[1].shared(&key, None).await);
    let writer = p[2].send_exclusive(&key);
    key_becomes(&p[3].api, &key, &[&p[0], &p[1]], 1).await;
    p[3].shared(&key, None)
        .await
        .assert_error(409, "LOCK_CONTENDED");
    key_becomes(&p[3].api, &key, &[&p[0], &p[1]], 1).await;
    p[0].release(&key, &a).await;
    p[1].release(&key, &b).await;
    let w = granted_later(writer).await;
    assert_eq!(w.mode, LockMode::Exclusive);
    assert!(w.fencing_token > b.fencing_token);
    p[2].release(&key, &w).await;
}

/// One FIFO queue for both modes. A writer holds; R1, R2, W, R3 queue in that order. Its
/// release grants R1 and R2 together (readers behind the head, up to the first writer);
/// R3 stays behind W even while only readers hold. Each release hands on in turn: W once
/// both readers left, then R3. Tokens follow the grant order.
pub async fn readers_behind_the_head_are_batched_up_to_the_first_writer(replicas: &[Api]) {
    let p = parties(replicas, 5).await;
    let (w0, r1, r2, w, r3) = (&p[0], &p[1], &p[2], &p[3], &p[4]);
    let key = unique_key("shared-fifo");
    let held = granted(&w0.exclusive(&key).await);
    let first = r1.send_shared(&key, None);
    key_becomes(&w0.api, &key, &[w0], 1).await;
    let second = r2.send_shared(&key, None);
    key_becomes(&w0.api, &key, &[w0], 2).await;
    let writer = w.send_exclusive(&key);
    key_becomes(&w0.api, &key, &[w0], 3).await;
    let last = r3.send_shared(&key, None);
    key_becomes(&w0.api, &key, &[w0], 4).await;

    w0.release(&key, &held).await;
    let g1 = granted_later(first).await;
    let g2 = granted_later(second).await;
    assert_shared(&g1, r1, None);
    assert_shared(&g2, r2, None);
    assert!(held.fencing_token < g1.fencing_token && g1.fencing_token < g2.fencing_token);
    // R3 would fit beside R1 and R2, but W is ahead of it.
    let state = key_becomes(&r3.api, &key, &[r1, r2], 2).await;
    assert_eq!(state.mode, Some(LockMode::Shared));
    assert_eq!(state.holder, None);
    r1.release(&key, &g1).await;
    key_becomes(&r3.api, &key, &[r2], 2).await;
    r2.release(&key, &g2).await;
    let gw = granted_later(writer).await;
    assert_eq!(gw.mode, LockMode::Exclusive);
    assert!(gw.fencing_token > g2.fencing_token);
    let state = key_becomes(&r1.api, &key, &[w], 1).await;
    assert_eq!(state.mode, Some(LockMode::Exclusive));
    w.release(&key, &gw).await;
    let g3 = granted_later(last).await;
    assert_shared(&g3, r3, None);
    assert!(g3.fencing_token > gw.fencing_token);
    key_becomes(&r1.api, &key, &[r3], 0).await;
    r3.release(&key, &g3).await;
}

/// Readers keep arriving while a writer waits: none of them joins the readers holding the
/// key, so the writer gets it when those leave; the readers who came after it are then
/// granted together once it releases.
pub async fn a_writer_is_not_starved_by_a_stream_of_readers(replicas: &[Api]) {
    const STREAM: usize = 5;
    let p = parties(replicas, STREAM + 2).await;
    let (r0, w, stream) = (&p[0], &p[1], &p[2..]);
    let key = unique_key("shared-no-starving");
    let held = granted(&r0.shared(&key, None).await);
    let writer = w.send_exclusive(&key);
    key_becomes(&r0.api, &key, &[r0], 1).await;
    let mut readers = Vec::new();
    for (n, reader) in stream.iter().enumerate() {
        reader
            .shared(&key, None)
            .await
            .assert_error(409, "LOCK_CONTENDED");
        readers.push(reader.send_shared(&key, None));
        key_becomes(&r0.api, &key, &[r0], n as u32 + 2).await;
    }
    r0.release(&key, &held).await;
    let gw = granted_later(writer).await;
    key_becomes(&r0.api, &key, &[w], STREAM as u32).await;
    w.release(&key, &gw).await;
    let mut grants = Vec::new();
    for reader in readers {
        grants.push(granted_later(reader).await);
    }
    let everyone: Vec<&Party> = stream.iter().collect();
    key_becomes(&r0.api, &key, &everyone, 0).await;
    for (grant, reader) in grants.iter().zip(stream) {
        assert!(grant.fencing_token > gw.fencing_token, "{grant:?}");
        reader.release(&key, grant).await;
    }
}

/// An exclusive L4 of a shared holder is refused (409 UPGRADE_NOT_ALLOWED), waiting or
/// not, and leaves its shared hold as it was; its shared L4 still returns that hold.
pub async fn an_upgrade_is_refused_and_changes_nothing(replicas: &[Api]) {
    let p = parties(replicas, 2).await;
    let key = unique_key("shared-upgrade");
    let held = granted(&p[0].shared(&key, Some(3)).await);
    p[0].exclusive(&key)
        .await
        .assert_error(409, "UPGRADE_NOT_ALLOWED");
    p[0].api
        .acquire(&key, &p[0].session, Some(TTL), Some(LONG_WAIT))
        .await
        .assert_error(409, "UPGRADE_NOT_ALLOWED");
    let state = key_becomes(&p[1].api, &key, &[&p[0]], 0).await;
    assert_eq!(state.mode, Some(LockMode::Shared));
    assert_eq!(state.holders[0].fencing_token, held.fencing_token);
    let again = granted(&p[0].shared(&key, Some(3)).await);
    assert_eq!(again.fencing_token, held.fencing_token);
    assert_shared(&again, &p[0], Some(3));
    // Another reader still fits beside it.
    let other = granted(&p[1].shared(&key, Some(3)).await);
    p[0].release(&key, &held).await;
    p[1].release(&key, &other).await;
}

/// A shared L4 of the key's exclusive holder returns its exclusive grant, renewed (it holds
/// more than it asked for): same token, no `mode` or `limit` on the wire.
pub async fn a_shared_request_of_the_exclusive_holder_gets_its_exclusive_grant(replicas: &[Api]) {
    let p = parties(replicas, 2).await;
    let key = unique_key("shared-under-exclusive");
    let held = granted(&p[0].exclusive(&key).await);
    for limit in [None, Some(3)] {
        let reply = p[0].shared(&key, limit).await;
        let again = granted(&reply);
        assert_eq!(again.fencing_token, held.fencing_token);
        assert_eq!(again.mode, LockMode::Exclusive);
        assert_eq!(reply.body.get("mode"), None, "{reply:?}");
        assert_eq!(reply.body.get("limit"), None, "{reply:?}");
    }
    let state = key_becomes(&p[1].api, &key, &[&p[0]], 0).await;
    assert_eq!(state.mode, Some(LockMode::Exclusive));
    p[0].release(&key, &held).await;
}

/// L6 is compare-and-delete of one hold: a reader's release leaves the others' holds, its
/// token is dead afterwards, a token nobody holds changes nothing.
pub async fn each_shared_holder_releases_its_own_hold(replicas: &[Api]) {
    let p = parties(replicas, 3).await;
    let key = unique_key("shared-release");
    let grants: Vec<LockGrant> = {
        let mut out = Vec::new();
        for party in &p {
            out.push(granted(&party.shared(&key, None).await));
        }
        out
    };
    p[1].release(&key, &grants[1]).await;
    key_becomes(&p[0].api, &key, &[&p[0], &p[2]], 0).await;
    p[1].api
        .release(&key, grants[1].fencing_token, None)
        .await
        .assert_error(409, "LOCK_LOST");
    let nobody = grants.iter().map(|g| g.fencing_token).max().unwrap() + 1_000_000;
    p[0].api
        .release(&key, nobody, None)
        .await
        .assert_error(409, "LOCK_LOST");
    key_becomes(&p[1].api, &key, &[&p[0], &p[2]], 0).await;
    p[0].release(&key, &grants[0]).await;
    p[2].release(&key, &grants[2]).await;
    let state = key_becomes(&p[0].api, &key, &[], 0).await;
    assert_eq!(state.mode, None);
}

/// R1 with `fencingToken` revokes that one hold (`revokedTokens` lists it; nothing when it
/// is not live); without, every hold, listed in token order, `revokedToken` the lowest.
pub async fn revoke_every_hold_or_one(replicas: &[Api]) {
    let p = parties(replicas, 3).await;
    let key = unique_key("shared-revoke");
    let mut grants = Vec::new();
    for party in &p {
        grants.push(granted(&party.shared(&key, None).await));
    }
    let (a, b, c) = (&grants[0], &grants[1], &grants[2]);
    let reply = p[0]
        .api
        .revoke_hold(&key, "one reader", b.fencing_token)
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.body,
        json!({"key": key, "revokedToken": b.fencing_token,
               "revokedTokens": [b.fencing_token], "reason": "one reader"})
    );
    key_becomes(&p[1].api, &key, &[&p[0], &p[2]], 0).await;
    let reply = p[1].api.revoke_hold(&key, "again", b.fencing_token).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body["revokedTokens"], json!([]), "{reply:?}");
    assert_eq!(reply.body["revokedToken"], Value::Null, "{reply:?}");
    key_becomes(&p[1].api, &key, &[&p[0], &p[2]], 0).await;
    p[1].api
        .release(&key, b.fencing_token, None)
        .await
        .assert_error(409, "LOCK_LOST");

    let reply = p[2].api.revoke(&key, "everyone").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.body["revokedTokens"],
        json!([a.fencing_token, c.fencing_token]),
        "{reply:?}"
    );
    assert_eq!(reply.body["revokedToken"], json!(a.fencing_token));
    key_becomes(&p[0].api, &key, &[], 0).await;
    for (party, grant) in p.iter().zip(&grants) {
        let beat = party.api.heartbeat_ok(&party.session).await;
        assert!(
            beat.locks.as_ref().unwrap().iter().all(|l| l.key != key),
            "{beat:?}"
        );
        party
            .api
            .release(&key, grant.fencing_token, None)
            .await
            .assert_error(409, "LOCK_LOST");
    }
}

/// A reader's session closing ends that reader's hold only; the writer queued behind the
/// readers gets the key when the last one's session is gone.
pub async fn a_readers_session_end_ends_its_hold_alone(replicas: &[Api]) {
    let p = parties(replicas, 3).await;
    let key = unique_key("shared-session-end");
    let a = granted(&p[0].shared(&key, None).await);
    let b = granted(&p[1].shared(&key, None).await);
    let writer = p[2].send_exclusive(&key);
    key_becomes(&p[2].api, &key, &[&p[0], &p[1]], 1).await;
    assert_eq!(p[0].api.close_session(&p[0].session).await.status, 204);
    key_becomes(&p[2].api, &key, &[&p[1]], 1).await;
    assert_eq!(p[1].api.close_session(&p[1].session).await.status, 204);
    let w = granted_later(writer).await;
    assert!(w.fencing_token > b.fencing_token && b.fencing_token > a.fencing_token);
    key_becomes(&p[0].api, &key, &[&p[2]], 0).await;
    p[2].release(&key, &w).await;
}

/// A reader's hold whose TTL runs out ends alone, and the writer queued behind it gets the
/// key then, although nothing was written when it expired.
pub async fn a_readers_expiry_ends_its_hold_alone(replicas: &[Api]) {
    let p = parties(replicas, 3).await;
    let key = unique_key("shared-expiry");
    let a = granted(&p[0].shared(&key, None).await);
    // 1 s: short, and a whole second for an etcd lease.
    let short = json!({"sessionId": p[1].session, "mode": "shared", "ttlMillis": 1_000});
    let b = granted(&p[1].api.json("POST", &paths::acquire(&key), &short).await);
    let writer = p[2].send_exclusive(&key);
    waiters_become(&p[2].api, &key, 1).await;
    p[0].release(&key, &a).await;
    // B's hold stays until its TTL runs out (it may have already): never anyone else beside.
    let state = p[1].api.lock_state(&key).await;
    let seen = (holder_ids(&state), state.waiter_count);
    assert!(
        seen == (ids(&[&p[1]]), 1) || seen == (ids(&[&p[2]]), 0),
        "after the first reader's release: {state:?}"
    );
    let w = granted_later(writer).await;
    assert!(w.fencing_token > b.fencing_token);
    key_becomes(&p[0].api, &key, &[&p[2]], 0).await;
    p[1].api
        .release(&key, b.fencing_token, None)
        .await
        .assert_error(409, "LOCK_LOST");
    let beat = p[1].api.heartbeat_ok(&p[1].session).await;
    assert!(
        beat.locks.as_ref().unwrap().iter().all(|l| l.key != key),
        "{beat:?}"
    );
    p[2].release(&key, &w).await;
}

/// The exact field names of an L7 holder, as before shared holds.
const HOLDER_FIELDS: [&str; 4] = ["fencingToken", "holderId", "owner", "remainingMillis"];

fn field_names(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect()
}

/// L7's answer in each mode: free (`mode`, `holder`, `limit` null, no holders); exclusive
/// (`holder` exactly as before — same fields — and the same holder as `holders`' only
/// entry); shared (`holder` null, `holders` in token order, `limit`).
pub async fn lock_state_shapes(replicas: &[Api]) {
    let p = parties(replicas, 3).await;
    let key = unique_key("shared-l7");
    let fields: BTreeSet<String> = ["holder", "holders", "key", "limit", "mode", "waiterCount"]
        .map(String::from)
        .into();
    let free = p[0].api.lock_state_reply(&key).await;
    assert_eq!(field_names(&free.body), fields, "{free:?}");
    assert_eq!(free.body["mode"], Value::Null);
    assert_eq!(free.body["holder"], Value::Null);
    assert_eq!(free.body["holders"], json!([]));
    assert_eq!(free.body["limit"], Value::Null);

    let x = granted(&p[0].exclusive(&key).await);
    let held = p[1].api.lock_state_reply(&key).await;
    assert_eq!(field_names(&held.body), fields, "{held:?}");
    assert_eq!(held.body["mode"], "exclusive");
    assert_eq!(held.body["limit"], Value::Null);
    let holder = &held.body["holder"];
    assert_eq!(
        field_names(holder),
        HOLDER_FIELDS.map(String::from).into(),
        "{held:?}"
    );
    assert_eq!(holder["holderId"], p[0].holder.as_str());
    assert_eq!(holder["fencingToken"], json!(x.fencing_token));
    assert_eq!(held.body["holders"].as_array().map(Vec::len), Some(1));
    let listed = &held.body["holders"][0];
    assert_eq!(field_names(listed), field_names(holder));
    assert_eq!(
        (&listed["holderId"], &listed["fencingToken"]),
        (&holder["holderId"], &holder["fencingToken"])
    );
    p[0].release(&key, &x).await;

    let a = granted(&p[0].shared(&key, Some(5)).await);
    let b = granted(&p[1].shared(&key, Some(5)).await);
    let shared = p[2].api.lock_state_reply(&key).await;
    assert_eq!(field_names(&shared.body), fields, "{shared:?}");
    assert_eq!(shared.body["mode"], "shared");
    assert_eq!(shared.body["holder"], Value::Null, "{shared:?}");
    assert_eq!(shared.body["limit"], json!(5));
    let state: LockState = shared.parse();
    assert_eq!(holder_ids(&state), ids(&[&p[0], &p[1]]));
    let tokens: Vec<u64> = state.holders.iter().map(|h| h.fencing_token).collect();
    assert_eq!(tokens, [a.fencing_token, b.fencing_token]);
    for listed in shared.body["holders"].as_array().expect("holders") {
        assert_eq!(field_names(listed), HOLDER_FIELDS.map(String::from).into());
    }
    assert!(
        !shared.text.contains(&p[0].session) && !shared.text.contains(&p[1].session),
        "L7 shows no session id: {shared:?}"
    );
    p[0].release(&key, &a).await;
    p[1].release(&key, &b).await;
    let unlimited = granted(&p[2].shared(&key, None).await);
    let state = key_becomes(&p[0].api, &key, &[&p[2]], 0).await;
    assert_eq!(
        (state.mode, state.limit),
        (Some(LockMode::Shared), None),
        "{state:?}"
    );
    p[2].release(&key, &unlimited).await;
}

/// L2 and L5 list each of a session's holds with its mode.
pub async fn sessions_list_each_hold_with_its_mode(replicas: &[Api]) {
    let p = party(replicas, 0).await;
    let (exclusive_key, shared_key) = (unique_key("shared-l2-x"), unique_key("shared-l2-s"));
    let x = granted(&p.exclusive(&exclusive_key).await);
    let s = granted(&p.shared(&shared_key, Some(2)).await);
    let expected = |locks: &Value| {
        let mut modes: Vec<(String, u64, String)> = locks
            .as_array()
            .expect("locks")
            .iter()
            .map(|l| {
                (
                    l["key"].as_str().unwrap_or_default().to_string(),
                    l["fencingToken"].as_u64().unwrap_or_default(),
                    l["mode"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        modes.sort();
        let mut wanted = vec![
            (
                exclusive_key.clone(),
                x.fencing_token,
                "exclusive".to_string(),
            ),
            (shared_key.clone(), s.fencing_token, "shared".to_string()),
        ];
        wanted.sort();
        assert_eq!(modes, wanted, "{locks}");
    };
    let beat = p.api.heartbeat(&p.session).await;
    assert_eq!(beat.status, 200, "{beat:?}");
    expected(&beat.body["locks"]);
    let status = p.api.session_status(&p.session).await;
    assert_eq!(status.status, 200, "{status:?}");
    expected(&status.body["locks"]);
    p.release(&exclusive_key, &x).await;
    p.release(&shared_key, &s).await;
}

/// Every shared grant gets a token of its own, strictly greater than every earlier token of
/// the key, exclusive or shared, across holders that overlap.
pub async fn tokens_strictly_increase_across_shared_grants(replicas: &[Api]) {
    let p = parties(replicas, 4).await;
    let key = unique_key("shared-tokens");
    let mut last = 0;
    let mut rising = |grant: &LockGrant| {
        assert!(
            grant.fencing_token > last,
            "{} after {last}",
            grant.fencing_token
        );
        last = grant.fencing_token;
    };
    for _round in 0..3 {
        let mut held = Vec::new();
        for party in &p[..3] {
            let grant = granted(&party.shared(&key, None).await);
            rising(&grant);
            held.push(grant);
        }
        for (party, grant) in p.iter().zip(&held) {
            party.release(&key, grant).await;
        }
        let x = granted(&p[3].exclusive(&key).await);
        rising(&x);
        p[3].release(&key, &x).await;
    }
}

/// On the wire: an exclusive grant is byte for byte what it was before shared holds (no
/// `mode`, no `limit`), whether the request named the mode or not; a shared grant says
/// `"mode": "shared"`, and its `limit` when it has one.
pub async fn grants_on_the_wire(replicas: &[Api]) {
    let p = parties(replicas, 1).await;
    let api = &p[0].api;
    let base: BTreeSet<String> = [
        "fencingToken",
        "key",
        "sessionId",
        "ttlMillis",
        "waitedMillis",
    ]
    .map(String::from)
    .into();
    let bodies = [
        json!({"sessionId": p[0].session}),
        json!({"sessionId": p[0].session, "mode": "exclusive"}),
    ];
    for body in bodies {
        let key = unique_key("shared-wire-x");
        let reply = api.json("POST", &paths::acquire(&key), &body).await;
        let grant = granted(&reply);
        assert_eq!(field_names(&reply.body), base, "{reply:?}");
        p[0].release(&key, &grant).await;
    }
    for limit in [None, Some(9)] {
        let key = unique_key("shared-wire-s");
        let reply = p[0].shared(&key, limit).await;
        let grant = granted(&reply);
        let mut fields = base.clone();
        fields.insert("mode".into());
        if limit.is_some() {
            fields.insert("limit".into());
        }
        assert_eq!(field_names(&reply.body), fields, "{reply:?}");
        assert_eq!(reply.body["mode"], "shared");
        if let Some(limit) = limit {
            assert_eq!(reply.body["limit"], json!(limit));
        }
        p[0].release(&key, &grant).await;
    }
}

/// Bad `mode`/`limit` → 400 VALIDATION_FAILED naming the field, and nothing is stored: a
/// limit with an exclusive hold (named or by default), 0, 10001, a mode that is not one.
pub async fn bad_holds_are_refused_and_store_nothing(replicas: &[Api]) {
    let p = parties(replicas, 1).await;
    let id = p[0].session.as_str();
    let key = unique_key("shared-bad");
    let bad = [
        (json!({"sessionId": id, "limit": 3}), "limit"),
        (
            json!({"sessionId": id, "mode": "exclusive", "limit": 3}),
            "limit",
        ),
        (
            json!({"sessionId": id, "mode": "shared", "limit": 0}),
            "limit",
        ),
        (
            json!({"sessionId": id, "mode": "shared", "limit": 10_001}),
            "limit",
        ),
        (
            json!({"sessionId": id, "mode": "shared", "limit": -1}),
            "limit",
        ),
        (
            json!({"sessionId": id, "mode": "shared", "limit": "2"}),
            "limit",
        ),
        (json!({"sessionId": id, "mode": "bogus"}), "mode"),
        (json!({"sessionId": id, "mode": "SHARED"}), "mode"),
        (json!({"sessionId": id, "mode": null, "limit": 2}), "limit"),
    ];
    for (body, field) in bad {
        let reply = p[0].api.json("POST", &paths::acquire(&key), &body).await;
        let error = reply.assert_error(400, "VALIDATION_FAILED");
        assert_eq!(error.field.as_deref(), Some(field), "{body}: {reply:?}");
    }
    let state = key_becomes(&p[0].api, &key, &[], 0).await;
    assert_eq!(state.mode, None);
    // The bounds themselves are valid.
    for limit in [1, lock_api::limits::SHARED_LIMIT_MAX] {
        let key = unique_key("shared-bounds");
        let grant = granted(&p[0].shared(&key, Some(limit)).await);
        assert_eq!(grant.limit, Some(limit));
        p[0].release(&key, &grant).await;
    }
}

/// One gauge line's value (`name` with its labels, as printed).
fn gauge(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
}

/// `(lock_locks, exclusive holds, shared holds)` as a replica reports them.
async fn hold_gauges(api: &Api) -> (u64, u64, u64) {
    let text = api.metrics().await;
    (
        gauge(&text, "lock_locks"),
        gauge(&text, "lock_holds{mode=\"exclusive\"}"),
        gauge(&text, "lock_holds{mode=\"shared\"}"),
    )
}

/// Rounds of the gauge check: another check's hold may expire between its two reads, which
/// makes a round inconclusive, never wrong.
const GAUGE_ROUNDS: usize = 5;

/// `/metrics` counts holds by mode: `lock_holds{mode}` and `lock_locks` (every mode), read
/// with three holds (two shared, one exclusive) taken and again after they are released;
/// the refusals are counted by their outcomes.
pub async fn metrics_count_holds_by_mode(replicas: &[Api]) {
    let p = parties(replicas, 2).await;
    let mut rounds = Vec::new();
    for _ in 0..GAUGE_ROUNDS {
        let (shared_key, exclusive_key) = (unique_key("shared-gauge"), unique_key("x-gauge"));
        let a = granted(&p[0].shared(&shared_key, Some(2)).await);
        let b = granted(&p[1].shared(&shared_key, Some(2)).await);
        let x = granted(&p[0].exclusive(&exclusive_key).await);
        let held = hold_gauges(&p[0].api).await;
        p[0].release(&shared_key, &a).await;
        p[1].release(&shared_key, &b).await;
        p[0].release(&exclusive_key, &x).await;
        let after = hold_gauges(&p[0].api).await;
        let delta = (
            held.0.wrapping_sub(after.0),
            held.1.wrapping_sub(after.1),
            held.2.wrapping_sub(after.2),
        );
        rounds.push(delta);
        if delta == (3, 1, 2) {
            break;
        }
    }
    assert_eq!(
        rounds.last(),
        Some(&(3, 1, 2)),
        "holds (all, exclusive, shared) released per round: {rounds:?}"
    );
    // The two refusals of shared holds are outcomes of their own.
    let key = unique_key("shared-outcomes");
    // Both through the first replica, whose counters are read (a session is any replica's).
    let a = granted(&p[0].shared(&key, Some(2)).await);
    p[0].api
        .acquire_shared(&key, &p[1].session, Some(3), None)
        .await
        .assert_error(409, "LIMIT_MISMATCH");
    p[0].exclusive(&key)
        .await
        .assert_error(409, "UPGRADE_NOT_ALLOWED");
    let text = p[0].api.metrics().await;
    for outcome in ["limit_mismatch", "upgrade_not_allowed"] {
        let line = format!("lock_acquire_total{{outcome=\"{outcome}\"}}");
        assert!(gauge(&text, &line) >= 1, "{outcome} not counted:\n{text}");
    }
    p[0].release(&key, &a).await;
}
