//! What HTTP does with each call of contract C3, stated once for both HTTP transports
//! (`native::HttpTransport` on reqwest, the wasm `FetchTransport` on `fetch`): a
//! [`Request`]'s method, path and body, which answer type a 2xx body is read as, and the
//! status mapping ([`http_answer`]).
//!
//! JSON is each transport's own: natively serde_json; in wasm the platform's `JSON.parse` and
//! the hand-written readers and writers of `wasm/wire.rs`, so the npm module carries no
//! second JSON parser. So a transport writes [`Body`] itself and reads answers through its
//! [`ReadJson`].

use lock_api::{
    paths, AcquireRequest, ErrorBody, EventBatch, HeartbeatRequest, HeartbeatResponse, LockGrant,
    LockState, OpenSessionRequest, ProclaimRequest, ReleaseRequest, SessionOpened, SessionStatus,
};
use serde::Serialize;

use super::{Reply, Request, Route};
use crate::error::TransportError;

/// The answer mapping every HTTP transport shares: a 2xx answer passes its body text on to
/// be decoded as the success type; any other status becomes a [`TransportError`] via
/// [`TransportError::from_status_with`], with `decode_error` reading the contract error body
/// (each transport brings its own JSON decoder).
pub fn http_answer(
    status: u16,
    body_text: &str,
    decode_error: impl FnOnce(&str) -> Option<ErrorBody>,
) -> Result<&str, TransportError> {
    if (200..300).contains(&status) {
        Ok(body_text)
    } else {
        Err(TransportError::from_status_with(
            status,
            body_text,
            decode_error,
        ))
    }
}

/// The HTTP methods of contract C3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// L5, L7, L8.
    Get,
    /// L1, L2, L4, L6, L9.
    Post,
    /// L3.
    Delete,
}

