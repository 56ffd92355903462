//! [`TraceContexts`]: the W3C `traceparent` each request of one session carries, as the npm
//! package's tracing hands them in.
//!
//! The tracing knows which span a request belongs to when the request's *call* starts (an
//! acquire's span, a hold's span at release, the span active at open or close), so it passes
//! that span's `traceparent` with the call and the transport looks it up per request here,
//! in Rust. Asking JS before every request instead cost a call into JS, two strings and a
//! path parse per request, traced or not. A session the application never traces holds
//! nothing here, and a request then costs one empty check.

use std::cell::RefCell;
use std::rc::Rc;

use crate::transport::Request;

/// One session's `traceparent`s; clones share them (the session and its transport).
#[derive(Clone, Default)]
pub struct TraceContexts(Rc<RefCell<Contexts>>);

#[derive(Default)]
struct Contexts {
    /// L1, the heartbeats, L5 and L7: the span active when the session was opened.
    session: Option<String>,
    /// L3: the span active at `close()`.
    closing: Option<String>,
    /// The calls in flight that name a key (L4 of an acquire, L6 of a release), oldest first.
    calls: Vec<KeyCall>,
    next_id: u64,
}

struct KeyCall {
    id: u64,
    kind: KeyCallKind,
    key: String,
    traceparent: String,
    /// Requests that carried it.
    sent: u32,
}

/// Which call of a key a `traceparent` is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyCallKind {
    /// `acquire`: its L4 requests.
    Acquire,
    /// `release`: its L6 request.
    Release,
}

impl TraceContexts {
    /// Sets the `traceparent` of the session's own requests (L1, heartbeats, L5, L7).
    pub fn set_session(&self, traceparent: Option<String>) {
        self.0.borrow_mut().session = traceparent;
    }

    /// Sets the `traceparent` of L3, for a `close()` traced in another span than the open.
    pub fn set_closing(&self, traceparent: Option<String>) {
        self.0.borrow_mut().closing = traceparent;
    }

    /// Registers `traceparent` for the requests of one acquire or release of `key` until
    /// the returned guard drops.
    pub fn scope(&self, kind: KeyCallKind, key: &str, traceparent: String) -> CallScope {
        let mut contexts = self.0.borrow_mut();
        let id = contexts.next_id;
        contexts.next_id += 1;
        contexts.calls.push(KeyCall {
            id,
            kind,
            key: key.to_owned(),
            traceparent,
            sent: 0,
        });
        CallScope {
            contexts: self.clone(),
            id,
        }
    }

    /// The `traceparent` `request` carries, if any; counts the request for its call's scope.
    pub fn for_request(&self, request: &Request<'_>) -> Option<String> {
        let mut contexts = self.0.borrow_mut();
        let kind = match request {
            Request::Acquire(..) => KeyCallKind::Acquire,
            Request::Release(..) => KeyCallKind::Release,
            Request::CloseSession(_) => {
                return contexts
                    .closing
                    .clone()
                    .or_else(|| contexts.session.clone())
            }
            _ => return contexts.session.clone(),
        };
        let key = request.key()?;
        let call = contexts
            .calls
            .iter_mut()
            .find(|call| call.kind == kind && call.key == key)?;
        call.sent += 1;
        Some(call.traceparent.clone())
    }
}

/// A call's `traceparent`, registered until dropped (the call settled or was cancelled).
pub struct CallScope {
    contexts: TraceContexts,
    id: u64,
}

impl CallScope {
    /// How many requests carried the call's `traceparent` so far (an acquire's L4 calls).
    pub fn sent(&self) -> u32 {
        let contexts = self.contexts.0.borrow();
        let call = contexts.calls.iter().find(|call| call.id == self.id);
        call.map_or(0, |call| call.sent)
    }
}

impl Drop for CallScope {
    fn drop(&mut self) {
        let mut contexts = self.contexts.0.borrow_mut();
        contexts.calls.retain(|call| call.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use lock_api::{AcquireRequest, ReleaseRequest};
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    const A: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const S: crate::transport::SessionRef<'static> = crate::transport::SessionRef {
        id: "s",
        holder_id: "h",
    };
    const B: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

    fn acquire(key: &str) -> (String, AcquireRequest) {
        let body = AcquireRequest {
            session_id: "s".into(),
            ttl_millis: None,
            wait_millis: None,
            value: None,
            mode: None,
            limit: None,
        };
        (key.to_owned(), body)
    }

    #[wasm_bindgen_test]
    fn a_call_carries_its_own_traceparent_until_its_scope_drops() {
        let traces = TraceContexts::default();
        traces.set_session(Some(B.into()));
        let (key, body) = acquire("k");
        let release = ReleaseRequest {
            fencing_token: 1,
            session_id: None,
        };
        {
            let scope = traces.scope(KeyCallKind::Acquire, "k", A.into());
            assert_eq!(scope.sent(), 0);
            assert_eq!(
                traces
                    .for_request(&Request::Acquire(&key, &body))
                    .as_deref(),
                Some(A)
            );
            assert_eq!(
                traces
                    .for_request(&Request::Acquire(&key, &body))
                    .as_deref(),
                Some(A)
            );
            assert_eq!(scope.sent(), 2, "each L4 of the call is counted");
            // The release of the same key and the acquire of another are not this call.
            assert_eq!(traces.for_request(&Request::Release(&key, &release)), None);
            let (other, body2) = acquire("other");
            assert_eq!(traces.for_request(&Request::Acquire(&other, &body2)), None);
            assert_eq!(scope.sent(), 2, "requests of other calls are not");
        }
        assert_eq!(traces.for_request(&Request::Acquire(&key, &body)), None);
        // The session's own requests carry the open's span; L3 the close's once set.
        assert_eq!(
            traces
                .for_request(&Request::Heartbeat(S, &Default::default()))
                .as_deref(),
            Some(B)
        );
        assert_eq!(
            traces.for_request(&Request::CloseSession(S)).as_deref(),
            Some(B)
        );
        traces.set_closing(Some(A.into()));
        assert_eq!(
            traces.for_request(&Request::CloseSession(S)).as_deref(),
            Some(A)
        );
    }

    #[wasm_bindgen_test]
    fn two_calls_of_one_key_go_oldest_first() {
        let traces = TraceContexts::default();
        let (key, body) = acquire("k");
        let first = traces.scope(KeyCallKind::Acquire, "k", A.into());
        let _second = traces.scope(KeyCallKind::Acquire, "k", B.into());
        assert_eq!(
            traces
                .for_request(&Request::Acquire(&key, &body))
                .as_deref(),
            Some(A)
        );
        drop(first);
        assert_eq!(
            traces
                .for_request(&Request::Acquire(&key, &body))
                .as_deref(),
            Some(B)
        );
    }
}
