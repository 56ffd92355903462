//! L8 (watching a key's events) and L9 (a holder's value) of C3, written once as functions
//! over a [`Pair`]: watchers read through `watch`, changes go through `change`. On SQLite
//! both are clients of the one server; a deployment of several replicas (etcd) passes two
//! replicas, so every check also proves that a change made at one replica reaches a watcher
//! of another. The checks that need a process of their own (restarts, caps set by flags,
//! shutdown, TLS) take a [`TestServer`] started with the options they name.
//!
//! Every check waits for events with a generous bound ([`EVENT_WAIT`]) and asserts only on
//! what arrived, never on how long it took.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use lock_api::watch::BATCH_MAX_EVENTS;
use lock_api::{paths, EventBatch, EventKind, WatchEvent};
use serde_json::{json, Value};

use crate::client::{Api, Reply};
use crate::contract::{eventually, unique_key};
use crate::{ServerOptions, TestServer};

/// How long a check waits for an event it expects before failing.
pub const EVENT_WAIT: Duration = Duration::from_secs(20);
/// Admin token of the suite's servers (R1 makes `revoked`).
pub const ADMIN_TOKEN: &str = "watch-admin-token";
/// The window of C3: events kept per key for a resume.
pub const WINDOW: usize = 256;

/// The options every server of the suite is started with.
pub fn options() -> ServerOptions {
    ServerOptions::new()
        .admin_token(ADMIN_TOKEN)
        .env("RUST_LOG", "info,lock_server=debug")
}

/// Where a check watches and where it changes the key (the same server on SQLite).
#[derive(Clone)]
pub struct Pair {
    pub watch: Api,
    pub change: Api,
}

/// Runs every check that needs nothing but the deployment's two endpoints.
pub async fn run_all(pair: &Pair) {
    every_kind_in_order_with_increasing_tokens(pair).await;
    a_resume_gets_every_event_after_its_id(pair).await;
    a_resume_past_the_window_or_from_elsewhere_is_a_reset(pair).await;
    long_poll_waits_times_out_and_caps_its_batch(pair).await;
    values_travel_with_holds_and_proclaims(pair).await;
    proclaim_is_refused_to_all_but_the_holder(pair).await;
    shared_holds_are_watched_hold_by_hold(pair).await;
}

/// One SSE record.
#[derive(Debug, Clone)]
pub struct SseRecord {
    pub id: String,
    pub event: String,
    pub data: WatchEvent,
}

/// An open SSE stream, read record by record.
pub struct SseStream {
    response: reqwest::Response,
    buffer: String,
}

impl SseStream {
    /// Opens L8 of `key` as SSE (with `Last-Event-ID` when `after` is set); panics unless 200
    /// `text/event-stream`.
    pub async fn open(api: &Api, key: &str, after: Option<&str>) -> SseStream {
        match SseStream::try_open(api, key, after).await {
            Ok(stream) => stream,
            Err(reply) => panic!("L8 SSE refused: {reply:?}"),
        }
    }

