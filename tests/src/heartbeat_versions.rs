//! L2's versions (C3, L2): the heartbeat answers every lock without `since`, nothing when
//! `since` is the session's current version, and otherwise what changed (or every lock) —
//! never "unchanged" for a view the holds moved away from. As functions over a running
//! [`TestServer`], so both backends run the same checks (`server_contract.rs`,
//! `etcd_contract.rs`).
//!
//! Every check applies each answer to the client's view the way the SDK does and compares
//! the result with L5's list of the session's locks: the view must be exact after each one.

use lock_api::{ChangeKind, HeartbeatResponse, SessionStatus};
use serde_json::{json, Value};
use std::collections::BTreeMap;

use crate::client::{Api, Reply};
use crate::contract::{eventually, unique_key};
use crate::TestServer;

/// A client's view of the session's holds: key → token, and the version it is exact at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    pub version: Option<String>,
    pub holds: BTreeMap<String, u64>,
}

/// The shape of an L2 answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Full,
    Delta,
    Unchanged,
}

impl View {
    /// Applies `answer` as the SDK does; returns its shape.
    pub fn apply(&mut self, answer: &HeartbeatResponse) -> Shape {
        let shape = shape_of(answer);
        match (&answer.locks, &answer.changes) {
            (Some(locks), _) => {
                self.holds = locks
                    .iter()
                    .map(|l| (l.key.clone(), l.fencing_token))
                    .collect();
            }
            (None, Some(changes)) => {
                for change in changes {
                    match change.change {
                        ChangeKind::Granted => {
                            self.holds.insert(change.key.clone(), change.fencing_token);
                        }
                        ChangeKind::Gone => {
                            self.holds.remove(&change.key);
                        }
                    }
                }
            }
            (None, None) => {}
        }
        self.version = answer.version.clone();
        shape
    }
}

fn shape_of(answer: &HeartbeatResponse) -> Shape {
    match (&answer.locks, &answer.changes) {
        (Some(_), None) => Shape::Full,
        (None, Some(_)) => Shape::Delta,
        (None, None) => Shape::Unchanged,
        (Some(_), Some(_)) => panic!("an answer with both a list and changes: {answer:?}"),
    }
}

/// L2 with `body` (raw bytes), as the contract allows any client to send it.
pub async fn heartbeat_with(api: &Api, session_id: &str, body: Option<Value>) -> Reply {
    let body = body.map(|b| b.to_string().into_bytes());
    api.session_call("POST", session_id, body).await
}

/// L2 with `since` = the view's version; the answer, checked to be 200.
pub async fn beat(api: &Api, session_id: &str, view: &View) -> HeartbeatResponse {
    let body = view.version.as_ref().map(|v| json!({ "since": v }));
    let reply = heartbeat_with(api, session_id, body).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.parse()
}

/// The session's locks as L5 lists them.
async fn l5(api: &Api, session_id: &str) -> BTreeMap<String, u64> {
    let reply = api.session_status(session_id).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let status: SessionStatus = reply.parse();
    status
        .locks
        .into_iter()
        .map(|l| (l.key, l.fencing_token))
        .collect()
}

/// One L2 with the view's version, applied, and checked exact against L5; its shape.
async fn step(api: &Api, session_id: &str, view: &mut View, what: &str) -> Shape {
    let answer = beat(api, session_id, view).await;
    assert!(answer.version.is_some(), "{what}: no version: {answer:?}");
    let before = view.clone();
    let shape = view.apply(&answer);
    assert_eq!(
        view.holds,
        l5(api, session_id).await,
        "{what}: the view after {answer:?} applied to {before:?} is not the session's holds"
    );
    shape
}

/// Runs every check but the restart.
pub async fn run_all(server: &TestServer) {
    without_since_every_lock_is_listed(server).await;
    the_current_version_gets_no_list(server).await;
    every_change_moves_the_version(server).await;
    unusable_versions_get_the_full_list_or_400(server).await;
}

