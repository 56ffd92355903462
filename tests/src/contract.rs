//! The HTTP contract suite (C3), as functions over a running [`TestServer`], so every
//! backend runs the same checks: start a server with [`options`] (plus backend flags) and
//! call [`run_all`], or the single checks. Keys are unique per call (`unique_key`), so the
//! checks may share one server and run in any order.
//!
//! The checks assume nothing about absolute token values, only their order.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lock_api::{paths, HeartbeatResponse, LockGrant, LockState, SessionStatus};
use serde_json::{json, Value};

use crate::client::Api;
use crate::tls::{RawConn, ALPN_HTTP1};
use crate::{ServerOptions, TestServer};

/// Admin token the suite's server is started with.
pub const ADMIN_TOKEN: &str = "contract-admin-token";
/// The only CORS origin the suite's server allows.
pub const CORS_ORIGIN: &str = "http://allowed.example";
/// Per-key waiter cap the suite's server is started with.
pub const MAX_WAITERS: u32 = 2;
/// Largest R1 `reason` and demo-ledger `entry`, in bytes (C3's ASSUMPTIONS).
const REASON_MAX_BYTES: usize = 1024;
const ENTRY_MAX_BYTES: usize = 1024;
/// Bound on every "eventually" poll (generous: no test depends on speed).
pub(crate) const EVENTUALLY: Duration = Duration::from_secs(20);

/// The options the suite expects: admin token, CORS origin, a small waiter cap, and the
/// server's own debug lines logged (so the log checks cover them too).
pub fn options() -> ServerOptions {
    ServerOptions::new()
        .admin_token(ADMIN_TOKEN)
        .args([
            "--cors-origin".to_string(),
            CORS_ORIGIN.to_string(),
            "--max-waiters-per-key".to_string(),
            MAX_WAITERS.to_string(),
        ])
        .env("RUST_LOG", "info,lock_server=debug")
}

/// A key no other check uses, with characters that need percent-encoding.
pub fn unique_key(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("contract/{name} ü#{n}-{}", std::process::id())
}

/// Polls `check` until it holds; panics naming `what` after [`EVENTUALLY`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + EVENTUALLY;
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never happened: {what}");
}

/// Runs every check against a server started with [`options`].
pub async fn run_all(server: &TestServer) {
    sessions_lifecycle(server).await;
    sessions_are_named_by_holder_id_with_the_id_in_a_header(server).await;
    acquire_release_and_idempotence(server).await;
    reacquire_by_the_holder_renews_the_lease(server).await;
    tokens_increase_per_key(server).await;
    heartbeat_renews_locks_and_expiry_releases_them(server).await;
    lock_ttl_runs_out_on_its_own(server).await;
    closing_a_session_releases_its_locks(server).await;
    server_side_wait_is_woken_by_release(server).await;
    server_side_wait_is_woken_by_every_change(server).await;
    server_side_wait_is_bounded(server).await;
    contention_exceeded_over_the_waiter_cap(server).await;
    admin_revoke(server).await;
    demo_ledger_fences(server).await;
    unfenced_ledger_accepts_stale_writes(server).await;
    the_two_ledgers_are_separate(server).await;
    unfenced_ledger_validates_like_the_fenced(server).await;
    error_bodies_for_unknown_routes_and_methods(server).await;
    bad_inputs_get_contract_errors_and_store_stays_intact(server).await;
    keys_are_counted_in_bytes(server).await;
    range_bounds_are_inclusive(server).await;
    body_limit_is_exact_and_content_type_is_not_checked(server).await;
    request_heads_over_64_kib_are_refused(server).await;
    observability_surfaces(server).await;
    openapi_matches_routes(server).await;
    cors_only_for_configured_origins(server).await;
}

/// L1, L2, L3, L5 and SESSION_NOT_FOUND.
pub async fn sessions_lifecycle(server: &TestServer) {
    let api = server.api();
    // Empty body: every field is optional, the server defaults apply.
    let reply = api.raw("POST", "/v1/sessions", None, &[]).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    assert_eq!(reply.body["ttlMillis"], 15_000, "default session TTL");
    assert_eq!(reply.body["heartbeatMillis"], 5_000);
    let id = reply.body["sessionId"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32, "128-bit hex id");
    let holder_id = reply.body["holderId"]
        .as_str()
        .expect("L1 names the holder id");
    assert_eq!(holder_id.len(), 32, "128-bit hex holder id");
    assert_ne!(holder_id, id, "the holder id is not the session id");

    let reply = api
        .open_session_with(json!({"ttlMillis": 4000, "owner": "worker-1"}))
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    assert_ne!(reply.body["sessionId"], id.as_str());

    let status: SessionStatus = api.session_status(&id).await.parse();
    assert_eq!(status.session_id, id);
    assert!(status.remaining_millis > 0 && status.remaining_millis <= 15_000);
    assert!(status.locks.is_empty());

    let hb = api.heartbeat_ok(&id).await;
    assert_eq!(hb.ttl_millis, 15_000);
    assert!(hb.locks.as_ref().unwrap().is_empty());

    assert_eq!(api.close_session(&id).await.status, 204);
    api.close_session(&id)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
    api.heartbeat(&id)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
    api.session_status(&id)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
    api.session_status("00000000000000000000000000000000")
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
}

/// L2, L3 and L5 name the session by its holder id in the path and carry its session id in
/// the `Lock-Session-Id` header; the session id never goes in a URL. Tried as an attacker
/// would: the old path (session id in it), another session's public holder id with one's
/// own session id, a missing, repeated, empty or oversized header. Each is refused with its
/// contract error, and the victim's session and lock are untouched.
pub async fn sessions_are_named_by_holder_id_with_the_id_in_a_header(server: &TestServer) {
    let api = server.api();
    let key = unique_key("named");
    let victim = api.open_session(60_000).await;
    let grant = api.acquire_ok(&key, &victim.session_id, 60_000).await;
    let attacker = api.open_session(60_000).await;
    // The victim's holder id is public (L7 shows it).
    let state: LockState = api.raw("GET", &paths::lock(&key), None, &[]).await.parse();
    let victim_holder = state.holder.expect("held").holder_id;
    assert_eq!(victim_holder, victim.holder_id);
    let header = lock_api::paths::SESSION_ID_HEADER;
    let unknown = api
        .session_call("GET", "no-such-session", None)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
    for (method, path) in [
        ("POST", paths::heartbeat(&victim_holder)),
        ("GET", paths::session(&victim_holder)),
        ("DELETE", paths::session(&victim_holder)),
    ] {
        // Own session id, the victim's holder id: 404, exactly as an unknown session.
        let mixed = api
            .raw(method, &path, None, &[(header, &attacker.session_id)])
            .await;
        let error = mixed.assert_error(404, "SESSION_NOT_FOUND");
        assert_eq!(error, unknown, "no oracle: {method} {path}");
        // The old shape: the session id in the path, with or without the header.
        let old_path = path.replace(&victim_holder, &attacker.session_id);
        api.raw(method, &old_path, None, &[(header, &attacker.session_id)])
            .await
            .assert_error(404, "SESSION_NOT_FOUND");
        let no_header = api.raw(method, &old_path, None, &[]).await;
        let error = no_header.assert_error(400, "VALIDATION_FAILED");
        assert_eq!(error.field.as_deref(), Some(header), "{no_header:?}");
        // Hostile headers on the victim's path.
        let long = "s".repeat(257);
        for values in [vec![""], vec![long.as_str()], vec!["a b"], vec!["x", "y"]] {
            let headers: Vec<(&str, &str)> = values.iter().map(|v| (header, *v)).collect();
            api.raw(method, &path, None, &headers)
                .await
                .assert_error(400, "VALIDATION_FAILED");
        }
    }
    // The victim's session and lock are as they were; the right pair works.
    let status: SessionStatus = api.session_status(&victim.session_id).await.parse();
    let held: Vec<u64> = status.locks.iter().map(|l| l.fencing_token).collect();
    assert_eq!(held, [grant.fencing_token]);
    api.heartbeat_ok(&victim.session_id).await;
    assert_eq!(api.close_session(&attacker.session_id).await.status, 204);
    assert_eq!(api.close_session(&victim.session_id).await.status, 204);
}

