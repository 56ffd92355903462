//! Operational surfaces: `/healthz`, `/readyz`, `/metrics`, `/openapi.json`.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;

use crate::readiness::Status;
use crate::state::AppState;

/// `GET /healthz`: 200 `{"status":"ok"}` while the process serves HTTP. It does not probe
/// the store, so a held-back or backend-less replica stays "alive" (L4 says 503 instead).
pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// `GET /readyz`: 200 `{"status":"ready"}` while the store accepts writes, else 503
/// `{"status":"unavailable","reason":...,"sinceMillis":...}` (see `readiness`). Answered
/// from memory: a balancer polling it adds no store load.
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    match state.readiness.status() {
        Status::Ready => (
            StatusCode::OK,
            Json(serde_json::json!({ "status": "ready" })),
        ),
        Status::Unavailable {
            cause,
            since_millis,
        } => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({
                "status": "unavailable",
                "reason": cause.label(),
                "sinceMillis": since_millis,
            })),
        ),
    }
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let counts = state.store.counts().await.ok();
    let (keys, watchers) = state.store.feeds().counts();
    let watch = crate::metrics::WatchCounts { keys, watchers };
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(counts, watch),
    )
}

/// `GET /openapi.json`: the document as built once.
pub async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        super::openapi::json_text(),
    )
}