/// No body, an empty body, `{}`, and unknown fields: the full list, as before versions.
pub async fn without_since_every_lock_is_listed(server: &TestServer) {
    let api = server.api();
    let s = api.open_session(60_000).await;
    let (a, b) = (unique_key("beat-a"), unique_key("beat-b"));
    let ga = api.acquire_ok(&a, &s.session_id, 60_000).await;
    let gb = api.acquire_ok(&b, &s.session_id, 60_000).await;
    let expected = BTreeMap::from([(a, ga.fencing_token), (b, gb.fencing_token)]);
    for body in [None, Some(json!({})), Some(json!({ "other": 1 }))] {
        let reply = heartbeat_with(&api, &s.session_id, body.clone()).await;
        assert_eq!(reply.status, 200, "{body:?}: {reply:?}");
        let mut view = View::default();
        assert_eq!(view.apply(&reply.parse()), Shape::Full, "{body:?}");
        assert_eq!(view.holds, expected, "{body:?}");
        assert!(view.version.is_some(), "{body:?}: {reply:?}");
    }
    let empty = api
        .session_call("POST", &s.session_id, Some(Vec::new()))
        .await;
    assert_eq!(empty.status, 200, "{empty:?}");
}

/// `since` = the current version: 200 with the TTL and the version, and no list at all.
pub async fn the_current_version_gets_no_list(server: &TestServer) {
    let api = server.api();
    let s = api.open_session(60_000).await;
    let key = unique_key("beat-same");
    api.acquire_ok(&key, &s.session_id, 60_000).await;
    let mut view = View::default();
    assert_eq!(
        step(&api, &s.session_id, &mut view, "first").await,
        Shape::Full
    );
    for round in 0..3 {
        let body = json!({ "since": view.version.clone().unwrap() });
        let reply = heartbeat_with(&api, &s.session_id, Some(body)).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        let fields: Vec<&String> = reply.body.as_object().unwrap().keys().collect();
        assert_eq!(
            fields,
            ["ttlMillis", "version"],
            "round {round}: {}",
            reply.text
        );
        assert_eq!(reply.body["version"].as_str(), view.version.as_deref());
    }
    // A session without any lock has a version too, and it stays.
    let idle = api.open_session(60_000).await;
    let mut view = View::default();
    step(&api, &idle.session_id, &mut view, "idle").await;
    let again = step(&api, &idle.session_id, &mut view, "idle again").await;
    assert_eq!(again, Shape::Unchanged);
}

/// A grant (fresh, and from the queue), a release, an admin revoke and an expiry each move
/// the version: the next L2 is a delta or the full list, and the view is exact after it.
pub async fn every_change_moves_the_version(server: &TestServer) {
    let api = server.api();
    let s = api.open_session(60_000).await;
    let id = s.session_id.as_str();
    let mut view = View::default();
    step(&api, id, &mut view, "start").await;
    let moved = |shape: Shape, what: &str| {
        assert_ne!(shape, Shape::Unchanged, "{what}: the version did not move");
    };

    let kept = unique_key("beat-kept");
    api.acquire_ok(&kept, id, 60_000).await;
    moved(step(&api, id, &mut view, "grant").await, "grant");
    assert_eq!(
        step(&api, id, &mut view, "after grant").await,
        Shape::Unchanged
    );

    let released = unique_key("beat-released");
    let grant = api.acquire_ok(&released, id, 60_000).await;
    step(&api, id, &mut view, "second grant").await;
    assert_eq!(
        api.release(&released, grant.fencing_token, None)
            .await
            .status,
        204
    );
    moved(step(&api, id, &mut view, "release").await, "release");

    let revoked = unique_key("beat-revoked");
    api.acquire_ok(&revoked, id, 60_000).await;
    step(&api, id, &mut view, "third grant").await;
    assert_eq!(api.revoke(&revoked, "contract").await.status, 200);
    moved(step(&api, id, &mut view, "revoke").await, "revoke");
    assert!(!view.holds.contains_key(&revoked));

    // The lock's own TTL runs out while the session lives (no L2 in between renews it).
    let expiring = unique_key("beat-expiring");
    api.acquire_ok(&expiring, id, 300).await;
    step(&api, id, &mut view, "short grant").await;
    assert!(view.holds.contains_key(&expiring));
    eventually("the short lock expires", || async {
        api.lock_state(&expiring).await.holders.is_empty()
    })
    .await;
    moved(step(&api, id, &mut view, "expiry").await, "expiry");
    assert!(!view.holds.contains_key(&expiring));

    // A hand-off from the key's queue to this session, which another session released.
    let queued = unique_key("beat-queued");
    let other = api.open_session(60_000).await;
    let held = api.acquire_ok(&queued, &other.session_id, 60_000).await;
    let waiting = {
        let (api, key, id) = (api.clone(), queued.clone(), id.to_owned());
        tokio::spawn(async move { api.acquire(&key, &id, Some(60_000), Some(10_000)).await })
    };
    eventually("the waiter queues", || async {
        api.lock_state(&queued).await.waiter_count == 1
    })
    .await;
    let release = api.release(&queued, held.fencing_token, Some(&other.session_id));
    assert_eq!(release.await.status, 204);
    assert_eq!(waiting.await.unwrap().status, 200);
    moved(step(&api, id, &mut view, "hand-off").await, "hand-off");
    assert!(view.holds.contains_key(&queued) && view.holds.contains_key(&kept));
}

