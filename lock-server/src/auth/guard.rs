//! The guard every route passes (a route layer, so it runs after routing and before any
//! extractor): it finds the request's [`Caller`] for the route's [`Access`], refuses with 401
//! before a handler or a body parser sees the request, and counts and logs every refusal, its
//! own and the handlers' (403 for a key out of scope or R1 without rights).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lock_api::ErrorCode;

use super::bearer::{self, Presented};
use super::{Auth, Caller, Credential};
use crate::error::ApiError;
use crate::metrics::{Metrics, Refusal};

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, always: `/healthz`.
    Public,
    /// `/metrics`, `/openapi.json`: with an auth file, any known token (a client's or the
    /// admin token) unless `--public-ops`.
    Ops,
    /// The `/v1` client surfaces: with an auth file, a client's token.
    Client,
    /// R1: with an auth file, a client's token or the admin token; the handler then checks
    /// admin rights and the key.
    Admin,
}

/// The guard's state for one route.
#[derive(Clone)]
pub struct Guard {
    pub auth: Arc<Auth>,
    pub metrics: Arc<Metrics>,
    pub access: Access,
    /// The route's pattern, for log lines (never the concrete path: it may hold a session id).
    pub route: &'static str,
}

/// The middleware (`axum::middleware::from_fn_with_state` with a [`Guard`]).
pub async fn guard(State(guard): State<Guard>, mut req: Request, next: Next) -> Response {
    let (caller, response) = match guard.caller(&req) {
        Ok(caller) => {
            req.extensions_mut().insert(caller.clone());
            (Some(caller), next.run(req).await)
        }
        Err(refusal) => (None, refusal.into_response()),
    };
    guard.note_refusal(response.status(), caller.as_ref());
    response
}

impl Guard {
    fn caller(&self, req: &Request) -> Result<Caller, ApiError> {
        let open = match self.access {
            Access::Public => true,
            Access::Ops => self.auth.public_ops,
            Access::Client | Access::Admin => false,
        };
        if open || !self.auth.required() {
            return Ok(Caller::Anonymous);
        }
        let credential = match bearer::presented(req.headers()) {
            Presented::Token(token) => self.auth.identify(token),
            Presented::Nothing | Presented::Malformed => None,
        };
        match (credential, self.access) {
            (None, _) => Err(ApiError::new(
                ErrorCode::Unauthorized,
                "a known bearer token is required (Authorization: Bearer <token>)",
            )),
            (Some(Credential::AdminToken), Access::Client) => Err(ApiError::new(
                ErrorCode::Forbidden,
                "the admin token is for R1 only",
            )),
            (Some(Credential::AdminToken), _) => Ok(Caller::AdminToken),
            (Some(Credential::Client(client)), _) => Ok(Caller::Client(client)),
        }
    }

    /// Counts a 401 or 403 and logs it at info, naming the client, or `unknown` when no
    /// known token was presented (never a token or the path): during a token rotation the
    /// 401s are how an operator finds the callers still on a token already dropped. A flood
    /// of 401s cannot slow the server through its log: lines the sink cannot take are
    /// dropped and counted (`logging`).
    fn note_refusal(&self, status: StatusCode, caller: Option<&Caller>) {
        let client = caller.map_or("unknown", Caller::log_name);
        match status {
            StatusCode::UNAUTHORIZED => {
                self.metrics.count_refusal(Refusal::Unauthorized);
                tracing::info!(
                    event = "request_refused",
                    status = 401,
                    client = client,
                    route = self.route
                );
            }
            StatusCode::FORBIDDEN => {
                self.metrics.count_refusal(Refusal::Forbidden);
                tracing::info!(
                    event = "request_refused",
                    status = 403,
                    client = client,
                    route = self.route
                );
            }
            _ => {}
        }
    }
}