    /// Like [`SseStream::open`]; a refusal is its status and body.
    pub async fn try_open(
        api: &Api,
        key: &str,
        after: Option<&str>,
    ) -> Result<SseStream, (u16, String)> {
        let mut req = api
            .http()
            .get(format!("{}{}", api.base(), paths::events(key)))
            .header("accept", "text/event-stream");
        if let Some(after) = after {
            req = req.header("last-event-id", after);
        }
        if let Some(token) = api.token() {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let response = req.send().await.expect("L8 request");
        let status = response.status().as_u16();
        if status != 200 {
            return Err((status, response.text().await.unwrap_or_default()));
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        Ok(SseStream {
            response,
            buffer: String::new(),
        })
    }

    /// The HTTP version the stream came over.
    pub fn version(&self) -> reqwest::Version {
        self.response.version()
    }

    /// The next record (comments skipped); `None` when the stream ended. Panics after
    /// [`EVENT_WAIT`] without one.
    pub async fn next(&mut self) -> Option<SseRecord> {
        let deadline = tokio::time::Instant::now() + EVENT_WAIT;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(record) = parse_record(&block) {
                    return Some(record);
                }
                continue;
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .expect("no SSE record within the wait");
            match chunk {
                Ok(Some(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// The next record, which must exist.
    pub async fn expect(&mut self) -> SseRecord {
        self.next().await.expect("the stream ended")
    }
}

/// An SSE block's record; `None` for a comment-only block.
fn parse_record(block: &str) -> Option<SseRecord> {
    let (mut id, mut event, mut data) = (None, None, String::new());
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim_start().to_string());
        } else if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim_start().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        }
    }
    let event = event?;
    let data: WatchEvent = serde_json::from_str(&data).expect("data is a WatchEvent");
    assert_eq!(data.kind.as_str(), event, "event: names the kind");
    let id = id.expect("every record has an id");
    assert_eq!(data.id, id, "id: is the event's id");
    Some(SseRecord { id, event, data })
}

/// L8 as a long poll: the reply.
pub async fn poll_reply(api: &Api, key: &str, after: Option<&str>, wait: u64) -> Reply {
    let mut path = format!("{}?waitMillis={wait}", paths::events(key));
    if let Some(after) = after {
        path.push_str("&after=");
        path.push_str(&encode(after));
    }
    api.raw("GET", &path, None, &[("accept", "application/json")])
        .await
}

/// L8 as a long poll; panics unless 200.
pub async fn poll(api: &Api, key: &str, after: Option<&str>, wait: u64) -> Vec<WatchEvent> {
    let reply = poll_reply(api, key, after, wait).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let batch: EventBatch = reply.parse();
    assert!(batch.events.len() <= BATCH_MAX_EVENTS);
    batch.events
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A `snapshot` of `key` by long poll: its id.
async fn snapshot_id(api: &Api, key: &str) -> String {
    let events = poll(api, key, None, 0).await;
    assert_eq!(kinds(&events), [EventKind::Snapshot], "{events:?}");
    events[0].id.clone()
}

fn kinds(events: &[WatchEvent]) -> Vec<EventKind> {
    events.iter().map(|e| e.kind).collect()
}

/// L4 with a value; the reply.
async fn acquire_value(api: &Api, key: &str, session: &str, value: Option<&str>) -> Reply {
    let mut body = json!({ "sessionId": session, "ttlMillis": 30_000 });
    if let Some(value) = value {
        body["value"] = json!(value);
    }
    api.json("POST", &paths::acquire(key), &body).await
}

/// L9; the reply.
pub async fn proclaim(api: &Api, key: &str, session: &str, token: u64, value: &str) -> Reply {
    let body = json!({ "sessionId": session, "fencingToken": token, "value": value });
    api.json("POST", &paths::value(key), &body).await
}

fn token_of(reply: &Reply) -> u64 {
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body["fencingToken"].as_u64().expect("a token")
}

/// Every kind in the order the changes were made: grants' tokens strictly increase, each end
/// names the hold it ends, every event carries its waiter count and its holder's public name.
pub async fn every_kind_in_order_with_increasing_tokens(pair: &Pair) {
    let key = unique_key("watch kinds");
    let mut sse = SseStream::open(&pair.watch, &key, None).await;
    let first = sse.expect().await.data;
    assert_eq!(first.kind, EventKind::Snapshot);
    let state = first.state.expect("a snapshot has the state");
    assert!(state.holders.is_empty() && state.waiter_count == 0);

    let api = &pair.change;
    let s1 = api.open_session(60_000).await;
    let t1 = token_of(&acquire_value(api, &key, &s1.session_id, Some("v1")).await);
    let s2 = api.open_session(60_000).await;
    let waiter = {
        let (api, key, id) = (api.clone(), key.clone(), s2.session_id.clone());
        tokio::spawn(async move {
            let body = json!({ "sessionId": id, "ttlMillis": 30_000, "waitMillis": 30_000 });
            api.json("POST", &paths::acquire(&key), &body).await
        })
    };
    eventually("the second session queues", || async {
        api.lock_state(&key).await.waiter_count == 1
    })
    .await;
    assert_eq!(
        proclaim(api, &key, &s1.session_id, t1, "v2").await.status,
        204
    );
    assert_eq!(api.release(&key, t1, None).await.status, 204);
    let t2 = token_of(&waiter.await.expect("waiter"));
    let revoked = pair.change.revoke(&key, "watch test").await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    let s3 = api.open_session(60_000).await;
    let t3 = token_of(
        &api.json(
            "POST",
            &paths::acquire(&key),
            &json!({ "sessionId": s3.session_id, "ttlMillis": 300 }),
        )
        .await,
    );
    eventually("the short hold expires", || async {
        api.lock_state(&key).await.holders.is_empty()
    })
    .await;
    let s4 = api.open_session(60_000).await;
    let t4 = token_of(&acquire_value(api, &key, &s4.session_id, None).await);
    assert_eq!(api.close_session(&s4.session_id).await.status, 204);

    use EventKind::*;
    let expected = [
        (Granted, Some(t1), 0),
        (Waiters, None, 1),
        (Proclaimed, Some(t1), 1),
        (Released, Some(t1), 1),
        (HandedOff, Some(t2), 0),
        (Revoked, Some(t2), 0),
        (Granted, Some(t3), 0),
        (Expired, Some(t3), 0),
        (Granted, Some(t4), 0),
        (Released, Some(t4), 0),
    ];
    let mut seen = Vec::new();
    let mut last_id = first.id.clone();
    for _ in 0..expected.len() {
        let event = sse.expect().await.data;
        assert_eq!(event.key, key);
        assert!(event.at_millis > 0);
        assert_ne!(event.id, last_id, "ids differ");
        last_id = event.id.clone();
        seen.push(event);
    }
    let got: Vec<_> = seen
        .iter()
        .map(|e| (e.kind, e.fencing_token, e.waiter_count))
        .collect();
    assert_eq!(got, expected, "{seen:#?}");
    assert!(t1 < t2 && t2 < t3 && t3 < t4, "tokens strictly increase");
    let holder = |e: &WatchEvent| e.holder_id.clone().expect("holder events name the holder");
    assert_eq!(holder(&seen[0]), s1.holder_id);
    assert_eq!(seen[0].value.as_deref(), Some("v1"));
    assert_eq!(seen[2].value.as_deref(), Some("v2"));
    assert_eq!(holder(&seen[4]), s2.holder_id);
    assert_eq!(holder(&seen[7]), s3.holder_id);
    assert_eq!(holder(&seen[9]), s4.holder_id);
    for event in &seen {
        assert!(event.state.is_none());
        if event.kind != Waiters {
            assert_eq!(event.mode, Some(lock_api::LockMode::Exclusive));
        }
        for id in [
            &s1.session_id,
            &s2.session_id,
            &s3.session_id,
            &s4.session_id,
        ] {
            assert!(!serde_json::to_string(event).unwrap().contains(id.as_str()));
        }
    }
}

/// A resume (long poll `after`, SSE `Last-Event-ID`) gets exactly the events after its id,
/// none twice, then waits for more.
pub async fn a_resume_gets_every_event_after_its_id(pair: &Pair) {
    let key = unique_key("watch resume");
    let start = snapshot_id(&pair.watch, &key).await;
    let api = &pair.change;
    let s = api.open_session(60_000).await;
    let t = token_of(&acquire_value(api, &key, &s.session_id, Some("a")).await);
    assert_eq!(proclaim(api, &key, &s.session_id, t, "b").await.status, 204);
    assert_eq!(api.release(&key, t, None).await.status, 204);
    let want = [
        EventKind::Granted,
        EventKind::Proclaimed,
        EventKind::Released,
    ];

    let mut events = Vec::new();
    while events.len() < want.len() {
        let after = events
            .last()
            .map_or(start.clone(), |e: &WatchEvent| e.id.clone());
        events.extend(poll(&pair.watch, &key, Some(&after), 10_000).await);
    }
    assert_eq!(kinds(&events), want, "{events:?}");
    let last = events.last().unwrap().id.clone();
    assert!(poll(&pair.watch, &key, Some(&last), 0).await.is_empty());

    let mut sse = SseStream::open(&pair.watch, &key, Some(&start)).await;
    for (kind, event) in want.iter().zip(&events) {
        let record = sse.expect().await;
        assert_eq!(record.data.kind, *kind);
        assert_eq!(record.data, *event, "the same event, the same id");
    }
    // The next one is live.
    let t2 = token_of(&acquire_value(api, &key, &s.session_id, None).await);
    let next = sse.expect().await.data;
    assert_eq!(
        (next.kind, next.fencing_token),
        (EventKind::Granted, Some(t2))
    );
}

/// A resume older than the window, with another epoch's id or with garbage is one `reset`
/// with the state now (never a silent gap), after which the watch goes on.
pub async fn a_resume_past_the_window_or_from_elsewhere_is_a_reset(pair: &Pair) {
    let key = unique_key("watch window");
    let start = snapshot_id(&pair.watch, &key).await;
    let api = &pair.change;
    let s = api.open_session(60_000).await;
    let t = token_of(&acquire_value(api, &key, &s.session_id, Some("0")).await);
    for n in 0..=WINDOW {
        let reply = proclaim(api, &key, &s.session_id, t, &n.to_string()).await;
        assert_eq!(reply.status, 204, "{reply:?}");
    }
    for after in [start.as_str(), "garbage", "00000000.1.0"] {
        let events = poll(&pair.watch, &key, Some(after), 0).await;
        assert_eq!(
            kinds(&events),
            [EventKind::Reset],
            "after {after}: {events:?}"
        );
        let state = events[0].state.clone().expect("a reset has the state");
        assert_eq!(state.holders[0].fencing_token, t);
        assert_eq!(state.holders[0].value.as_deref(), Some("256"));
        // It resumes from the reset like from any event.
        let reset_id = events[0].id.clone();
        assert!(poll(&pair.watch, &key, Some(&reset_id), 0).await.is_empty());
    }
    let mut sse = SseStream::open(&pair.watch, &key, Some(&start)).await;
    let first = sse.expect().await.data;
    assert_eq!(first.kind, EventKind::Reset);
    assert_eq!(
        proclaim(api, &key, &s.session_id, t, "after").await.status,
        204
    );
    let next = sse.expect().await.data;
    assert_eq!(
        (next.kind, next.value.as_deref()),
        (EventKind::Proclaimed, Some("after"))
    );
}

/// The long poll: `[snapshot]` without `after`; with it, waits for the first event (and
/// answers it), answers `[]` when the wait passes quietly, at most [`BATCH_MAX_EVENTS`] events
/// a time, continuing where the previous answer ended.
pub async fn long_poll_waits_times_out_and_caps_its_batch(pair: &Pair) {
    let key = unique_key("watch poll");
    let start = snapshot_id(&pair.watch, &key).await;
    assert!(poll(&pair.watch, &key, Some(&start), 200).await.is_empty());
    let waiting = {
        let (api, key, start) = (pair.watch.clone(), key.clone(), start.clone());
        tokio::spawn(async move { poll(&api, &key, Some(&start), 30_000).await })
    };
    let api = &pair.change;
    let s = api.open_session(60_000).await;
    let t = token_of(&acquire_value(api, &key, &s.session_id, None).await);
    let answered = waiting.await.expect("poll");
    assert_eq!(answered[0].kind, EventKind::Granted);
    assert_eq!(answered[0].fencing_token, Some(t));

    // A full window after `from`: answered in batches, nothing lost or repeated.
    let from = answered.last().unwrap().id.clone();
    for n in 0..WINDOW {
        assert_eq!(
            proclaim(api, &key, &s.session_id, t, &n.to_string())
                .await
                .status,
            204
        );
    }
    let mut values = Vec::new();
    let mut after = from;
    while values.len() < WINDOW {
        let events = poll(&pair.watch, &key, Some(&after), 10_000).await;
        assert!(!events.is_empty() && events.len() <= BATCH_MAX_EVENTS);
        assert!(
            events.iter().all(|e| e.kind == EventKind::Proclaimed),
            "{events:?}"
        );
        values.extend(events.iter().map(|e| e.value.clone().unwrap()));
        after = events.last().unwrap().id.clone();
    }
    let want: Vec<String> = (0..WINDOW).map(|n| n.to_string()).collect();
    assert_eq!(values, want);

    let reply = poll_reply(&pair.watch, &key, None, 30_001).await;
    reply.assert_error(400, "VALIDATION_FAILED");
    assert_eq!(reply.body["field"], "waitMillis");
}

/// L4's `value` is the hold's (L7's holder, the grant event); a renewal with a value replaces
/// it, one without keeps it; L9 replaces it; over 1 KiB is 400 naming `value`.
pub async fn values_travel_with_holds_and_proclaims(pair: &Pair) {
    let key = unique_key("watch values");
    let api = &pair.change;
    let s = api.open_session(60_000).await;
    let t = token_of(&acquire_value(api, &key, &s.session_id, Some("addr:1")).await);
    let value_now =
        |api: Api, key: String| async move { api.lock_state(&key).await.holders[0].value.clone() };
    assert_eq!(
        value_now(pair.watch.clone(), key.clone()).await.as_deref(),
        Some("addr:1")
    );
    let events = poll(&pair.watch, &key, None, 0).await;
    let holder = &events[0].state.as_ref().unwrap().holders[0];
    assert_eq!(holder.value.as_deref(), Some("addr:1"));
    assert_eq!(
        token_of(&acquire_value(api, &key, &s.session_id, None).await),
        t
    );
    assert_eq!(
        value_now(api.clone(), key.clone()).await.as_deref(),
        Some("addr:1")
    );
    assert_eq!(
        token_of(&acquire_value(api, &key, &s.session_id, Some("addr:2")).await),
        t
    );
    assert_eq!(
        value_now(api.clone(), key.clone()).await.as_deref(),
        Some("addr:2")
    );
    assert_eq!(
        proclaim(api, &key, &s.session_id, t, "addr:3").await.status,
        204
    );
    assert_eq!(
        value_now(api.clone(), key.clone()).await.as_deref(),
        Some("addr:3")
    );
    let exact = "x".repeat(lock_api::limits::VALUE_MAX_BYTES);
    assert_eq!(
        proclaim(api, &key, &s.session_id, t, &exact).await.status,
        204
    );

    let big = "x".repeat(lock_api::limits::VALUE_MAX_BYTES + 1);
    let reply = proclaim(api, &key, &s.session_id, t, &big).await;
    reply.assert_error(400, "VALIDATION_FAILED");
    assert_eq!(reply.body["field"], "value");
    let other = unique_key("watch values big");
    let reply = acquire_value(api, &other, &s.session_id, Some(&big)).await;
    reply.assert_error(400, "VALIDATION_FAILED");
    assert_eq!(reply.body["field"], "value");
    assert!(
        api.lock_state(&other).await.holders.is_empty(),
        "nothing stored"
    );
    assert_eq!(value_now(api.clone(), key.clone()).await, Some(exact));
}

/// L9 of another session, of a released hold or with another token is 409 LOCK_LOST; of an
/// unknown session 404; nothing changes.
pub async fn proclaim_is_refused_to_all_but_the_holder(pair: &Pair) {
    let key = unique_key("watch proclaim");
    let api = &pair.change;
    let s = api.open_session(60_000).await;
    let other = api.open_session(60_000).await;
    let t = token_of(&acquire_value(api, &key, &s.session_id, Some("mine")).await);
    proclaim(api, &key, &other.session_id, t, "theirs")
        .await
        .assert_error(409, "LOCK_LOST");
    proclaim(api, &key, &s.session_id, t + 1, "theirs")
        .await
        .assert_error(409, "LOCK_LOST");
    proclaim(api, &key, "0123456789abcdef0123456789abcdef", t, "theirs")
        .await
        .assert_error(404, "SESSION_NOT_FOUND");
    assert_eq!(
        api.lock_state(&key).await.holders[0].value.as_deref(),
        Some("mine")
    );
    assert_eq!(api.release(&key, t, None).await.status, 204);
    proclaim(api, &key, &s.session_id, t, "late")
        .await
        .assert_error(409, "LOCK_LOST");
}

/// Shared holds: each grant and end is its own event, with `mode` shared and the key's
/// `limit`; a snapshot lists every holder with its value.
pub async fn shared_holds_are_watched_hold_by_hold(pair: &Pair) {
    let key = unique_key("watch shared");
    let mut sse = SseStream::open(&pair.watch, &key, None).await;
    assert_eq!(sse.expect().await.data.kind, EventKind::Snapshot);
    let api = &pair.change;
    let (a, b) = (
        api.open_session(60_000).await,
        api.open_session(60_000).await,
    );
    let ta = token_of(&api.acquire_shared(&key, &a.session_id, Some(2), None).await);
    let tb = token_of(&api.acquire_shared(&key, &b.session_id, Some(2), None).await);
    assert_eq!(api.release(&key, ta, None).await.status, 204);
    for (kind, token, holder) in [
        (EventKind::Granted, ta, &a.holder_id),
        (EventKind::Granted, tb, &b.holder_id),
        (EventKind::Released, ta, &a.holder_id),
    ] {
        let event = sse.expect().await.data;
        assert_eq!((event.kind, event.fencing_token), (kind, Some(token)));
        assert_eq!(event.holder_id.as_ref(), Some(holder));
        assert_eq!(event.mode, Some(lock_api::LockMode::Shared));
        assert_eq!(event.limit, Some(2));
    }
    let snapshot = poll(&pair.watch, &key, None, 0).await;
    let state = snapshot[0].state.clone().unwrap();
    assert_eq!(state.mode, Some(lock_api::LockMode::Shared));
    assert_eq!(state.holders.len(), 1);
    assert_eq!(state.holders[0].fencing_token, tb);
}

/// A resume from before a kill -9 restart is a `reset` (another epoch: the server cannot
/// know what it missed), and the watch goes on from it.
pub async fn a_restart_resets_every_resume(server: &mut TestServer) {
    let key = unique_key("watch restart");
    let api = server.api();
    let s = api.open_session(120_000).await;
    let start = snapshot_id(&api, &key).await;
    let t = token_of(&acquire_value(&api, &key, &s.session_id, Some("before")).await);
    let events = poll(&api, &key, Some(&start), 10_000).await;
    assert_eq!(events[0].kind, EventKind::Granted);
    let last = events[0].id.clone();
    server.kill9();
    server.restart();
    let api = server.api();
    let events = poll(&api, &key, Some(&last), 0).await;
    assert_eq!(kinds(&events), [EventKind::Reset], "{events:?}");
    let state = events[0].state.clone().unwrap();
    assert_eq!(state.holders[0].fencing_token, t, "the hold survived");
    let mut sse = SseStream::open(&api, &key, Some(&last)).await;
    assert_eq!(sse.expect().await.data.kind, EventKind::Reset);
}

/// The per-key watcher cap (the server started with `--max-watchers-per-key 2`): one more
/// watcher, SSE or long poll, is 429 CONTENTION_EXCEEDED with `retryAfterMillis`; a place
/// freed is taken again.
pub async fn watchers_per_key_are_capped(server: &TestServer) {
    let key = unique_key("watch cap");
    let api = server.api();
    let first = SseStream::open(&api, &key, None).await;
    let _second = SseStream::open(&api, &key, None).await;
    let (status, body) = SseStream::try_open(&api, &key, None)
        .await
        .err()
        .expect("refused");
    assert_eq!(status, 429);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["code"], "CONTENTION_EXCEEDED");
    assert!(body["retryAfterMillis"].as_u64().is_some());
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("too many watchers"));
    poll_reply(&api, &key, None, 0)
        .await
        .assert_error(429, "CONTENTION_EXCEEDED");
    // Another key has places of its own.
    assert!(
        SseStream::try_open(&api, &unique_key("watch cap other"), None)
            .await
            .is_ok()
    );
    drop(first);
    eventually("a freed place is taken again", || async {
        poll_reply(&api, &key, None, 0).await.status == 200
    })
    .await;
}

/// SSE over HTTP/2 (TLS, ALPN h2), with the per-connection stream cap (the server started
/// with `--max-streams-per-connection 2`): two streams on one connection, the third 429,
/// while requests of other kinds still go through on it.
pub async fn streams_per_connection_are_capped_on_http2(server: &TestServer) {
    let api = server.api_with(server.http(1));
    let key = unique_key("watch h2");
    let mut a = SseStream::open(&api, &key, None).await;
    assert_eq!(a.version(), reqwest::Version::HTTP_2);
    let _b = SseStream::open(&api, &unique_key("watch h2 b"), None).await;
    let (status, body) = SseStream::try_open(&api, &unique_key("watch h2 c"), None)
        .await
        .err()
        .expect("a third stream on the connection is refused");
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("CONTENTION_EXCEEDED"));
    assert_eq!(a.expect().await.data.kind, EventKind::Snapshot);
    // The same connection still serves other requests, and the open stream its events.
    let s = api.open_session(60_000).await;
    let t = token_of(&acquire_value(&api, &key, &s.session_id, None).await);
    let next = a.expect().await.data;
    assert_eq!(
        (next.kind, next.fencing_token),
        (EventKind::Granted, Some(t))
    );
    // Another connection has its own streams.
    let other = server.api_with(server.http(1));
    assert!(SseStream::try_open(&other, &key, None).await.is_ok());
}

