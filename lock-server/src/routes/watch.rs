//! L8 `GET /v1/locks/{key}/events` (a key's holder changes, as SSE or as a long poll) and L9
//! `POST /v1/locks/{key}/value` (a holder replaces its hold's value).
//!
//! Both L8 forms read the same feed (`store::feeds`) with the same ids: a watch without a
//! resume point starts with a `snapshot`, a resume the feed cannot serve completely with a
//! `reset`, and both carry the state read from the store at a position in the feed, so the
//! live events at or before it are skipped (they are in the state already). An SSE stream is
//! fed by a task of its own through a channel of the feed's buffer size: a consumer that lets
//! it fill is sent `reset` (the state now) when it reads again, and the stream ends; the
//! same when the feed says it lost track of the key (`Gap`), except that the stream goes on.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use lock_api::limits::{validate_value, validate_wait, MAX_FENCING_TOKEN};
use lock_api::watch::BATCH_MAX_EVENTS;
use lock_api::{ErrorBody, ErrorCode, EventBatch, EventKind, ProclaimRequest, WatchEvent};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::auth::Caller;
use crate::connections::{ConnectionStreams, StreamSlot};
use crate::error::ApiError;
use crate::extract::{JsonBody, KeyParam};
use crate::metrics::ResetReason;
use crate::state::AppState;
use crate::store::feeds::{FeedItem, Pos, Start};
use crate::store::lease::now_millis;
use crate::store::{SessionRef, StoreError, Subscription};

/// How often an idle SSE stream sends a `: keep-alive` comment (C3), so proxies and clients
/// see it alive.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// L8's query string.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsQuery {
    /// Resume after this event id (as `Last-Event-ID`).
    after: Option<String>,
    /// Long poll: how long to wait for the first event.
    wait_millis: Option<u64>,
}

