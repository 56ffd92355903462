//! [`Counting`]: counts the calls passing through a transport to another one, per route,
//! and how many of them failed (an [`Intercept`]). The live sweep reads its L4 calls per
//! grant off it, the session-load run its heartbeat traffic; the SDK above it runs
//! unchanged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lock_wasm::transport::{Answer, Intercept, Intercepted, Outgoing, Route};
use lock_wasm::Transport;

const ROUTES: usize = 7;

/// Calls and failures per route.
#[derive(Default)]
pub struct Counting {
    calls: [AtomicU64; ROUTES],
    failures: [AtomicU64; ROUTES],
}

/// `inner`, with its calls counted.
pub fn counted(inner: impl Transport + 'static) -> Intercepted<Counting> {
    Intercepted::new(Arc::new(inner), Counting::default())
}

impl Counting {
    /// Calls of `route` sent so far (answered or not).
    pub fn calls(&self, route: Route) -> u64 {
        self.calls[route as usize].load(Ordering::Relaxed)
    }

    /// Calls of `route` that failed (any error).
    pub fn failures(&self, route: Route) -> u64 {
        self.failures[route as usize].load(Ordering::Relaxed)
    }
}

impl Intercept for Counting {
    async fn around<'a>(&'a self, call: Outgoing<'a>) -> Answer {
        let route = call.request().route() as usize;
        self.calls[route].fetch_add(1, Ordering::Relaxed);
        let answer = call.send().await;
        if answer.is_err() {
            self.failures[route].fetch_add(1, Ordering::Relaxed);
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::executor::block_on;
    use lock_api::{AcquireRequest, ErrorCode, OpenSessionRequest};
    use lock_wasm::{ScriptedTransport, SessionRef, TransportExt};

    use super::*;

    #[test]
    fn calls_and_failures_are_counted_per_route_and_passed_through() {
        let scripted = ScriptedTransport::new();
        scripted.push_acquire(Ok(ScriptedTransport::grant("k", "s1", 4, 1_000)));
        scripted.push_heartbeat(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
        let counting = counted(scripted.clone());
        let t = Duration::from_secs(1);
        block_on(async {
            let opened = counting
                .open_session(&OpenSessionRequest::default(), t)
                .await;
            assert_eq!(opened.unwrap().session_id, "s1");
            let request = AcquireRequest {
                value: None,
                mode: None,
                limit: None,
                session_id: "s1".into(),
                ttl_millis: None,
                wait_millis: None,
            };
            assert_eq!(
                counting
                    .acquire("k", &request, t)
                    .await
                    .unwrap()
                    .fencing_token,
                4
            );
            // The script's default L4 answer is 409.
            assert!(counting.acquire("k", &request, t).await.is_err());
            let s1 = SessionRef {
                id: "s1",
                holder_id: "h1",
            };
            assert!(counting.heartbeat(s1, t).await.is_err());
            assert!(counting.heartbeat(s1, t).await.is_ok());
        });
        assert_eq!(counting.intercept().calls(Route::OpenSession), 1);
        assert_eq!(
            (
                counting.intercept().calls(Route::Acquire),
                counting.intercept().failures(Route::Acquire)
            ),
            (2, 1)
        );
        assert_eq!(
            (
                counting.intercept().calls(Route::Heartbeat),
                counting.intercept().failures(Route::Heartbeat)
            ),
            (2, 1)
        );
        assert_eq!(counting.intercept().calls(Route::Release), 0);
        assert_eq!(
            scripted.acquire_calls(),
            2,
            "every call reached the inner transport"
        );
    }
}