/// A slow consumer (the server started with `--watch-buffer-events 8`): a raw client that
/// stops reading while far more events are produced finds, when it reads again, one `reset`
/// and then the end of the stream.
pub async fn a_slow_consumer_gets_a_reset_and_the_end(server: &TestServer) {
    let key = unique_key("watch slow");
    let api = server.api();
    let s = api.open_session(120_000).await;
    let t = token_of(&acquire_value(&api, &key, &s.session_id, None).await);
    let mut raw = TcpStream::connect(server.addr()).expect("connect");
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n",
        paths::events(&key),
        server.addr()
    );
    raw.write_all(request.as_bytes()).expect("send");
    let resets = || async {
        let text = api.metrics().await;
        text.lines()
            .find(|l| l.starts_with("lock_watch_resets_total{reason=\"slow_consumer\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = resets().await;
    // Large events fill the socket buffers sooner; the bound only says when to give up.
    let value = "v".repeat(lock_api::limits::VALUE_MAX_BYTES);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut n = 0u64;
    while resets().await == before {
        assert!(
            Instant::now() < deadline,
            "the consumer never counted as slow"
        );
        let mut batch = Vec::new();
        for _ in 0..64 {
            n += 1;
            let (api, key, id) = (api.clone(), key.clone(), s.session_id.clone());
            let v = format!("{n:08}{}", &value[8..]);
            batch.push(tokio::spawn(async move {
                proclaim(&api, &key, &id, t, &v).await.status
            }));
        }
        for task in batch {
            assert_eq!(task.await.unwrap(), 204);
        }
    }
    let text = tokio::task::spawn_blocking(move || {
        raw.set_read_timeout(Some(EVENT_WAIT)).unwrap();
        let mut all = Vec::new();
        raw.read_to_end(&mut all)
            .expect("read until the server closes");
        String::from_utf8_lossy(&all).into_owned()
    })
    .await
    .unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let body = dechunk(body);
    assert!(
        body.ends_with("\n\n"),
        "the stream ended after a whole record"
    );
    let records: Vec<SseRecord> = body.split("\n\n").filter_map(parse_record).collect();
    assert_eq!(records.first().unwrap().data.kind, EventKind::Snapshot);
    let last = records.last().unwrap();
    assert_eq!(
        last.data.kind,
        EventKind::Reset,
        "the last record is the reset"
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r.data.kind == EventKind::Reset)
            .count(),
        1
    );
    assert!(
        records.len() < n as usize,
        "events were dropped, not all buffered"
    );
    assert!(last.data.state.is_some());
}

/// The body of a chunked HTTP/1.1 response.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

/// SIGTERM ends open SSE streams and answers a waiting long poll (with what it has, here
/// nothing); the server still exits cleanly.
pub async fn shutdown_ends_streams_and_polls(server: &mut TestServer) {
    let key = unique_key("watch shutdown");
    let api = server.api();
    let mut sse = SseStream::open(&api, &key, None).await;
    assert_eq!(sse.expect().await.data.kind, EventKind::Snapshot);
    let start = snapshot_id(&api, &key).await;
    let polling = {
        let (api, key) = (api.clone(), key.clone());
        tokio::spawn(async move { poll_reply(&api, &key, Some(&start), 30_000).await })
    };
    // The poll is in: the key has two watchers.
    eventually("the long poll waits", || async {
        api.metrics().await.contains("lock_watchers 2\n")
    })
    .await;
    let streaming = tokio::spawn(async move { sse.next().await.is_none() });
    // Blocks this worker thread only: the stream and the poll are read on the others.
    let clean = tokio::task::block_in_place(|| server.terminate());
    assert!(
        streaming.await.unwrap(),
        "the stream ended without another event"
    );
    let reply = polling.await.unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.parse::<EventBatch>().events.is_empty());
    assert!(clean, "a clean exit");
}