/// L8 `GET /v1/locks/{key}/events`.
pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    KeyParam(key): KeyParam,
    query: Result<Query<EventsQuery>, QueryRejection>,
    headers: HeaderMap,
    streams: Option<Extension<ConnectionStreams>>,
) -> Result<Response, ApiError> {
    caller.check_key(&key)?;
    let Query(query) = query.map_err(|e| {
        let field = if e.body_text().contains("waitMillis") {
            "waitMillis"
        } else {
            "query"
        };
        ApiError::validation(field, format!("invalid query: {}", e.body_text()))
    })?;
    let wait = query.wait_millis.unwrap_or(0);
    validate_wait(wait)
        .map_err(|m| ApiError::validation("waitMillis", format!("waitMillis {m}")))?;
    // `?after=` wins over the header: a client that names both meant the one it wrote.
    let after = query.after.or_else(|| {
        headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    if wants_json(&headers) {
        return long_poll(&state, key, after, wait)
            .await
            .map(|batch| Json(batch).into_response());
    }
    // Counted before the watch is taken, so a refused stream holds no watcher.
    let slot = match streams {
        Some(Extension(streams)) => Some(streams.open().ok_or_else(too_many_streams)?),
        None => None,
    };
    sse(state, key, after, slot).await
}

/// `Accept: application/json` (without `text/event-stream` also accepted) asks for the long
/// poll; anything else for SSE.
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json") && !v.contains("text/event-stream"))
}

fn too_many_streams() -> ApiError {
    let mut body = ErrorBody::new(
        ErrorCode::ContentionExceeded,
        "too many watchers: this connection has as many event streams open as it may",
    );
    body.retry_after_millis = Some(1_000);
    ApiError(Box::new(body))
}

/// The `snapshot` or `reset` event: the key now, with the feed position it is exact at.
async fn state_event(
    state: &AppState,
    key: &str,
    kind: EventKind,
) -> Result<(Pos, WatchEvent), StoreError> {
    let (current, pos) = state.store.watch_state(key).await?;
    let lock_state = super::locks::lock_state(key.to_string(), current);
    let id = state.store.feeds().id(pos);
    let event = WatchEvent::of_state(id, kind, lock_state, now_millis());
    Ok((pos, event))
}

/// A `reset`, counted and logged with its reason.
async fn reset_event(
    state: &AppState,
    key: &str,
    reason: ResetReason,
) -> Result<(Pos, WatchEvent), StoreError> {
    state.metrics.count_reset(reason);
    tracing::debug!(event = "watch_reset", key = %key, reason = reason.label());
    state_event(state, key, EventKind::Reset).await
}

async fn subscribe(
    state: &AppState,
    key: &str,
    after: Option<&str>,
) -> Result<Subscription, ApiError> {
    let subscription = state.store.watch(key, after).await;
    if matches!(subscription, Err(StoreError::TooManyWatchers)) {
        tracing::info!(event = "watch_refused", key = %key);
    }
    Ok(subscription?)
}

/// The long poll: the events after `after` (at most [`BATCH_MAX_EVENTS`]), waiting up to
/// `wait` ms for the first; `[snapshot]` without `after`, `[reset]` for a resume the feed
/// cannot serve. Shutdown answers what it has.
async fn long_poll(
    state: &AppState,
    key: String,
    after: Option<String>,
    wait: u64,
) -> Result<EventBatch, ApiError> {
    let mut sub = subscribe(state, &key, after.as_deref()).await?;
    let backlog = match std::mem::replace(&mut sub.start, Start::Snapshot) {
        Start::Snapshot => {
            let (_, event) = state_event(state, &key, EventKind::Snapshot).await?;
            return Ok(sent(state, vec![event]));
        }
        Start::Reset => {
            let (_, event) = reset_event(state, &key, ResetReason::Resume).await?;
            return Ok(sent(state, vec![event]));
        }
        Start::Backlog(backlog) => backlog,
    };
    if !backlog.is_empty() {
        let events = backlog
            .iter()
            .take(BATCH_MAX_EVENTS)
            .map(|(_, e)| WatchEvent::clone(e))
            .collect();
        return Ok(sent(state, events));
    }
    let mut shutdown = state.shutdown.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait);
    let first = tokio::select! {
        item = sub.live.recv() => Some(item),
        () = tokio::time::sleep_until(deadline) => None,
        _ = shutdown.wait_for(|stopping| *stopping) => None,
    };
    let mut events = Vec::new();
    match first {
        None | Some(Err(RecvError::Closed)) => {}
        Some(Ok(FeedItem::Event(_, event))) => {
            events.push(WatchEvent::clone(&event));
            // What else is there already goes in the same answer.
            while events.len() < BATCH_MAX_EVENTS {
                match sub.live.try_recv() {
                    Ok(FeedItem::Event(_, event)) => events.push(WatchEvent::clone(&event)),
                    Ok(FeedItem::Gap) | Err(_) => break,
                }
            }
        }
        Some(Ok(FeedItem::Gap)) => {
            events.push(reset_event(state, &key, ResetReason::Gap).await?.1);
        }
        Some(Err(RecvError::Lagged(_))) => {
            events.push(reset_event(state, &key, ResetReason::SlowConsumer).await?.1);
        }
    }
    Ok(sent(state, events))
}

fn sent(state: &AppState, events: Vec<WatchEvent>) -> EventBatch {
    state.metrics.count_events_sent(events.len() as u64);
    EventBatch { events }
}

/// The SSE stream: its first event is read before answering (so a store error is an error
/// answer), the rest comes from [`pump`].
async fn sse(
    state: AppState,
    key: String,
    after: Option<String>,
    slot: Option<StreamSlot>,
) -> Result<Response, ApiError> {
    let mut sub = subscribe(&state, &key, after.as_deref()).await?;
    let mut first = Vec::new();
    let mut skip = None;
    match std::mem::replace(&mut sub.start, Start::Snapshot) {
        Start::Snapshot => {
            let (pos, event) = state_event(&state, &key, EventKind::Snapshot).await?;
            first.push(event);
            skip = Some(pos);
        }
        Start::Reset => {
            let (pos, event) = reset_event(&state, &key, ResetReason::Resume).await?;
            first.push(event);
            skip = Some(pos);
        }
        Start::Backlog(backlog) => first.extend(backlog.iter().map(|(_, e)| WatchEvent::clone(e))),
    }
    let buffer = state.store.feeds().limits().buffer;
    let (tx, rx) = mpsc::channel(buffer.max(first.len()));
    for event in &first {
        // Room for all of them: the channel was made large enough.
        let _ = tx.try_send(sse_event(event));
    }
    state.metrics.count_events_sent(first.len() as u64);
    tokio::spawn(pump(state, key, sub, tx, skip, slot));
    // axum writes a comment as `: <text>`.
    let keep_alive = KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive");
    let mut response = Sse::new(Events(rx)).keep_alive(keep_alive).into_response();
    // A proxy that buffers answers (nginx does by default) would hold events back until its
    // buffer fills; this header turns that off for the stream alone.
    response.headers_mut().insert(
        axum::http::HeaderName::from_static("x-accel-buffering"),
        axum::http::HeaderValue::from_static("no"),
    );
    Ok(response)
}

