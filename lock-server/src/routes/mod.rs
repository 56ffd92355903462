//! The HTTP surface: one table of every route with who may call it (also what the OpenAPI
//! test compares against), the router built from it with the auth guard on every route, and
//! the layers that keep every error a JSON contract body.
//!
//! Modules: `sessions` (L1 L2 L3 L5), `locks` (L4 L6 L7), `watch` (L8 events, L9 value),
//! `admin` (R1), `ledger` (demo fenced resource), `unfenced_ledger` (its unfenced twin, for the
//! dashboard's fault lab), `ops` (healthz, readyz, metrics, openapi), `openapi` (the document,
//! from this table).

pub mod admin;
pub mod ledger;
pub mod locks;
pub mod openapi;
pub mod ops;
pub mod sessions;
pub mod unfenced_ledger;
pub mod watch;
pub mod web_root;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request};
use axum::handler::Handler;
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use lock_api::ErrorCode;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::auth::guard::{guard, Access, Guard};
use crate::config::Config;
use crate::error::{code_for_status, ApiError};
use crate::metrics::StoreRoute;
use crate::readiness::{observe, Observed};
use crate::state::AppState;

/// One route: method, axum path pattern, who may call it, handler.
pub struct Route {
    /// HTTP method.
    pub method: Method,
    /// Path pattern in axum syntax (`{key}`); the OpenAPI document uses the same spelling.
    pub path: &'static str,
    /// Who may call it (enforced by the auth guard around the handler).
    pub access: Access,
    /// The handler.
    pub handler: MethodRouter<AppState>,
    /// The route's name in `lock_store_errors_total` and whether its success proves a store
    /// write (`readiness::observe`); `None` for a route that never calls the store.
    pub store: Option<(StoreRoute, bool)>,
}

impl Route {
    /// A route whose success is a store write.
    fn writes(self, name: StoreRoute) -> Route {
        Route {
            store: Some((name, true)),
            ..self
        }
    }

    /// A route that reads the store.
    fn reads(self, name: StoreRoute) -> Route {
        Route {
            store: Some((name, false)),
            ..self
        }
    }
}