/// With an auth file: L8 and L9 need a known token (401) and a key inside the client's
/// `keyPrefixes` (403), like every client route.
pub async fn watch_and_proclaim_need_a_token_and_a_key_in_scope(
    server: &TestServer,
    token: &str,
    inside: &str,
    outside: &str,
) {
    let anonymous = server.api();
    let client = anonymous.with_token(token);
    poll_reply(&anonymous, inside, None, 0)
        .await
        .assert_error(401, "UNAUTHORIZED");
    let (status, _) = SseStream::try_open(&anonymous, inside, None)
        .await
        .err()
        .unwrap();
    assert_eq!(status, 401);
    poll_reply(&client, outside, None, 0)
        .await
        .assert_error(403, "FORBIDDEN");
    let (status, _) = SseStream::try_open(&client, outside, None)
        .await
        .err()
        .unwrap();
    assert_eq!(status, 403);
    let s = client.open_session(60_000).await;
    proclaim(&client, outside, &s.session_id, 1, "v")
        .await
        .assert_error(403, "FORBIDDEN");
    let mut sse = SseStream::open(&client, inside, None).await;
    assert_eq!(sse.expect().await.data.kind, EventKind::Snapshot);
    let t = token_of(&acquire_value(&client, inside, &s.session_id, Some("x")).await);
    assert_eq!(
        proclaim(&client, inside, &s.session_id, t, "y")
            .await
            .status,
        204
    );
    assert_eq!(sse.expect().await.data.kind, EventKind::Granted);
    assert_eq!(sse.expect().await.data.kind, EventKind::Proclaimed);
}