/// Feeds one SSE stream until the client goes, the server shuts down or the consumer falls
/// a buffer behind. `skip`: the position of the last state sent (live events at or before it
/// are in it). `_slot` counts the stream against its connection's cap while it lives.
async fn pump(
    state: AppState,
    key: String,
    mut sub: Subscription,
    tx: mpsc::Sender<Event>,
    mut skip: Option<Pos>,
    _slot: Option<StreamSlot>,
) {
    let mut shutdown = state.shutdown.clone();
    loop {
        let item = tokio::select! {
            item = sub.live.recv() => item,
            () = tx.closed() => return,
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        };
        let event = match item {
            Ok(FeedItem::Event(pos, event)) => {
                if skip.is_some_and(|skip| pos <= skip) {
                    continue;
                }
                sse_event(&event)
            }
            Ok(FeedItem::Gap) => match reset_event(&state, &key, ResetReason::Gap).await {
                Ok((pos, reset)) => {
                    skip = Some(pos);
                    sse_event(&reset)
                }
                Err(_) => return,
            },
            Err(RecvError::Lagged(_)) => return slow_consumer(state, key, sub, tx).await,
            Err(RecvError::Closed) => return,
        };
        match tx.try_send(event) {
            Ok(()) => state.metrics.count_events_sent(1),
            Err(mpsc::error::TrySendError::Full(_)) => {
                return slow_consumer(state, key, sub, tx).await
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    }
}

/// The consumer fell a buffer behind: its watch ends now (freeing its place); it finds one
/// `reset` with the state now after what it has not read yet, then the end of the stream.
async fn slow_consumer(state: AppState, key: String, sub: Subscription, tx: mpsc::Sender<Event>) {
    drop(sub);
    let Ok((_, reset)) = reset_event(&state, &key, ResetReason::SlowConsumer).await else {
        return;
    };
    let mut shutdown = state.shutdown.clone();
    tokio::select! {
        sent = tx.send(sse_event(&reset)) => if sent.is_ok() {
            state.metrics.count_events_sent(1);
        },
        _ = shutdown.wait_for(|stopping| *stopping) => {}
    }
}

fn sse_event(event: &WatchEvent) -> Event {
    let data = serde_json::to_string(event).unwrap_or_default();
    Event::default()
        .id(event.id.clone())
        .event(event.kind.as_str())
        .data(data)
}

/// The SSE body's events, as a stream of the pump's channel.
struct Events(mpsc::Receiver<Event>);

impl futures_core::Stream for Events {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|event| event.map(Ok))
    }
}

/// L9 `POST /v1/locks/{key}/value`: the holder of `(key, fencingToken)` replaces its value;
/// watchers get `proclaimed`.
pub async fn proclaim(
    State(state): State<AppState>,
    caller: Caller,
    KeyParam(key): KeyParam,
    JsonBody(req): JsonBody<ProclaimRequest>,
) -> Result<StatusCode, ApiError> {
    caller.check_key(&key)?;
    validate_value(&req.value).map_err(|m| ApiError::validation("value", format!("value {m}")))?;
    let session = SessionRef::new(&req.session_id, caller.client());
    // No hold ever carries a token at or above 2^53 (see L6).
    let result = if req.fencing_token > MAX_FENCING_TOKEN {
        Err(StoreError::LockLost)
    } else {
        state
            .store
            .proclaim(&key, session, req.fencing_token, &req.value)
            .await
    };
    if tracing::enabled!(tracing::Level::DEBUG) {
        let holder_id = state.store.holder_id(&req.session_id).await;
        tracing::debug!(
            event = "lock_proclaimed",
            key = %key,
            fencingToken = req.fencing_token,
            holderId = %holder_id.unwrap_or_default(),
            client = caller.log_name(),
            lost = result.is_err(),
        );
    }
    result?;
    Ok(StatusCode::NO_CONTENT)
}