/// L4 grant, idempotent re-acquire, LOCK_CONTENDED, L7, L6 compare-and-delete, benign
/// LOCK_LOST, SESSION_NOT_FOUND on L4.
pub async fn acquire_release_and_idempotence(server: &TestServer) {
    let api = server.api();
    let key = unique_key("acquire");
    let a = api.open_session(30_000).await;
    let b = api.open_session(30_000).await;

    let grant = api.acquire_ok(&key, &a.session_id, 5_000).await;
    assert_eq!(grant.key, key);
    assert_eq!(grant.session_id, a.session_id);
    assert_eq!(grant.ttl_millis, 5_000);
    assert!(grant.fencing_token > 0 && grant.fencing_token < (1 << 53));

    // A retried acquire by the holder returns the same grant: no second token.
    let again = api.acquire_ok(&key, &a.session_id, 5_000).await;
    assert_eq!(again.fencing_token, grant.fencing_token);

    let reply = api.acquire(&key, &b.session_id, Some(5_000), None).await;
    reply.assert_error(409, "LOCK_CONTENDED");

    let reply = api.lock_state_reply(&key).await;
    assert!(
        !reply.text.contains(&a.session_id),
        "L7 shows no session id: {reply:?}"
    );
    let state: lock_api::LockState = reply.parse();
    let holder = state.holder.expect("held");
    assert_eq!(
        holder.holder_id, a.holder_id,
        "L7 names the holder by holderId"
    );
    assert_eq!(holder.owner, None, "opened without an owner label");
    assert_eq!(holder.fencing_token, grant.fencing_token);
    assert!(holder.remaining_millis > 0 && holder.remaining_millis <= 5_000);
    assert_eq!(state.waiter_count, 0);

    // Compare-and-delete: the wrong token (even with the right session) changes nothing.
    api.release(&key, grant.fencing_token + 1, Some(&a.session_id))
        .await
        .assert_error(409, "LOCK_LOST");
    assert!(api.lock_state(&key).await.holder.is_some());
    // The predicate is (key, token) only: sessionId is attribution, not a check.
    let reply = api
        .release(&key, grant.fencing_token, Some(&b.session_id))
        .await;
    assert_eq!(reply.status, 204, "{reply:?}");
    assert!(api.lock_state(&key).await.holder.is_none());
    // Releasing again: benign LOCK_LOST.
    api.release(&key, grant.fencing_token, None)
        .await
        .assert_error(409, "LOCK_LOST");

    let next = api.acquire_ok(&key, &b.session_id, 5_000).await;
    assert!(next.fencing_token > grant.fencing_token);

    api.acquire(&key, "no-such-session", None, None)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
    // Default lock TTL applies without ttlMillis (10 s).
    let key2 = unique_key("default-ttl");
    let reply = api.acquire(&key2, &a.session_id, None, None).await;
    assert_eq!(reply.parse::<LockGrant>().ttl_millis, 10_000);
}

/// Lock TTL of the re-acquire check: short, so the check takes about one TTL.
const REACQUIRE_TTL: u64 = 2_000;
/// Rounds the re-acquire check may find inconclusive (the machine stalled longer than half
/// a TTL at the wrong moment) before it gives up.
const REACQUIRE_ROUNDS: usize = 4;

/// L4 by the holding session returns the same grant (same token, the lock's original
/// `ttlMillis` whatever the retry asks for) and renews the lock to the request's arrival + that
/// TTL, so it outlives its original deadline. Since the arrival is after the send, the
/// renewed deadline is never earlier than the client's `sentAt + ttl` for that request.
///
/// No wall-clock assertion: the session (long TTL, never heartbeated) is the reference clock.
/// L5 reads the session's and the lock's remaining time at one server instant, so their
/// difference is the distance between the two deadlines however late the read comes; and the
/// session's remaining time says how much server time passed between two reads. A round that a
/// stall makes inconclusive (the lock expired before the re-acquire arrived) is repeated.
pub async fn reacquire_by_the_holder_renews_the_lease(server: &TestServer) {
    let mut skipped = Vec::new();
    for _ in 0..REACQUIRE_ROUNDS {
        match reacquire_round(&server.api()).await {
            Ok(()) => return,
            Err(inconclusive) => skipped.push(inconclusive),
        }
    }
    panic!("every re-acquire round was inconclusive: {skipped:?}");
}

/// One session's view at one server instant: its remaining time and one lock's, if listed.
struct L5View {
    session: i64,
    lock: Option<(u64, i64)>,
}

async fn l5_view(api: &Api, session_id: &str, key: &str) -> L5View {
    let status: SessionStatus = api.session_status(session_id).await.parse();
    L5View {
        session: status.remaining_millis as i64,
        lock: status
            .locks
            .iter()
            .find(|l| l.key == key)
            .map(|l| (l.fencing_token, l.remaining_millis as i64)),
    }
}