fn route<H, T>(method: Method, path: &'static str, access: Access, handler: H) -> Route
where
    H: Handler<T, AppState>,
    T: 'static,
{
    // The table names only GET, POST and DELETE, which are always routable.
    let filter = MethodFilter::try_from(method.clone()).expect("a routable method");
    Route {
        method,
        path,
        access,
        handler: on(filter, handler),
        store: None,
    }
}

/// Every route the server answers (static files under `--web-root` aside).
#[rustfmt::skip] // a table: one route a line
pub fn table() -> Vec<Route> {
    use Access::{Admin, Client, Ops, Public};
    use Method as M;
    use StoreRoute::{Ledger, L1, L2, L3, L4, L5, L6, L7, L8, L9, R1};
    vec![
        route(M::POST, "/v1/sessions", Client, sessions::open).writes(L1),
        route(M::POST, "/v1/sessions/{holderId}/heartbeat", Client, sessions::heartbeat).writes(L2),
        route(M::DELETE, "/v1/sessions/{holderId}", Client, sessions::close).writes(L3),
        route(M::GET, "/v1/sessions/{holderId}", Client, sessions::status).reads(L5),
        route(M::POST, "/v1/locks/{key}/acquire", Client, locks::acquire).writes(L4),
        route(M::POST, "/v1/locks/{key}/release", Client, locks::release).writes(L6),
        route(M::GET, "/v1/locks/{key}", Client, locks::read).reads(L7),
        route(M::GET, "/v1/locks/{key}/events", Client, watch::events).reads(L8),
        route(M::POST, "/v1/locks/{key}/value", Client, watch::proclaim).writes(L9),
        route(M::POST, "/v1/admin/locks/{key}/revoke", Admin, admin::revoke).writes(R1),
        route(M::POST, "/v1/demo/ledger/{key}", Client, ledger::append).writes(Ledger),
        route(M::GET, "/v1/demo/ledger/{key}", Client, ledger::read).reads(Ledger),
        route(M::POST, "/v1/demo/unfenced-ledger/{key}", Client, unfenced_ledger::append).writes(Ledger),
        route(M::GET, "/v1/demo/unfenced-ledger/{key}", Client, unfenced_ledger::read).reads(Ledger),
        route(M::GET, "/healthz", Public, ops::healthz),
        route(M::GET, "/readyz", Public, ops::readyz),
        route(M::GET, "/metrics", Ops, ops::metrics),
        route(M::GET, "/openapi.json", Ops, ops::openapi),
    ]
}

/// The whole application: routes, JSON errors, body limit, panic guard, CORS, static files.
pub fn router(state: AppState, config: &Config) -> Router {
    let mut router = Router::new();
    let guard_for = |path: &'static str, access: Access| {
        let guard_state = Guard {
            auth: state.auth.clone(),
            metrics: state.metrics.clone(),
            access,
            route: path,
        };
        middleware::from_fn_with_state(guard_state, guard)
    };
    // Routes sharing a path are merged by axum when added with the same pattern.
    let served = |path: &str| config.demo_ledger || !path.starts_with(ledger::PATH_PREFIX);
    for r in table().into_iter().filter(|r| served(r.path)) {
        let mut handler = r.handler;
        if let Some((name, writes)) = r.store {
            // Inside the guard: a refused request never reached the store.
            let observed = Observed {
                readiness: state.readiness.clone(),
                route: name,
                writes,
            };
            handler = handler.route_layer(middleware::from_fn_with_state(observed, observe));
        }
        let handler = handler.route_layer(guard_for(r.path, r.access));
        router = router.route(r.path, handler);
    }
    // An empty key (`/v1/locks//acquire`) would otherwise fall through to 404; it is a bad
    // key, so it gets the key rule's 400 (after the same guard as the route it stands for).
    for (path, access) in [
        ("/v1/locks//acquire", Access::Client),
        ("/v1/locks//release", Access::Client),
        ("/v1/locks//events", Access::Client),
        ("/v1/locks//value", Access::Client),
        ("/v1/locks/", Access::Client),
        ("/v1/admin/locks//revoke", Access::Admin),
        ("/v1/demo/ledger/", Access::Client),
        ("/v1/demo/unfenced-ledger/", Access::Client),
    ] {
        if !served(path) {
            continue;
        }
        let handler = axum::routing::any(empty_key).layer(guard_for(path, access));
        router = router.route(path, handler);
    }
    if !config.demo_ledger {
        // Switched off: its paths say so, after the same guard (a 401 stays a 401).
        for path in [
            "/v1/demo/ledger/{key}",
            "/v1/demo/ledger/",
            "/v1/demo/unfenced-ledger/{key}",
            "/v1/demo/unfenced-ledger/",
        ] {
            let handler =
                axum::routing::any(ledger::switched_off).layer(guard_for(path, Access::Client));
            router = router.route(path, handler);
        }
    }
    let router = match &config.web_root {
        Some(root) => router.fallback_service(web_root::files(root)),
        None => router.fallback(not_found),
    };
    let mut router = router
        .with_state(state)
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(middleware::from_fn(json_errors))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn(crate::trace_context::scope));
    if !config.cors_origins.is_empty() {
        router = router.layer(cors(&config.cors_origins));
    }
    router
}

async fn empty_key() -> ApiError {
    ApiError::validation("key", "key must not be empty")
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such route")
}

/// Rewrites any error answer that is not already JSON (axum's 405, static-file 404s, framework
/// rejections) into the contract's JSON body, so clients only ever parse one error shape.
async fn json_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return response;
    }
    let code = code_for_status(status);
    let message = match code {
        ErrorCode::MethodNotAllowed => "method not allowed on this route",
        ErrorCode::NotFound => "no such route",
        _ => "request rejected",
    };
    let allow = response.headers().get(header::ALLOW).cloned();
    let mut rewritten = ApiError::new(code, message).into_response();
    *rewritten.status_mut() = status;
    if let Some(allow) = allow {
        rewritten.headers_mut().insert(header::ALLOW, allow);
    }
    rewritten
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    tracing::error!(event = "handler_panic");
    let mut response = ApiError::new(ErrorCode::Internal, "internal error").into_response();
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response
}

fn cors(origins: &[String]) -> CorsLayer {
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o.trim()).ok())
        .collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            HeaderName::from_static(crate::trace_context::TRACEPARENT),
            // L8's resume point, as browsers' EventSource sends it on reconnecting.
            HeaderName::from_static("last-event-id"),
            // L2, L3 and L5's session id, which never goes in the URL.
            HeaderName::from_static("lock-session-id"),
        ])
        .max_age(std::time::Duration::from_secs(600))
}
