//! What a fencing token proves for each mode of hold (docs/fencing.md, "Shared holds"),
//! against a real server and its demo fenced resource (the ledger: it accepts a write iff
//! its token is ≥ the highest it has seen for that resource key).
//!
//! - Read-write lock: a write with a writer's token fences out every writer before it;
//!   readers never write.
//! - Semaphore: N holders are legitimately live at once, so their tokens cannot make one
//!   shared resource exclusive — the check below shows the second holder's write fencing
//!   out the first, who still holds its permit. The recipes that do work: a resource per
//!   holder (keyed by the hold), or one exclusive lock per permit slot, whose token fences
//!   that slot's resource.

use lock_api::{LockGrant, LockState};
use lock_e2e::client::Api;
use lock_e2e::contract::unique_key;
use lock_e2e::{ServerOptions, TestServer};
use serde_json::{json, Value};

/// A lock TTL well past the test's length: no hold here ends on its own.
const TTL: u64 = 60_000;

async fn acquire(api: &Api, key: &str, session: &str, extra: Value) -> LockGrant {
    let mut body = json!({ "sessionId": session, "ttlMillis": TTL });
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let reply = api
        .json("POST", &lock_api::paths::acquire(key), &body)
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.parse()
}

async fn session(api: &Api) -> String {
    api.open_session(TTL).await.session_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writers_token_fences_out_every_superseded_writer() {
    let server = TestServer::start(ServerOptions::new());
    let api = server.api();
    let (key, resource) = (unique_key("rw"), unique_key("rw-data"));
    let (w1, reader, w2) = (
        session(&api).await,
        session(&api).await,
        session(&api).await,
    );

    let first = acquire(&api, &key, &w1, json!({})).await;
    assert_eq!(
        api.ledger_append(&resource, first.fencing_token, "w1")
            .await
            .status,
        204
    );
    api.release(&key, first.fencing_token, None).await;

    // A reader holds in between: its token is the key's too, and it writes nothing.
    let read = acquire(&api, &key, &reader, json!({ "mode": "shared" })).await;
    assert!(read.fencing_token > first.fencing_token);
    api.release(&key, read.fencing_token, None).await;

    let second = acquire(&api, &key, &w2, json!({})).await;
    assert!(second.fencing_token > read.fencing_token);
    assert_eq!(
        api.ledger_append(&resource, second.fencing_token, "w2")
            .await
            .status,
        204
    );
    // The first writer, paused past its lease, is refused.
    api.ledger_append(&resource, first.fencing_token, "w1 late")
        .await
        .assert_error(409, "FENCED_OUT");
    let entries = api.ledger_read(&resource).await.entries;
    assert_eq!(
        entries.iter().map(|e| e.entry.as_str()).collect::<Vec<_>>(),
        ["w1", "w2"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_tokens_do_not_make_a_shared_resource_exclusive() {
    let server = TestServer::start(ServerOptions::new());
    let api = server.api();
    let (key, shared_resource) = (unique_key("sem"), unique_key("sem-data"));
    let semaphore = json!({ "mode": "shared", "limit": 2 });
    let a = acquire(&api, &key, &session(&api).await, semaphore.clone()).await;
    let b = acquire(&api, &key, &session(&api).await, semaphore).await;
    let state: LockState = api.lock_state(&key).await;
    assert_eq!(state.holders.len(), 2, "{state:?}");

    // Both hold a permit, yet one shared resource fenced by their tokens refuses the lower:
    // the wrong recipe.
    assert_eq!(
        api.ledger_append(&shared_resource, b.fencing_token, "b")
            .await
            .status,
        204
    );
    api.ledger_append(&shared_resource, a.fencing_token, "a")
        .await
        .assert_error(409, "FENCED_OUT");

    // A resource per hold: each holder writes under its own grant, and both land.
    for grant in [&a, &b] {
        let own = format!("{shared_resource}/{}", grant.fencing_token);
        assert_eq!(
            api.ledger_append(&own, grant.fencing_token, "mine")
                .await
                .status,
            204
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_slot_lock_fences_its_slots_resource() {
    let server = TestServer::start(ServerOptions::new().admin_token("fencing-admin"));
    let api = server.api();
    let slots: Vec<String> = (0..2).map(|i| unique_key(&format!("slot-{i}"))).collect();

    // Three workers take the first free slot each: two get one, the third finds none.
    let mut held = Vec::new();
    for _ in 0..3 {
        let id = session(&api).await;
        let mut got = None;
        for slot in &slots {
            let reply = api.acquire(slot, &id, Some(TTL), None).await;
            if reply.status == 200 {
                got = Some((slot.clone(), reply.parse::<LockGrant>()));
                break;
            }
            reply.assert_error(409, "LOCK_CONTENDED");
        }
        held.push(got);
    }
    assert!(held[0].is_some() && held[1].is_some() && held[2].is_none());
    let (slot, stale) = held[0].clone().unwrap();
    let resource = format!("{slot}/data");
    assert_eq!(
        api.ledger_append(&resource, stale.fencing_token, "first")
            .await
            .status,
        204
    );

    // The slot's holder is revoked (as if its lease ran out while it was paused); the next
    // worker takes the slot, and the paused one's late write to the slot's resource is refused.
    assert_eq!(api.revoke(&slot, "paused holder").await.status, 200);
    let next = api.acquire_ok(&slot, &session(&api).await, TTL).await;
    assert_eq!(
        api.ledger_append(&resource, next.fencing_token, "next")
            .await
            .status,
        204
    );
    api.ledger_append(&resource, stale.fencing_token, "late")
        .await
        .assert_error(409, "FENCED_OUT");
}