/// One round of [`reacquire_by_the_holder_renews_the_lease`]; `Err` says why it proved nothing.
async fn reacquire_round(api: &Api) -> Result<(), String> {
    let ttl = REACQUIRE_TTL as i64;
    let key = unique_key("reacquire");
    let s = api.open_session(120_000).await;
    let grant = api.acquire_ok(&key, &s.session_id, REACQUIRE_TTL).await;
    // Deadlines as distances before the session's (fixed) deadline: `gap = session − lock`.
    let first = l5_view(api, &s.session_id, &key).await;
    let Some((_, left)) = first.lock else {
        return Err("the lock expired before the first read".into());
    };
    let first_gap = first.session - left;
    // Wait until the server says half the TTL has passed.
    let before_send = loop {
        let view = l5_view(api, &s.session_id, &key).await;
        if first.session - view.session >= ttl / 2 {
            break view;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    if before_send.lock.is_none() {
        return Err("the lock expired before the re-acquire was sent".into());
    }
    // Asks for twice the TTL: the grant keeps the lock's own.
    let again: LockGrant = {
        let reply = api
            .acquire(&key, &s.session_id, Some(2 * REACQUIRE_TTL), None)
            .await;
        assert_eq!(reply.status, 200, "re-acquire by the holder: {reply:?}");
        reply.parse()
    };
    if again.fencing_token != grant.fencing_token {
        assert!(again.fencing_token > grant.fencing_token, "{again:?}");
        return Err("the lock expired before the re-acquire arrived".into());
    }
    // `waitedMillis` is each answer's own (the time from that request's arrival to its
    // lease start), so it may differ by a millisecond.
    assert_eq!(
        LockGrant {
            waited_millis: grant.waited_millis,
            ..again
        },
        grant,
        "the same grant, with the lock's original ttlMillis"
    );
    let after = l5_view(api, &s.session_id, &key).await;
    // The renewal happened after `before_send`'s instant, so the new deadline is at least one
    // TTL after that instant: gap ≤ before_send.session − ttl. Without renewal the gap stays
    // `first_gap`, which is larger by at least half a TTL.
    let renewed_by = before_send.session - ttl;
    let Some((token, left)) = after.lock else {
        assert!(
            after.session <= renewed_by,
            "the re-acquired lock is gone before one TTL passed since it was sent: \
             first gap {first_gap} ms, session left at send {} ms, now {} ms",
            before_send.session,
            after.session
        );
        return Err("the machine stalled for a whole TTL after the re-acquire".into());
    };
    assert_eq!(token, grant.fencing_token);
    let gap = after.session - left;
    assert!(
        gap <= renewed_by,
        "the re-acquire did not renew the lease from its arrival: lock deadline {gap} ms \
         before the session's, expected at most {renewed_by} (before the re-acquire it was \
         {first_gap})"
    );
    assert!(
        left <= ttl,
        "renewed with the requested TTL, not the lock's: {left} ms left"
    );
    survives_its_first_deadline(
        api,
        &s.session_id,
        &key,
        grant.fencing_token,
        first_gap,
        gap,
    )
    .await
}

/// Once the server's clock is past the lock's first deadline (and before the renewed one),
/// L5 and L7 still show the holder with its token.
async fn survives_its_first_deadline(
    api: &Api,
    session_id: &str,
    key: &str,
    token: u64,
    first_gap: i64,
    renewed_gap: i64,
) -> Result<(), String> {
    loop {
        let before = l5_view(api, session_id, key).await;
        if before.session >= first_gap {
            // Not yet past the first deadline.
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let holder = api.lock_state(key).await.holder;
        let after = l5_view(api, session_id, key).await;
        if after.session <= renewed_gap {
            return Err("the machine stalled past the renewed deadline".into());
        }
        // Both reads fall between the first deadline and the renewed one.
        assert_eq!(
            before.lock.map(|(t, _)| t),
            Some(token),
            "L5 lost the lock at its first deadline"
        );
        let holder = holder.expect("L7 lost the lock at its first deadline");
        assert_eq!(holder.fencing_token, token);
        assert!(holder.remaining_millis > 0 && holder.remaining_millis <= REACQUIRE_TTL);
        return Ok(());
    }
}

/// Tokens strictly increase per key, whichever session takes the lock.
pub async fn tokens_increase_per_key(server: &TestServer) {
    let api = server.api();
    let key = unique_key("tokens");
    let sessions = [
        api.open_session(30_000).await,
        api.open_session(30_000).await,
    ];
    let mut last = 0;
    for round in 0..10 {
        let s = &sessions[round % 2];
        let grant = api.acquire_ok(&key, &s.session_id, 5_000).await;
        assert!(
            grant.fencing_token > last,
            "token went back: {grant:?} after {last}"
        );
        last = grant.fencing_token;
        assert_eq!(api.release(&key, last, None).await.status, 204);
    }
}

/// L2 renews the session and every lock; when heartbeats stop, the session expires and its
/// locks with it.
pub async fn heartbeat_renews_locks_and_expiry_releases_them(server: &TestServer) {
    let api = server.api();
    let key = unique_key("heartbeat");
    let s = api.open_session(600).await;
    let grant = api.acquire_ok(&key, &s.session_id, 600).await;
    // Heartbeat for well over both TTLs; each answer must still list the lock.
    let until = Instant::now() + Duration::from_millis(1_500);
    while Instant::now() < until {
        let hb: HeartbeatResponse = api.heartbeat_ok(&s.session_id).await;
        assert_eq!(
            hb.locks.as_ref().unwrap().len(),
            1,
            "lock lost despite heartbeats: {hb:?}"
        );
        assert_eq!(
            hb.locks.as_ref().unwrap()[0].fencing_token,
            grant.fencing_token
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(api.lock_state(&key).await.holder.is_some());
    // Stop heartbeating: both go away.
    eventually("session expiry releases the lock", || async {
        api.lock_state(&key).await.holder.is_none()
    })
    .await;
    api.heartbeat(&s.session_id)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
    api.release(&key, grant.fencing_token, None)
        .await
        .assert_error(409, "LOCK_LOST");
}

/// A lock whose own TTL runs out is gone even though its session lives; L2 stops listing it
/// and it is not revived.
pub async fn lock_ttl_runs_out_on_its_own(server: &TestServer) {
    let api = server.api();
    let key = unique_key("lock-ttl");
    let s = api.open_session(30_000).await;
    let grant = api.acquire_ok(&key, &s.session_id, 200).await;
    eventually("lock TTL expiry", || async {
        api.lock_state(&key).await.holder.is_none()
    })
    .await;
    let hb = api.heartbeat_ok(&s.session_id).await;
    assert!(
        hb.locks.as_ref().unwrap().iter().all(|l| l.key != key),
        "{hb:?}"
    );
    let other = api.open_session(30_000).await;
    let next = api.acquire_ok(&key, &other.session_id, 5_000).await;
    assert!(next.fencing_token > grant.fencing_token);
}

/// L3 releases every lock of the session at once.
pub async fn closing_a_session_releases_its_locks(server: &TestServer) {
    let api = server.api();
    let keys = [unique_key("close-a"), unique_key("close-b")];
    let s = api.open_session(30_000).await;
    let mut tokens = Vec::new();
    for key in &keys {
        tokens.push(
            api.acquire_ok(key, &s.session_id, 30_000)
                .await
                .fencing_token,
        );
    }
    let status: SessionStatus = api.session_status(&s.session_id).await.parse();
    assert_eq!(status.locks.len(), 2);
    assert_eq!(api.close_session(&s.session_id).await.status, 204);
    for (key, token) in keys.iter().zip(tokens) {
        assert!(api.lock_state(key).await.holder.is_none());
        // Every token dies with its lock.
        api.release(key, token, None)
            .await
            .assert_error(409, "LOCK_LOST");
    }
}

/// `waitMillis`: a waiter is counted in L7's `waiterCount` and is granted when the holder
/// releases.
pub async fn server_side_wait_is_woken_by_release(server: &TestServer) {
    let api = server.api();
    let key = unique_key("wait");
    let holder = api.open_session(30_000).await;
    let waiter = api.open_session(30_000).await;
    let grant = api.acquire_ok(&key, &holder.session_id, 30_000).await;
    let waiting = {
        let (api, key, id) = (api.clone(), key.clone(), waiter.session_id.clone());
        tokio::spawn(async move { api.acquire(&key, &id, Some(5_000), Some(25_000)).await })
    };
    eventually("waiterCount shows the waiter", || async {
        api.lock_state(&key).await.waiter_count == 1
    })
    .await;
    assert_eq!(
        api.release(&key, grant.fencing_token, None).await.status,
        204
    );
    let reply = waiting.await.unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    let won: LockGrant = reply.parse();
    assert_eq!(won.session_id, waiter.session_id);
    assert!(won.fencing_token > grant.fencing_token);
    assert_eq!(api.lock_state(&key).await.waiter_count, 0);
}

/// A waiter is woken by every change of the key's holder: L6, R1 revoke, L3 of the holder's
/// session, and the holder's TTL running out (which writes nothing). Each waiter asks for the
/// longest wait and must be granted well before it ends (a waiter nobody wakes would still be
/// granted, but only when its wait runs out).
pub async fn server_side_wait_is_woken_by_every_change(server: &TestServer) {
    for change in [
        Change::Release,
        Change::Revoke,
        Change::CloseHolder,
        Change::Expiry,
    ] {
        waiter_is_woken_by(&server.api(), change).await;
    }
}

/// What happens to a held key while a request waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Release,
    Revoke,
    CloseHolder,
    /// The holder's short TTL runs out.
    Expiry,
}

async fn waiter_is_woken_by(api: &Api, change: Change) {
    let key = unique_key("wake");
    let holder = api.open_session(60_000).await;
    let waiter = api.open_session(60_000).await;
    let holder_ttl = if change == Change::Expiry {
        1_000
    } else {
        60_000
    };
    let held = api.acquire_ok(&key, &holder.session_id, holder_ttl).await;
    let waiting = {
        let (api, key, id) = (api.clone(), key.clone(), waiter.session_id.clone());
        tokio::spawn(async move {
            let wait = lock_api::limits::WAIT_MILLIS_MAX;
            api.acquire(&key, &id, Some(5_000), Some(wait)).await
        })
    };
    // A 1 s holder may expire before the waiter is counted: then nothing to wait for.
    if change != Change::Expiry {
        eventually("waiterCount shows the waiter", || async {
            api.lock_state(&key).await.waiter_count == 1
        })
        .await;
    }
    match change {
        Change::Release => {
            let reply = api.release(&key, held.fencing_token, None).await;
            assert_eq!(reply.status, 204, "{reply:?}");
        }
        Change::Revoke => assert_eq!(api.revoke(&key, "wake").await.status, 200),
        Change::CloseHolder => assert_eq!(api.close_session(&holder.session_id).await.status, 204),
        Change::Expiry => {}
    }
    let reply = tokio::time::timeout(EVENTUALLY, waiting)
        .await
        .unwrap_or_else(|_| panic!("{change:?} did not wake the waiter"))
        .unwrap();
    assert_eq!(reply.status, 200, "{change:?}: {reply:?}");
    let grant: LockGrant = reply.parse();
    assert_eq!(grant.session_id, waiter.session_id);
    assert!(grant.fencing_token > held.fencing_token);
}

/// `waitMillis` is a bound: with the holder staying, the waiter gets LOCK_CONTENDED.
pub async fn server_side_wait_is_bounded(server: &TestServer) {
    let api = server.api();
    let key = unique_key("wait-bound");
    let holder = api.open_session(30_000).await;
    let waiter = api.open_session(30_000).await;
    api.acquire_ok(&key, &holder.session_id, 30_000).await;
    let reply = api
        .acquire(&key, &waiter.session_id, Some(5_000), Some(300))
        .await;
    reply.assert_error(409, "LOCK_CONTENDED");
}

/// One waiter more than the cap is 429 CONTENTION_EXCEEDED with a retry hint.
pub async fn contention_exceeded_over_the_waiter_cap(server: &TestServer) {
    let api = server.api();
    let key = unique_key("cap");
    let holder = api.open_session(30_000).await;
    let grant = api.acquire_ok(&key, &holder.session_id, 30_000).await;
    let mut waiting = Vec::new();
    for _ in 0..MAX_WAITERS {
        let s = api.open_session(30_000).await;
        let (api, key) = (api.clone(), key.clone());
        waiting.push(tokio::spawn(async move {
            let reply = api
                .acquire(&key, &s.session_id, Some(5_000), Some(25_000))
                .await;
            // Pass the lock on at once, so the next waiter's turn comes.
            if reply.status == 200 {
                let g: LockGrant = reply.parse();
                let _ = api.release(&key, g.fencing_token, None).await;
            }
            reply
        }));
    }
    eventually("all waiters counted", || async {
        api.lock_state(&key).await.waiter_count == MAX_WAITERS
    })
    .await;
    let extra = api.open_session(30_000).await;
    let reply = api
        .acquire(&key, &extra.session_id, Some(5_000), Some(25_000))
        .await;
    let body = reply.assert_error(429, "CONTENTION_EXCEEDED");
    assert_eq!(body.retry_after_millis, Some(100), "{reply:?}");
    assert_eq!(reply.retry_after.as_deref(), Some("1"), "{reply:?}");
    // A non-waiting attempt is never refused by the cap: plain LOCK_CONTENDED.
    api.acquire(&key, &extra.session_id, Some(5_000), Some(0))
        .await
        .assert_error(409, "LOCK_CONTENDED");
    // Let the waiters through: each releases as soon as it is granted.
    assert_eq!(
        api.release(&key, grant.fencing_token, None).await.status,
        204
    );
    let mut tokens = Vec::new();
    for handle in waiting {
        let reply = handle.await.unwrap();
        assert_eq!(
            reply.status, 200,
            "waiter not granted after the release: {reply:?}"
        );
        tokens.push(reply.parse::<LockGrant>().fencing_token);
    }
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(
        tokens.len(),
        MAX_WAITERS as usize,
        "two waiters shared a token"
    );
    assert!(tokens[0] > grant.fencing_token);
}

/// R1: 401 without credentials, 403 with wrong ones, 200 LockOutcome; the revoked holder's
/// token is dead.
pub async fn admin_revoke(server: &TestServer) {
    let api = server.api();
    let key = unique_key("revoke");
    let s = api.open_session(30_000).await;
    let grant = api.acquire_ok(&key, &s.session_id, 30_000).await;
    api.revoke_with_auth(&key, "ops", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    api.revoke_with_auth(&key, "ops", Some("Bearer wrong"))
        .await
        .assert_error(403, "FORBIDDEN");
    api.revoke_with_auth(&key, "ops", Some(ADMIN_TOKEN))
        .await
        .assert_error(403, "FORBIDDEN");
    let reply = api.revoke(&key, &"r".repeat(REASON_MAX_BYTES + 1)).await;
    assert_eq!(reply.body["field"], "reason", "{reply:?}");
    reply.assert_error(400, "VALIDATION_FAILED");
    assert!(
        api.lock_state(&key).await.holder.is_some(),
        "refused revoke changed state"
    );
    let reply = api.revoke(&key, "stuck worker").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.body,
        json!({"key": key, "revokedToken": grant.fencing_token,
               "revokedTokens": [grant.fencing_token], "reason": "stuck worker"})
    );
    assert!(api.lock_state(&key).await.holder.is_none());
    let hb = api.heartbeat_ok(&s.session_id).await;
    assert!(
        hb.locks.as_ref().unwrap().is_empty(),
        "revoked lock still listed: {hb:?}"
    );
    api.release(&key, grant.fencing_token, None)
        .await
        .assert_error(409, "LOCK_LOST");
    // Nothing held: revokedToken null, revokedTokens empty.
    let reply = api.revoke(&key, "again").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["revokedToken"], Value::Null);
    assert_eq!(reply.body["revokedTokens"], json!([]));
    // The next grant's token is higher than the revoked one.
    let next = api.acquire_ok(&key, &s.session_id, 5_000).await;
    assert!(next.fencing_token > grant.fencing_token);
}

/// The demo ledger accepts tokens ≥ the highest seen and answers FENCED_OUT below it.
pub async fn demo_ledger_fences(server: &TestServer) {
    let api = server.api();
    let key = unique_key("ledger");
    let empty = api.ledger_read(&key).await;
    assert!(empty.entries.is_empty());
    assert_eq!(empty.highest_token, None);
    assert_eq!(api.ledger_append(&key, 5, "first").await.status, 204);
    assert_eq!(api.ledger_append(&key, 5, "same token").await.status, 204);
    let body = api
        .ledger_append(&key, 4, "stale")
        .await
        .assert_error(409, "FENCED_OUT");
    assert_eq!(body.highest_token, Some(5));
    assert_eq!(api.ledger_append(&key, 9, "newer").await.status, 204);
    // Entries up to the bound are accepted; one byte more is refused and not stored.
    let longest = "e".repeat(ENTRY_MAX_BYTES);
    assert_eq!(api.ledger_append(&key, 9, &longest).await.status, 204);
    let reply = api
        .ledger_append(&key, 9, &"e".repeat(ENTRY_MAX_BYTES + 1))
        .await;
    assert_eq!(reply.body["field"], "entry", "{reply:?}");
    reply.assert_error(400, "VALIDATION_FAILED");
    let read = api.ledger_read(&key).await;
    assert_eq!(read.highest_token, Some(9));
    let seen: Vec<(u64, &str)> = read
        .entries
        .iter()
        .map(|e| (e.fencing_token, e.entry.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (5, "first"),
            (5, "same token"),
            (9, "newer"),
            (9, longest.as_str())
        ]
    );
}

/// `(fencingToken, entry, stale)` of every entry, from the raw JSON, so a missing `stale`
/// reads as `None`, not as a default.
fn entries_with_stale(body: &Value) -> Vec<(u64, String, Option<bool>)> {
    body["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no entries: {body}"))
        .iter()
        .map(|e| {
            (
                e["fencingToken"].as_u64().unwrap(),
                e["entry"].as_str().unwrap().to_string(),
                e.get("stale")
                    .map(|s| s.as_bool().expect("stale is a boolean")),
            )
        })
        .collect()
}

/// The unfenced demo ledger accepts every valid write, 200 `{stale}`: stale exactly when the
/// token is below the highest it had accepted for the key (the writes the fenced ledger
/// refuses); equal and higher tokens are not stale. Its GET lists each entry with its
/// `stale`; the highest stays the highest.
pub async fn unfenced_ledger_accepts_stale_writes(server: &TestServer) {
    let api = server.api();
    let key = unique_key("unfenced");
    let empty = api.unfenced_read(&key).await;
    assert!(empty.entries.is_empty());
    assert_eq!(empty.highest_token, None);
    for (token, entry, stale) in [
        (5, "first", false),
        (5, "same token", false),
        (4, "stale", true),
        (9, "newer", false),
        (7, "stale again", true),
        (9, "equal to the highest", false),
    ] {
        let reply = api.unfenced_append(&key, token, entry).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.body, json!({ "stale": stale }), "{token} {entry}");
    }
    let reply = api.unfenced_read_reply(&key).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body["key"], key.as_str());
    assert_eq!(reply.body["highestToken"], 9);
    let seen = entries_with_stale(&reply.body);
    let expected: Vec<(u64, String, Option<bool>)> = [
        (5, "first", false),
        (5, "same token", false),
        (4, "stale", true),
        (9, "newer", false),
        (7, "stale again", true),
        (9, "equal to the highest", false),
    ]
    .into_iter()
    .map(|(t, e, s)| (t, e.to_string(), Some(s)))
    .collect();
    assert_eq!(seen, expected);
    // The typed client reads the same.
    let read = api.unfenced_read(&key).await;
    let stale: Vec<Option<bool>> = read.entries.iter().map(|e| e.stale).collect();
    assert_eq!(stale, expected.iter().map(|e| e.2).collect::<Vec<_>>());
}