impl Method {
    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

/// A request's JSON body (L1, L2 with `since`, L4, L6, L9). Serializes as the request itself (serde, for the
/// native transport; the wasm transport writes its own).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Body<'a> {
    /// L1's.
    OpenSession(&'a OpenSessionRequest),
    /// L2's, when it carries `since`.
    Heartbeat(&'a HeartbeatRequest),
    /// L4's.
    Acquire(&'a AcquireRequest),
    /// L6's.
    Release(&'a ReleaseRequest),
    /// L9's.
    Proclaim(&'a ProclaimRequest),
}

/// A transport's JSON reader of one answer type; the error is a short reason, which becomes
/// a [`TransportError::Decode`].
pub trait ReadJson<T> {
    /// Reads `text`, a 2xx answer's body.
    fn read(&self, text: &str) -> Result<T, String>;
}

impl<'a> Request<'a> {
    /// The HTTP method.
    pub fn method(self) -> Method {
        match self.route() {
            Route::SessionStatus | Route::ReadLock | Route::Events => Method::Get,
            Route::CloseSession => Method::Delete,
            _ => Method::Post,
        }
    }

    /// The path, keys and holder ids percent-encoded by [`lock_api::paths`]; L8's with its
    /// query (`after` percent-encoded, `waitMillis`). Every request is sent with `Accept:
    /// application/json`, which makes L8 the long poll rather than a server-sent stream.
    pub fn path(self) -> String {
        match self {
            Request::OpenSession(_) => paths::SESSIONS.to_owned(),
            Request::Heartbeat(session, _) => paths::heartbeat(session.holder_id),
            Request::CloseSession(session) | Request::SessionStatus(session) => {
                paths::session(session.holder_id)
            }
            Request::Acquire(key, _) => paths::acquire(key),
            Request::Release(key, _) => paths::release(key),
            Request::ReadLock(key) => paths::lock(key),
            Request::Events {
                key,
                after,
                wait_millis,
            } => {
                let mut path = paths::events(key);
                path.push_str(&format!("?waitMillis={wait_millis}"));
                if let Some(after) = after {
                    path.push_str("&after=");
                    path.push_str(&query_encode(after));
                }
                path
            }
            Request::Proclaim(key, _) => paths::value(key),
        }
    }

    /// The session id to send in the [`paths::SESSION_ID_HEADER`] header: L2's, L3's and
    /// L5's (their path names the session by its holder id).
    pub fn session_header(self) -> Option<&'a str> {
        match self {
            Request::Heartbeat(session, _)
            | Request::CloseSession(session)
            | Request::SessionStatus(session) => Some(session.id),
            _ => None,
        }
    }

    /// The JSON body, for L1, L4, L6 and L9, and L2 with `since` (without it, no body: the
    /// bytes a client before versions sent).
    pub fn body(self) -> Option<Body<'a>> {
        match self {
            Request::OpenSession(body) => Some(Body::OpenSession(body)),
            Request::Heartbeat(_, body) if body.since.is_some() => Some(Body::Heartbeat(body)),
            Request::Acquire(_, body) => Some(Body::Acquire(body)),
            Request::Release(_, body) => Some(Body::Release(body)),
            Request::Proclaim(_, body) => Some(Body::Proclaim(body)),
            _ => None,
        }
    }

    /// Reads a 2xx answer's body `text` with `json` as the call's answer type (L3, L6 and
    /// L9 answer 204: their body is not read).
    pub fn read_reply<J>(self, text: &str, json: &J) -> Result<Reply, TransportError>
    where
        J: ReadJson<SessionOpened>
            + ReadJson<HeartbeatResponse>
            + ReadJson<LockGrant>
            + ReadJson<SessionStatus>
            + ReadJson<LockState>
            + ReadJson<EventBatch>,
    {
        let reply = match self.route() {
            Route::OpenSession => json.read(text).map(Reply::Opened),
            Route::Heartbeat => json.read(text).map(Reply::Renewed),
            Route::CloseSession | Route::Release | Route::Proclaim => Ok(Reply::Done),
            Route::Acquire => json.read(text).map(Reply::Granted),
            Route::SessionStatus => json.read(text).map(Reply::Status),
            Route::ReadLock => json.read(text).map(Reply::Lock),
            Route::Events => json.read(text).map(Reply::Events),
        };
        reply.map_err(TransportError::Decode)
    }
}

/// `text` percent-encoded for a query value: every byte but the unreserved ones (RFC 3986),
/// so an opaque event id travels back exactly as the server gave it.
fn query_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::SessionRef;
    use super::*;
    use lock_api::ErrorCode;

    fn json_body(text: &str) -> Option<ErrorBody> {
        serde_json::from_str(text).ok()
    }

    #[test]
    fn a_2xx_answer_passes_its_body_on() {
        assert_eq!(http_answer(200, "{\"a\":1}", json_body), Ok("{\"a\":1}"));
        assert_eq!(http_answer(204, "", json_body), Ok(""));
    }

    #[test]
    fn other_statuses_map_through_the_decoder_or_the_fallback() {
        let contract = r#"{"code":"LOCK_CONTENDED","message":"held"}"#;
        let err = http_answer(409, contract, json_body).unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::LockContended));
        // Not the lock service's answer: no contract code, and never the page as a message.
        let err = http_answer(500, "<html>oops</html>", json_body).unwrap_err();
        assert!(
            matches!(err, TransportError::Unexpected { status: 500, .. }),
            "{err:?}"
        );
        assert!(!err.to_string().contains("html"), "{err}");
        // A balancer's page in front of an unreachable service: as if nothing answered.
        let err = http_answer(502, "<html>bad gateway</html>", json_body).unwrap_err();
        assert!(matches!(err, TransportError::Network(_)), "{err:?}");
        assert!(!err.to_string().contains("html"), "{err}");
        let err = http_answer(503, "", json_body).unwrap_err();
        assert!(matches!(err, TransportError::Network(_)), "{err:?}");
        // The transport's decoder decides what counts as a contract body.
        let err = http_answer(409, contract, |_| None).unwrap_err();
        assert!(
            matches!(err, TransportError::Unexpected { status: 409, .. }),
            "{err:?}"
        );
    }

    /// serde_json, as the native transport reads.
    struct Serde;