/// A browser page of an allowed origin may watch: the preflight of a resume (its
/// `Last-Event-ID` header) is allowed and the stream answers with the origin; another origin
/// gets no CORS headers. `server` runs with `--cors-origin` [`crate::contract::CORS_ORIGIN`].
pub async fn watch_is_open_to_configured_origins_only(server: &TestServer) {
    use crate::contract::CORS_ORIGIN;
    let url = format!("{}{}", server.base_url(), paths::events("cors/watched"));
    let http = server.http(0);
    let preflight = |origin: &'static str| {
        http.request(reqwest::Method::OPTIONS, &url)
            .header("origin", origin)
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "last-event-id")
            .send()
    };
    let allowed = preflight(CORS_ORIGIN).await.expect("a preflight answer");
    let header = |response: &reqwest::Response, name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    assert_eq!(header(&allowed, "access-control-allow-origin"), CORS_ORIGIN);
    assert!(
        header(&allowed, "access-control-allow-headers").contains("last-event-id"),
        "{:?}",
        allowed.headers()
    );
    let stranger = preflight("http://elsewhere.example")
        .await
        .expect("a preflight answer");
    assert!(stranger
        .headers()
        .get("access-control-allow-origin")
        .is_none());

    // The stream itself carries the origin (the first chunk is the snapshot).
    let mut stream = http
        .get(&url)
        .header("origin", CORS_ORIGIN)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("a stream");
    assert_eq!(stream.status(), 200);
    assert_eq!(header(&stream, "access-control-allow-origin"), CORS_ORIGIN);
    assert!(header(&stream, "content-type").starts_with("text/event-stream"));
    let first = tokio::time::timeout(Duration::from_secs(30), stream.chunk())
        .await
        .expect("the snapshot in time")
        .expect("a chunk")
        .expect("not the end");
    assert!(String::from_utf8_lossy(&first).contains("event: snapshot"));
}