/// The fenced and the unfenced ledger of one key are separate: writes to one never show in
/// the other, nor move its highest token; the fenced GET has no `stale` field.
pub async fn the_two_ledgers_are_separate(server: &TestServer) {
    let api = server.api();
    let key = unique_key("two-ledgers");
    assert!(!api.unfenced_append_ok(&key, 50, "unfenced high").await);
    // The fenced ledger never saw 50: a lower token is accepted there.
    let fenced = api.ledger_read(&key).await;
    assert_eq!((fenced.highest_token, fenced.entries.len()), (None, 0));
    assert_eq!(api.ledger_append(&key, 10, "fenced low").await.status, 204);
    assert_eq!(
        api.ledger_append(&key, 100, "fenced high").await.status,
        204
    );
    api.ledger_append(&key, 60, "fenced stale")
        .await
        .assert_error(409, "FENCED_OUT");
    // The unfenced ledger never saw 100: 60 is not stale there, 40 is (below its 60).
    assert!(!api.unfenced_append_ok(&key, 60, "unfenced higher").await);
    assert!(api.unfenced_append_ok(&key, 40, "unfenced stale").await);
    let unfenced = api.unfenced_read_reply(&key).await;
    assert_eq!(unfenced.body["highestToken"], 60);
    assert_eq!(
        entries_with_stale(&unfenced.body),
        [
            (50, "unfenced high".to_string(), Some(false)),
            (60, "unfenced higher".into(), Some(false)),
            (40, "unfenced stale".into(), Some(true)),
        ]
    );
    let fenced = api.ledger_read_reply(&key).await;
    assert_eq!(fenced.status, 200, "{fenced:?}");
    assert_eq!(fenced.body["highestToken"], 100);
    assert_eq!(
        entries_with_stale(&fenced.body),
        [
            (10, "fenced low".to_string(), None),
            (100, "fenced high".into(), None),
        ]
    );
}