/// `since` of no use to the server — garbage, another session's version, one of a version
/// format it does not mint — gets the full list; a `since` of the wrong type, too long, or a
/// body that is no JSON object is 400 VALIDATION_FAILED naming the field. Never a 500.
pub async fn unusable_versions_get_the_full_list_or_400(server: &TestServer) {
    let api = server.api();
    let s = api.open_session(60_000).await;
    let key = unique_key("beat-garbage");
    let grant = api.acquire_ok(&key, &s.session_id, 60_000).await;
    let other = api.open_session(60_000).await;
    api.acquire_ok(&unique_key("beat-other"), &other.session_id, 60_000)
        .await;
    let mut theirs = View::default();
    step(&api, &other.session_id, &mut theirs, "other").await;
    let long_ok = "9".repeat(lock_api::session::SINCE_MAX_BYTES);
    let garbage = [
        "",
        ".",
        "x",
        "1",
        "1.2",
        "0000000000000000.0",
        "ffffffffffffffff.99999999999999999999999",
        "d.00",
        "d.00000000000000000000000000000000",
        long_ok.as_str(),
        theirs.version.as_deref().unwrap(),
    ];
    for since in garbage {
        let reply = heartbeat_with(&api, &s.session_id, Some(json!({ "since": since }))).await;
        assert_eq!(reply.status, 200, "since {since:?}: {reply:?}");
        let mut view = View::default();
        let shape = view.apply(&reply.parse());
        assert_eq!(shape, Shape::Full, "since {since:?}: {}", reply.text);
        assert_eq!(
            view.holds,
            BTreeMap::from([(key.clone(), grant.fencing_token)])
        );
    }
    let too_long = "9".repeat(lock_api::session::SINCE_MAX_BYTES + 1);
    for body in [
        json!({ "since": 5 }),
        json!({ "since": too_long }),
        json!([1]),
    ] {
        let reply = heartbeat_with(&api, &s.session_id, Some(body.clone())).await;
        let error = reply.assert_error(400, "VALIDATION_FAILED");
        assert!(error.field.is_some(), "{body}: {reply:?}");
    }
    let not_json = api
        .session_call("POST", &s.session_id, Some(b"{since".to_vec()))
        .await;
    not_json.assert_error(400, "VALIDATION_FAILED");
    // An unknown session is still 404 whatever the body.
    let body = Some(json!({ "since": "x" }));
    heartbeat_with(&api, &"0".repeat(32), body)
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
}

/// A version from before a restart: the full list, or — only where versions are digests of
/// the holds themselves, equal exactly when the holds are — "unchanged" for holds that did
/// not change; after a revoke, never "unchanged". Returns the shape the first L2 after the
/// restart had, for the backend's own expectation.
pub async fn versions_across_a_restart(server: &mut TestServer) -> Shape {
    let api = server.api();
    let s = api.open_session(60_000).await;
    let id = s.session_id.clone();
    let key = unique_key("beat-restart");
    api.acquire_ok(&key, &id, 60_000).await;
    let mut before = View::default();
    step(&api, &id, &mut before, "before the restart").await;
    tokio::task::block_in_place(|| server.restart());
    let api = server.api();
    let mut view = before.clone();
    let shape = step(&api, &id, &mut view, "after the restart").await;
    if shape == Shape::Unchanged {
        assert_eq!(
            view.version, before.version,
            "unchanged under a new version"
        );
    }
    assert_eq!(api.revoke(&key, "contract").await.status, 200);
    let mut stale = before.clone();
    let after = step(&api, &id, &mut stale, "a revoke after the restart").await;
    assert_ne!(after, Shape::Unchanged, "a revoked hold reported unchanged");
    assert!(stale.holds.is_empty());
    shape
}