    impl<T: serde::de::DeserializeOwned> ReadJson<T> for Serde {
        fn read(&self, text: &str) -> Result<T, String> {
            serde_json::from_str(text).map_err(|e| e.to_string())
        }
    }

    #[test]
    fn each_call_has_its_method_path_body_and_answer_type() {
        let acquire = AcquireRequest {
            value: None,
            session_id: "s1".into(),
            ttl_millis: Some(5_000),
            wait_millis: None,
            mode: None,
            limit: None,
        };
        let l4 = Request::Acquire("a/b", &acquire);
        assert_eq!(
            (l4.method(), l4.path().as_str()),
            (Method::Post, "/v1/locks/a%2Fb/acquire")
        );
        let body = serde_json::to_string(&l4.body()).unwrap();
        assert_eq!(body, r#"{"sessionId":"s1","ttlMillis":5000}"#);
        let grant =
            r#"{"key":"a/b","sessionId":"s1","fencingToken":3,"ttlMillis":5000,"waitedMillis":0}"#;
        let Ok(Reply::Granted(grant)) = l4.read_reply(grant, &Serde) else {
            panic!("not a grant");
        };
        assert_eq!(grant.fencing_token, 3);
        let session = SessionRef {
            id: "s1",
            holder_id: "h1",
        };
        let l3 = Request::CloseSession(session);
        assert_eq!(
            (l3.method(), l3.path().as_str(), l3.body()),
            (Method::Delete, "/v1/sessions/h1", None)
        );
        // The session id goes in the header, never in the URL.
        assert_eq!(l3.session_header(), Some("s1"));
        let l5 = Request::SessionStatus(session);
        assert_eq!(
            (l5.path().as_str(), l5.session_header()),
            ("/v1/sessions/h1", Some("s1"))
        );
        let l2 = Request::Heartbeat(session, &HeartbeatRequest { since: None });
        assert_eq!(
            (l2.path().as_str(), l2.session_header()),
            ("/v1/sessions/h1/heartbeat", Some("s1"))
        );
        assert_eq!(l3.read_reply("", &Serde), Ok(Reply::Done));
        let l7 = Request::ReadLock("k");
        assert_eq!(
            (l7.method(), l7.path()),
            (Method::Get, "/v1/locks/k".into())
        );
        let err = l7.read_reply("{}", &Serde).unwrap_err();
        assert!(matches!(err, TransportError::Decode(_)), "{err:?}");
    }

    #[test]
    fn the_long_poll_and_the_proclaim_have_their_method_path_and_body() {
        let resume = Request::Events {
            key: "a/b",
            after: Some("7-12 x&y"),
            wait_millis: 25_000,
        };
        assert_eq!(
            (resume.method(), resume.path().as_str(), resume.body()),
            (
                Method::Get,
                "/v1/locks/a%2Fb/events?waitMillis=25000&after=7-12%20x%26y",
                None
            )
        );
        let fresh = Request::Events {
            key: "k",
            after: None,
            wait_millis: 0,
        };
        assert_eq!(fresh.path(), "/v1/locks/k/events?waitMillis=0");
        let batch =
            r#"{"events":[{"id":"1","kind":"handedOff","key":"k","atMillis":5,"waiterCount":0}]}"#;
        let Ok(Reply::Events(batch)) = fresh.read_reply(batch, &Serde) else {
            panic!("not a batch");
        };
        assert_eq!(batch.events[0].kind, lock_api::EventKind::HandedOff);
        let proclaim = ProclaimRequest {
            session_id: "s1".into(),
            fencing_token: 3,
            value: "v".into(),
        };
        let l9 = Request::Proclaim("k", &proclaim);
        assert_eq!(
            (l9.method(), l9.path().as_str()),
            (Method::Post, "/v1/locks/k/value")
        );
        let body = serde_json::to_string(&l9.body()).unwrap();
        assert_eq!(body, r#"{"sessionId":"s1","fencingToken":3,"value":"v"}"#);
        assert_eq!(l9.read_reply("", &Serde), Ok(Reply::Done));
    }
}