/// The unfenced ledger validates its body as the fenced one does: an entry over 1024 bytes,
/// a token of 2^53 or more, a missing field, an unknown field or a bad key are 400
/// VALIDATION_FAILED naming the field, and store nothing; the bounds themselves are accepted.
pub async fn unfenced_ledger_validates_like_the_fenced(server: &TestServer) {
    use lock_api::limits::{KEY_MAX_BYTES, MAX_FENCING_TOKEN};
    let api = server.api();
    let key = unique_key("unfenced-checks");
    let longest = "e".repeat(ENTRY_MAX_BYTES);
    assert!(!api.unfenced_append_ok(&key, 3, &longest).await);
    let path = lock_api::paths::unfenced_ledger(&key);
    let too_long_entry = json!({ "fencingToken": 3, "entry": "e".repeat(ENTRY_MAX_BYTES + 1) });
    for (body, field) in [
        (too_long_entry, "entry"),
        (
            json!({ "fencingToken": MAX_FENCING_TOKEN + 1, "entry": "forged" }),
            "fencingToken",
        ),
        (
            json!({ "fencingToken": u64::MAX, "entry": "forged" }),
            "fencingToken",
        ),
        (json!({ "fencingToken": 3 }), "entry"),
        (json!({ "entry": "no token" }), "fencingToken"),
    ] {
        let reply = api.json("POST", &path, &body).await;
        assert_eq!(reply.body["field"], field, "{body}: {reply:?}");
        reply.assert_error(400, "VALIDATION_FAILED");
    }
    api.json(
        "POST",
        &path,
        &json!({ "fencingToken": 3, "entry": "x", "stale": false }),
    )
    .await
    .assert_error(400, "VALIDATION_FAILED");
    api.raw("POST", &path, Some(b"{not json".to_vec()), &[])
        .await
        .assert_error(400, "VALIDATION_FAILED");
    let too_long_key = "k".repeat(KEY_MAX_BYTES + 1);
    for reply in [
        api.unfenced_append(&too_long_key, 1, "e").await,
        api.unfenced_read_reply(&too_long_key).await,
        api.unfenced_append("bad\u{7}key", 1, "e").await,
    ] {
        assert_eq!(reply.body["field"], "key", "{reply:?}");
        reply.assert_error(400, "VALIDATION_FAILED");
    }
    let read = api.unfenced_read(&key).await;
    assert_eq!(read.entries.len(), 1, "a refused write is stored: {read:?}");
    assert_eq!(read.highest_token, Some(3));
    // The largest token that could have been minted is accepted.
    assert!(!api.unfenced_append_ok(&key, MAX_FENCING_TOKEN, "max").await);
    assert!(api.unfenced_append_ok(&key, 3, "below max").await);
}

/// Unknown route → 404 NOT_FOUND, wrong method → 405 METHOD_NOT_ALLOWED, both JSON.
pub async fn error_bodies_for_unknown_routes_and_methods(server: &TestServer) {
    let api = server.api();
    api.raw("GET", "/v1/nope", None, &[])
        .await
        .assert_error(404, "NOT_FOUND");
    for (method, path, allowed) in [
        ("PUT", "/v1/locks/k/acquire", "POST"),
        ("DELETE", "/v1/locks/k", "GET"),
    ] {
        let reply = api.raw(method, path, None, &[]).await;
        reply.assert_error(405, "METHOD_NOT_ALLOWED");
        let allow = reply.allow.as_deref().unwrap_or_default();
        assert!(
            allow.contains(allowed),
            "Allow must name {allowed}: {reply:?}"
        );
    }
}

/// One bad input: method, path, body, expected status, code and (for 400) field.
struct Bad {
    method: &'static str,
    path: String,
    body: Option<Vec<u8>>,
    status: u16,
    code: &'static str,
    field: Option<&'static str>,
}

fn bad(
    method: &'static str,
    path: impl Into<String>,
    body: Option<&str>,
    status: u16,
    code: &'static str,
    field: Option<&'static str>,
) -> Bad {
    Bad {
        method,
        path: path.into(),
        body: body.map(|b| b.as_bytes().to_vec()),
        status,
        code,
        field,
    }
}

/// Bad inputs (C3 Rules: Keys, Bodies, Ranges, Session ids, R1): each gets its contract
/// error (never a 500), and afterwards the session, its lock and the ledger are exactly as
/// before.
pub async fn bad_inputs_get_contract_errors_and_store_stays_intact(server: &TestServer) {
    let api = server.api();
    let key = unique_key("intact");
    let enc = lock_api::limits::encode_key(&key);
    let s = api.open_session(60_000).await;
    let sid = s.session_id.clone();
    let grant = api.acquire_ok(&key, &sid, 60_000).await;
    assert_eq!(
        api.ledger_append(&key, grant.fencing_token, "e")
            .await
            .status,
        204
    );
    let ledger_before = api.ledger_read(&key).await;

    let acquire = format!("/v1/locks/{enc}/acquire");
    let release = format!("/v1/locks/{enc}/release");
    let huge = format!(r#"{{"sessionId":"{}"}}"#, "x".repeat(64 * 1024));
    let long_key = "k".repeat(257);
    let sid_body = |extra: &str| format!(r#"{{"sessionId":"{sid}"{extra}}}"#);
    let mut cases = vec![
        bad(
            "POST",
            &acquire,
            Some("{not json"),
            400,
            "VALIDATION_FAILED",
            Some("body"),
        ),
        bad("POST", &acquire, Some("[]"), 400, "VALIDATION_FAILED", None),
        bad(
            "POST",
            &acquire,
            Some("null"),
            400,
            "VALIDATION_FAILED",
            None,
        ),
        bad(
            "POST",
            &acquire,
            Some(r#"{"ttlMillis":1000}"#),
            400,
            "VALIDATION_FAILED",
            Some("sessionId"),
        ),
        bad(
            "POST",
            &acquire,
            Some(r#"{"sessionId":7}"#),
            400,
            "VALIDATION_FAILED",
            Some("sessionId"),
        ),
        bad(
            "POST",
            &acquire,
            Some(&sid_body(r#","waitMillis":"10""#)),
            400,
            "VALIDATION_FAILED",
            Some("waitMillis"),
        ),
        bad(
            "POST",
            &acquire,
            Some(&sid_body(r#","waitMillis":-1"#)),
            400,
            "VALIDATION_FAILED",
            Some("waitMillis"),
        ),
        bad(
            "POST",
            &acquire,
            Some(&sid_body(r#","waitMillis":30001"#)),
            400,
            "VALIDATION_FAILED",
            Some("waitMillis"),
        ),
        bad(
            "POST",
            &acquire,
            Some(&sid_body(r#","waitMillis":1.5"#)),
            400,
            "VALIDATION_FAILED",
            Some("waitMillis"),
        ),
        bad(
            "POST",
            &acquire,
            Some(&sid_body(r#","ttlMillis":99"#)),
            400,
            "VALIDATION_FAILED",
            Some("ttlMillis"),
        ),
        bad(
            "POST",
            &acquire,
            Some(&sid_body(r#","ttlMillis":300001"#)),
            400,
            "VALIDATION_FAILED",
            Some("ttlMillis"),
        ),
        bad(
            "POST",
            &acquire,
            Some(&sid_body(r#","ttlMillis":18446744073709551616"#)),
            400,
            "VALIDATION_FAILED",
            Some("ttlMillis"),
        ),
        bad(
            "POST",
            &acquire,
            Some(&sid_body(r#","bogus":true"#)),
            400,
            "VALIDATION_FAILED",
            Some("bogus"),
        ),
        bad(
            "POST",
            &acquire,
            Some(&huge),
            413,
            "PAYLOAD_TOO_LARGE",
            None,
        ),
        bad(
            "POST",
            "/v1/locks//acquire",
            Some(&sid_body("")),
            400,
            "VALIDATION_FAILED",
            Some("key"),
        ),
        bad(
            "POST",
            format!("/v1/locks/{long_key}/acquire"),
            Some(&sid_body("")),
            400,
            "VALIDATION_FAILED",
            Some("key"),
        ),
        bad(
            "POST",
            "/v1/locks/a%0Ab/acquire",
            Some(&sid_body("")),
            400,
            "VALIDATION_FAILED",
            Some("key"),
        ),
        bad(
            "POST",
            "/v1/locks/a%00b/acquire",
            Some(&sid_body("")),
            400,
            "VALIDATION_FAILED",
            Some("key"),
        ),
        bad(
            "POST",
            "/v1/locks/a%7Fb/acquire",
            Some(&sid_body("")),
            400,
            "VALIDATION_FAILED",
            Some("key"),
        ),
        bad(
            "POST",
            "/v1/locks/%FF%FE/acquire",
            Some(&sid_body("")),
            400,
            "VALIDATION_FAILED",
            Some("key"),
        ),
        bad(
            "GET",
            format!("/v1/locks/{long_key}"),
            None,
            400,
            "VALIDATION_FAILED",
            Some("key"),
        ),
        bad(
            "POST",
            &acquire,
            Some(r#"{"sessionId":"ffffffffffffffffffffffffffffffff"}"#),
            404,
            "SESSION_NOT_FOUND",
            None,
        ),
        bad(
            "POST",
            &release,
            Some(r#"{"fencingToken":"1"}"#),
            400,
            "VALIDATION_FAILED",
            Some("fencingToken"),
        ),
        bad(
            "POST",
            &release,
            Some("{}"),
            400,
            "VALIDATION_FAILED",
            Some("fencingToken"),
        ),
        bad(
            "POST",
            &release,
            Some(&format!(
                r#"{{"fencingToken":{}}}"#,
                grant.fencing_token + 1000
            )),
            409,
            "LOCK_LOST",
            None,
        ),
        bad(
            "POST",
            "/v1/sessions",
            Some(r#"{"ttlMillis":5}"#),
            400,
            "VALIDATION_FAILED",
            Some("ttlMillis"),
        ),
        bad(
            "POST",
            "/v1/sessions",
            Some(r#"{"ttl":5000}"#),
            400,
            "VALIDATION_FAILED",
            Some("ttl"),
        ),
        bad(
            "POST",
            "/v1/sessions",
            Some(&format!(r#"{{"owner":"{}"}}"#, "o".repeat(129))),
            400,
            "VALIDATION_FAILED",
            Some("owner"),
        ),
        // Without the session-id header (a client still putting the id in the path).
        bad(
            "POST",
            "/v1/sessions/unknown/heartbeat",
            None,
            400,
            "VALIDATION_FAILED",
            Some("Lock-Session-Id"),
        ),
        bad(
            "DELETE",
            "/v1/sessions/unknown",
            None,
            400,
            "VALIDATION_FAILED",
            Some("Lock-Session-Id"),
        ),
        bad(
            "POST",
            format!("/v1/admin/locks/{enc}/revoke"),
            Some(r#"{"reason":"x"}"#),
            401,
            "UNAUTHORIZED",
            None,
        ),
        bad(
            "POST",
            format!("/v1/demo/ledger/{enc}"),
            Some(r#"{"fencingToken":1,"entry":"stale"}"#),
            409,
            "FENCED_OUT",
            None,
        ),
        bad(
            "POST",
            format!("/v1/demo/ledger/{enc}"),
            Some(r#"{"fencingToken":1}"#),
            400,
            "VALIDATION_FAILED",
            Some("entry"),
        ),
    ];
    // The `sid_body` closure borrowed `sid`; cases own their bytes from here on.
    cases.push(bad(
        "POST",
        &acquire,
        Some(""),
        400,
        "VALIDATION_FAILED",
        Some("sessionId"),
    ));
    for case in &cases {
        let reply = api
            .raw(case.method, &case.path, case.body.clone(), &[])
            .await;
        let label = format!(
            "{} {} {:?}",
            case.method,
            case.path.chars().take(80).collect::<String>(),
            case.body
                .as_ref()
                .map(|b| String::from_utf8_lossy(&b[..b.len().min(80)]).to_string())
        );
        assert_eq!(reply.status, case.status, "{label}: {reply:?}");
        assert_eq!(reply.code(), Some(case.code), "{label}: {reply:?}");
        if let Some(field) = case.field {
            assert_eq!(reply.body["field"], field, "{label}: {reply:?}");
            assert!(
                reply.body["message"].as_str().unwrap_or("").contains(field) || field == "body",
                "{label}: message must name the field: {reply:?}"
            );
        }
    }
    // The store is intact: same session, same lock and token, same ledger.
    let status: SessionStatus = api.session_status(&sid).await.parse();
    assert_eq!(status.locks.len(), 1);
    assert_eq!(status.locks[0].fencing_token, grant.fencing_token);
    let holder = api.lock_state(&key).await.holder.expect("still held");
    assert_eq!(holder.fencing_token, grant.fencing_token);
    assert_eq!(api.ledger_read(&key).await, ledger_before);
    assert_eq!(
        api.release(&key, grant.fencing_token, None).await.status,
        204
    );
}

/// Keys are 1–256 bytes of UTF-8, counted in bytes, not characters, on every surface.
pub async fn keys_are_counted_in_bytes(server: &TestServer) {
    let api = server.api();
    let s = api.open_session(30_000).await;
    // Mostly two-byte characters, so the longest key has far fewer than 256 characters.
    let mut longest = unique_key("bytes");
    while longest.len() < lock_api::limits::KEY_MAX_BYTES - 1 {
        longest.push('ü');
    }
    while longest.len() < lock_api::limits::KEY_MAX_BYTES {
        longest.push('x');
    }
    let grant = api.acquire_ok(&longest, &s.session_id, 5_000).await;
    assert_eq!(grant.key, longest, "the key comes back decoded");
    assert_eq!(
        api.lock_state(&longest)
            .await
            .holder
            .map(|h| h.fencing_token),
        Some(grant.fencing_token)
    );
    let too_long = format!("{longest}x");
    assert!(too_long.chars().count() < lock_api::limits::KEY_MAX_BYTES);
    let refused = [
        api.acquire(&too_long, &s.session_id, None, None).await,
        api.raw("GET", &lock_api::paths::lock(&too_long), None, &[])
            .await,
        api.release(&too_long, grant.fencing_token, None).await,
        api.ledger_append(&too_long, 1, "e").await,
    ];
    for reply in refused {
        assert_eq!(reply.body["field"], "key", "{reply:?}");
        reply.assert_error(400, "VALIDATION_FAILED");
    }
    // The empty key, on every surface that takes one.
    for (method, path) in [
        ("POST", "/v1/locks//release"),
        ("GET", "/v1/locks/"),
        ("POST", "/v1/admin/locks//revoke"),
        ("POST", "/v1/demo/ledger/"),
        ("GET", "/v1/demo/ledger/"),
        ("POST", "/v1/demo/unfenced-ledger/"),
        ("GET", "/v1/demo/unfenced-ledger/"),
    ] {
        let reply = api.raw(method, path, Some(b"{}".to_vec()), &[]).await;
        assert_eq!(reply.body["field"], "key", "{method} {path}: {reply:?}");
        reply.assert_error(400, "VALIDATION_FAILED");
    }
}

/// Range ends are inclusive: TTLs 100 and 300000 (locks and sessions), `waitMillis` 30000,
/// an `owner` of 128 bytes; `heartbeatMillis` is a third of the TTL; ids are lowercase hex;
/// one step outside, or a control character in `owner`, is VALIDATION_FAILED naming the field.
pub async fn range_bounds_are_inclusive(server: &TestServer) {
    use lock_api::limits::{OWNER_MAX_BYTES, TTL_MILLIS_MAX, TTL_MILLIS_MIN, WAIT_MILLIS_MAX};
    let api = server.api();
    for ttl in [TTL_MILLIS_MIN, 4_000, TTL_MILLIS_MAX] {
        let reply = api.open_session_with(json!({ "ttlMillis": ttl })).await;
        assert_eq!(reply.status, 201, "{reply:?}");
        let opened: lock_api::SessionOpened = reply.parse();
        assert_eq!((opened.ttl_millis, opened.heartbeat_millis), (ttl, ttl / 3));
        assert!(
            opened.session_id.len() == 32
                && opened
                    .session_id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{opened:?}"
        );
    }
    let reply = api
        .open_session_with(json!({ "owner": "o".repeat(OWNER_MAX_BYTES) }))
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    for (body, field) in [
        (json!({ "ttlMillis": TTL_MILLIS_MIN - 1 }), "ttlMillis"),
        (json!({ "ttlMillis": TTL_MILLIS_MAX + 1 }), "ttlMillis"),
        (json!({ "owner": "a\u{7}b" }), "owner"),
    ] {
        let reply = api.open_session_with(body).await;
        assert_eq!(reply.body["field"], field, "{reply:?}");
        reply.assert_error(400, "VALIDATION_FAILED");
    }
    let s = api.open_session(30_000).await;
    for ttl in [TTL_MILLIS_MIN, TTL_MILLIS_MAX] {
        let key = unique_key("ttl-range");
        let grant = api.acquire_ok(&key, &s.session_id, ttl).await;
        assert_eq!(grant.ttl_millis, ttl);
        assert_eq!(
            api.release(&key, grant.fencing_token, None).await.status,
            204
        );
    }
    let key = unique_key("wait-range");
    let reply = api
        .acquire(&key, &s.session_id, Some(5_000), Some(WAIT_MILLIS_MAX))
        .await;
    assert_eq!(
        reply.status, 200,
        "a free key is granted at once: {reply:?}"
    );
}

/// The body limit is 16 KiB exactly (413 above it, never below), and the content type is not
/// checked: a JSON body is read whatever `content-type` says, or without one.
pub async fn body_limit_is_exact_and_content_type_is_not_checked(server: &TestServer) {
    const LIMIT: usize = 16 * 1024;
    let api = server.api();
    let s = api.open_session(30_000).await;
    let key = unique_key("body-limit");
    let path = lock_api::paths::acquire(&key);
    // A valid acquire padded with insignificant whitespace to `len` bytes.
    let padded = |len: usize| {
        let json = format!(r#""sessionId":"{}"}}"#, s.session_id);
        format!("{{{}{json}", " ".repeat(len - json.len() - 1)).into_bytes()
    };
    assert_eq!(padded(LIMIT).len(), LIMIT);
    let reply = api.raw("POST", &path, Some(padded(LIMIT)), &[]).await;
    assert_eq!(reply.status, 200, "a body of exactly the limit: {reply:?}");
    let reply = api.raw("POST", &path, Some(padded(LIMIT + 1)), &[]).await;
    reply.assert_error(413, "PAYLOAD_TOO_LARGE");
    match reply.version {
        // The unread rest of the body ends the connection; the client must not reuse it.
        reqwest::Version::HTTP_11 => {
            assert_eq!(reply.connection.as_deref(), Some("close"), "{reply:?}")
        }
        // Only the stream ends (reset after the answer); the requests below go over the
        // same connection, which must still serve them.
        reqwest::Version::HTTP_2 => assert_eq!(reply.connection, None, "{reply:?}"),
        other => panic!("unexpected HTTP version {other:?}"),
    }
    let http = api.http().clone();
    let body = json!({ "sessionId": s.session_id }).to_string();
    for content_type in [Some("text/plain"), None] {
        let mut request = http
            .post(format!("{}{path}", api.base()))
            .body(body.clone());
        if let Some(value) = content_type {
            request = request.header("content-type", value);
        }
        let response = request.send().await.expect("answer");
        assert_eq!(
            response.status().as_u16(),
            200,
            "content type {content_type:?}"
        );
    }
}

/// A request head over 64 KiB is answered 431 and the connection closed; the server lives on.
pub async fn request_heads_over_64_kib_are_refused(server: &TestServer) {
    let addr = server.addr().to_owned();
    let mut stream = server.connect_raw(ALPN_HTTP1).expect("connect");
    let answer = tokio::task::spawn_blocking(move || {
        stream
            .set_read_timeout(Some(EVENTUALLY))
            .expect("read timeout");
        let filler = "a".repeat(65 * 1024);
        let head = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nX-Big: {filler}\r\n\r\n");
        // The server may close before it read everything; what it answered is still there.
        let _ = stream.write_all(head.as_bytes());
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 431"), "answer: {answer:.200}");
    assert_eq!(
        server.api().raw("GET", "/healthz", None, &[]).await.status,
        200
    );
}

/// `/healthz`, `/readyz` (a healthy store is ready), `/metrics` (no per-key labels, the
/// store gauges), and the `lock_granted` / `contention` lines.
pub async fn observability_surfaces(server: &TestServer) {
    let api = server.api();
    let reply = api.raw("GET", "/healthz", None, &[]).await;
    assert_eq!(reply.status, 200);
    let ready = api.raw("GET", "/readyz", None, &[]).await;
    assert_eq!(ready.status, 200, "{}", ready.text);
    assert_eq!(ready.body, json!({"status": "ready"}));
    let metrics = api.metrics().await;
    for line in ["lock_store_ready 1", "lock_store_counts_stale 0"] {
        assert!(metrics.lines().any(|l| l == line), "{line} missing");
    }
    let key = unique_key("observe");
    let a = api.open_session(30_000).await;
    let b = api.open_session(30_000).await;
    let grant = api.acquire_ok(&key, &a.session_id, 30_000).await;
    api.acquire(&key, &b.session_id, None, None)
        .await
        .assert_error(409, "LOCK_CONTENDED");
    api.release(&key, grant.fencing_token + 1, Some(&a.session_id))
        .await
        .assert_error(409, "LOCK_LOST");
    let metrics = api.metrics().await;
    for needle in [
        "lock_acquire_duration_seconds_bucket{le=\"+Inf\"}",
        "lock_acquire_duration_seconds_count",
        "lock_acquire_total{outcome=\"granted\"}",
        "lock_acquire_total{outcome=\"contended\"}",
        "lock_requests_refused_total{outcome=\"unauthorized\"}",
        "lock_requests_refused_total{outcome=\"forbidden\"}",
        "lock_sessions ",
        "lock_locks ",
        "lock_holds{mode=\"exclusive\"} ",
        "lock_holds{mode=\"shared\"} ",
        "lock_watchers ",
        "lock_watched_keys ",
        "lock_watch_events_total ",
        "lock_watch_resets_total{reason=\"slow_consumer\"} ",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        if let Some(labels) = line.split('{').nth(1) {
            let names: Vec<&str> = labels
                .trim_end_matches(|c| c != '}')
                .trim_end_matches('}')
                .split(',')
                .map(|l| l.split('=').next().unwrap_or(""))
                .collect();
            // `mode` (a closed set of two) is the hold gauge's only label, `reason` (a closed
            // set of three) the watch resets', `route` and `reason` (closed sets of twelve
            // and seven) the store errors'.
            let allowed: &[&str] = if line.starts_with("lock_holds{") {
                &["mode"]
            } else if line.starts_with("lock_watch_resets_total{") {
                &["reason"]
            } else if line.starts_with("lock_store_errors_total{") {
                &["route", "reason"]
            } else {
                &["outcome", "le"]
            };
            assert!(
                names.iter().all(|n| allowed.contains(n)),
                "label beyond the budget: {line}"
            );
        }
        assert!(!line.contains("contract/"), "per-key label: {line}");
        assert!(
            !line.contains(&a.session_id),
            "session id in a metric: {line}"
        );
    }
    let token = grant.fencing_token;
    let token_value = json!(token);
    let granted = find_log(server, "lock_granted", |v| v["fencingToken"] == token_value).await;
    assert_eq!(granted["key"], key.as_str());
    assert_eq!(granted["holderId"], a.holder_id.as_str());
    let released = find_log(server, "lock_released", |v| v["key"] == key.as_str()).await;
    assert_eq!(released["holderId"], a.holder_id.as_str());
    // C4: no log line carries a session id (the id is a credential; holderId names it).
    for line in server.logs() {
        assert!(
            !line.contains(&a.session_id) && !line.contains(&b.session_id),
            "session id in a log line: {line}"
        );
    }
    assert!(granted["attempts"].as_u64().is_some());
    assert!(granted["waitedMillis"].as_u64().is_some());
    let contention = find_log(server, "contention", |v| v["key"] == key.as_str()).await;
    assert!(contention["attempt"].as_u64().is_some());
    assert!(contention["delayMillis"].as_u64().is_some());
}

async fn find_log(server: &TestServer, event: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        for line in server.logs() {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if v["event"] == event && pred(&v) {
                    return v;
                }
            }
        }
        assert!(Instant::now() < deadline, "no {event} log line found");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every path and method in `/openapi.json` is routed (not 404 NOT_FOUND / 405), and every
/// contract surface is described.
pub async fn openapi_matches_routes(server: &TestServer) {
    let api = server.api();
    let doc = api.raw("GET", "/openapi.json", None, &[]).await.body;
    assert_eq!(doc["openapi"], "3.0.3");
    let paths = doc["paths"].as_object().expect("paths");
    let mut described = Vec::new();
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            described.push((method.to_uppercase(), path.clone()));
            let concrete = path.replace("{key}", "k").replace("{holderId}", "unknown");
            // JSON asked for: L8 answers a long poll then, not an endless event stream.
            let accept = [("accept", "application/json")];
            let reply = api
                .raw(
                    &method.to_uppercase(),
                    &concrete,
                    Some(b"{}".to_vec()),
                    &accept,
                )
                .await;
            assert!(
                !matches!(reply.code(), Some("NOT_FOUND") | Some("METHOD_NOT_ALLOWED")),
                "{method} {path} is described but not routed: {reply:?}"
            );
        }
    }
    for surface in [
        ("POST", "/v1/sessions"),
        ("POST", "/v1/sessions/{holderId}/heartbeat"),
        ("DELETE", "/v1/sessions/{holderId}"),
        ("GET", "/v1/sessions/{holderId}"),
        ("POST", "/v1/locks/{key}/acquire"),
        ("POST", "/v1/locks/{key}/release"),
        ("GET", "/v1/locks/{key}"),
        ("GET", "/v1/locks/{key}/events"),
        ("POST", "/v1/locks/{key}/value"),
        ("POST", "/v1/admin/locks/{key}/revoke"),
        ("POST", "/v1/demo/ledger/{key}"),
        ("GET", "/v1/demo/ledger/{key}"),
        ("POST", "/v1/demo/unfenced-ledger/{key}"),
        ("GET", "/v1/demo/unfenced-ledger/{key}"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
    ] {
        assert!(
            described.contains(&(surface.0.to_string(), surface.1.to_string())),
            "{surface:?} not described"
        );
    }
    assert_eq!(described.len(), 18, "undescribed extras: {described:?}");
}

/// CORS answers only the configured origin.
pub async fn cors_only_for_configured_origins(server: &TestServer) {
    let api: Api = server.api();
    let preflight = |origin: &'static str| {
        let api = api.clone();
        async move {
            api.http()
                .request(
                    reqwest::Method::OPTIONS,
                    format!("{}/v1/sessions", api.base()),
                )
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header("access-control-request-headers", "content-type")
                .send()
                .await
                .unwrap()
        }
    };
    let allowed = preflight(CORS_ORIGIN).await;
    let header = |name: &str| {
        allowed
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    assert_eq!(header("access-control-allow-origin"), CORS_ORIGIN);
    for method in ["get", "post", "delete"] {
        assert!(header("access-control-allow-methods").contains(method));
    }
    for name in ["content-type", "authorization", "traceparent"] {
        assert!(header("access-control-allow-headers").contains(name));
    }
    let other = preflight("http://evil.example").await;
    assert!(other.headers().get("access-control-allow-origin").is_none());
}

/// Both demo ledgers keep their entries across a restart of the server on the same store,
/// the unfenced one each entry's `stale` and its highest token too.
pub async fn demo_ledgers_survive_a_restart(server: &mut TestServer) {
    let api = server.api();
    let key = unique_key("ledgers-restart");
    assert_eq!(api.ledger_append(&key, 7, "fenced").await.status, 204);
    assert!(!api.unfenced_append_ok(&key, 7, "high").await);
    assert!(api.unfenced_append_ok(&key, 3, "stale").await);
    let before = (api.ledger_read(&key).await, api.unfenced_read(&key).await);
    assert_eq!(before.1.entries.len(), 2);
    tokio::task::block_in_place(|| server.restart());
    let api = server.api();
    let after = (api.ledger_read(&key).await, api.unfenced_read(&key).await);
    assert_eq!(after, before);
    assert!(api.unfenced_append_ok(&key, 5, "stale after").await);
    api.ledger_append(&key, 5, "fenced after")
        .await
        .assert_error(409, "FENCED_OUT");
}

/// A graceful shutdown (SIGTERM) ends requests waiting server-side at once with 503
/// NOT_LEADER and a retry hint, instead of holding the shutdown up for their whole wait; the
/// process then exits cleanly. Run last: it stops the server.
pub async fn shutdown_ends_waiters_with_not_leader(server: &mut TestServer) {
    let api = server.api();
    let key = unique_key("shutdown");
    let holder = api.open_session(60_000).await;
    let waiter = api.open_session(60_000).await;
    api.acquire_ok(&key, &holder.session_id, 60_000).await;
    let waiting = {
        let (api, key, id) = (api.clone(), key.clone(), waiter.session_id.clone());
        tokio::spawn(async move {
            let wait = lock_api::limits::WAIT_MILLIS_MAX;
            api.acquire(&key, &id, Some(5_000), Some(wait)).await
        })
    };
    eventually("waiterCount shows the waiter", || async {
        api.lock_state(&key).await.waiter_count == 1
    })
    .await;
    let clean = tokio::task::block_in_place(|| server.terminate());
    let reply = tokio::time::timeout(EVENTUALLY, waiting)
        .await
        .expect("the waiter is answered at shutdown, not after its wait")
        .unwrap();
    reply.assert_not_leader();
    assert!(
        clean,
        "graceful shutdown failed:\n{}",
        server.logs().join("\n")
    );
}

/// Header read timeout of the [`unconfigured_options`] server (short, so the check is quick).
const HEADER_READ_TIMEOUT_MS: u64 = 500;

/// A server with nothing optional configured: no admin token, no CORS origin, server-side
/// waiting disabled (`--max-waiters-per-key 0`), and a short request-head timeout.
pub fn unconfigured_options() -> ServerOptions {
    ServerOptions::new().args([
        "--max-waiters-per-key".to_string(),
        "0".to_string(),
        "--header-read-timeout-ms".to_string(),
        HEADER_READ_TIMEOUT_MS.to_string(),
        "--demo-ledger".to_string(),
        "false".to_string(),
    ])
}

/// The rules whose other side needs another configuration, against a server started with
/// [`unconfigured_options`] (plus backend flags).
pub async fn run_unconfigured(server: &TestServer) {
    admin_surface_is_disabled_without_a_token(server).await;
    zero_waiter_cap_disables_server_side_waiting(server).await;
    no_cors_without_configured_origins(server).await;
    unfinished_request_heads_are_cut_off(server).await;
    the_demo_ledger_can_be_switched_off(server).await;
}

/// `--demo-ledger false`: every path of both demo ledgers (the fenced and the unfenced one)
/// answers 404 NOT_FOUND saying it is switched off, and stores nothing; the locks work as
/// ever.
pub async fn the_demo_ledger_can_be_switched_off(server: &TestServer) {
    let api = unpooled(server);
    let key = unique_key("ledger-off");
    let s = api.open_session(30_000).await;
    let grant = api.acquire_ok(&key, &s.session_id, 30_000).await;
    for appended in [
        api.ledger_append(&key, grant.fencing_token, "x").await,
        api.unfenced_append(&key, grant.fencing_token, "x").await,
    ] {
        appended.assert_error(404, "NOT_FOUND");
        assert!(appended.text.contains("switched off"), "{appended:?}");
    }
    for read in [
        api.ledger_read_reply(&key).await,
        api.ledger_read_reply("").await,
        api.unfenced_read_reply(&key).await,
        api.unfenced_read_reply("").await,
    ] {
        read.assert_error(404, "NOT_FOUND");
        assert!(read.text.contains("switched off"), "{read:?}");
    }
    let released = api
        .release(&key, grant.fencing_token, Some(&s.session_id))
        .await;
    assert_eq!(released.status, 204, "{released:?}");
}

/// No admin token configured: R1 answers 403 to every call, whatever it carries, and revokes
/// nothing.
pub async fn admin_surface_is_disabled_without_a_token(server: &TestServer) {
    let api = unpooled(server);
    let key = unique_key("no-admin");
    let s = api.open_session(30_000).await;
    let grant = api.acquire_ok(&key, &s.session_id, 30_000).await;
    for auth in [
        None,
        Some("Bearer anything"),
        Some("Bearer "),
        Some("Basic x"),
    ] {
        api.revoke_with_auth(&key, "r", auth)
            .await
            .assert_error(403, "FORBIDDEN");
    }
    let holder = api.lock_state(&key).await.holder.expect("still held");
    assert_eq!(holder.fencing_token, grant.fencing_token);
}

/// Cap 0: an L4 that would wait is refused at once with 429; one that need not wait (free key,
/// or `waitMillis` 0) is answered as usual.
pub async fn zero_waiter_cap_disables_server_side_waiting(server: &TestServer) {
    let api = unpooled(server);
    let key = unique_key("cap-zero");
    let a = api.open_session(30_000).await;
    let b = api.open_session(30_000).await;
    let reply = api
        .acquire(&key, &a.session_id, Some(30_000), Some(5_000))
        .await;
    assert_eq!(reply.status, 200, "a free key needs no wait: {reply:?}");
    let reply = api
        .acquire(&key, &b.session_id, Some(30_000), Some(5_000))
        .await;
    let body = reply.assert_error(429, "CONTENTION_EXCEEDED");
    assert_eq!(body.retry_after_millis, Some(100), "{reply:?}");
    api.acquire(&key, &b.session_id, Some(30_000), Some(0))
        .await
        .assert_error(409, "LOCK_CONTENDED");
    assert_eq!(api.lock_state(&key).await.waiter_count, 0);
}

/// Without `--cors-origin` no origin gets CORS headers.
pub async fn no_cors_without_configured_origins(server: &TestServer) {
    let response = server
        .http(0)
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/sessions", server.base_url()),
        )
        .header("origin", CORS_ORIGIN)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("answer");
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
}

/// A connection must deliver a whole request head within the header read timeout, also when
/// it trickles bytes to look alive, and also when idle after a request (keep-alive): else the
/// server closes it. The bound below is generous, not a timing claim: without the guard the
/// connection would stay open for ever.
pub async fn unfinished_request_heads_are_cut_off(server: &TestServer) {
    let addr = server.addr().to_owned();
    let mut trickling = server.connect_raw(ALPN_HTTP1).expect("connect");
    let mut idle = server.connect_raw(ALPN_HTTP1).expect("connect");
    let (trickled, idle) = tokio::task::spawn_blocking(move || {
        let _ = write!(
            trickling,
            "POST /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nX-Slow: "
        );
        let trickled = closed_within(&mut trickling, EVENTUALLY, true);
        let _ = write!(idle, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let idle = closed_within(&mut idle, EVENTUALLY, false);
        (trickled, idle)
    })
    .await
    .unwrap();
    assert!(
        trickled,
        "a trickled, never-finished head kept its connection"
    );
    assert!(
        idle,
        "an idle keep-alive connection was kept past the timeout"
    );
    assert_eq!(
        unpooled(server)
            .raw("GET", "/healthz", None, &[])
            .await
            .status,
        200
    );
}

/// Whether the server closes `stream` within `bound`, reading (and discarding) what it sends;
/// with `trickle`, a header byte is sent every 100 ms as a slow-loris client does.
pub fn closed_within(stream: &mut RawConn, bound: Duration, trickle: bool) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("read timeout");
    let deadline = Instant::now() + bound;
    let mut buf = [0u8; 1024];
    while Instant::now() < deadline {
        if trickle && stream.write_all(b"a").is_err() {
            return true;
        }
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// A client for the unconfigured server: its short header timeout closes idle connections,
/// which a pooled client could pick just as they close.
fn unpooled(server: &TestServer) -> Api {
    server.api_with(server.http(0))
}
