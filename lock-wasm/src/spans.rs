//! The SDK's trace spans through `tracing` (feature `native`, non-wasm targets), named and
//! shaped like the npm package's OpenTelemetry spans (C4, "Client spans"):
//!
//! - `lock.acquire`, one per acquire, a child of the caller's current span: `lock.key`,
//!   `lock.acquire.attempts` (L4 requests sent), `lock.acquire.waited_ms`,
//!   `lock.acquire.outcome` (`granted`, `not_granted`, `error`, `cancelled`),
//!   `lock.fencing_token` when granted, `error.type` (the error code) on `error`.
//! - `lock.hold`, one per grant, a child of its `lock.acquire`: `lock.key`,
//!   `lock.fencing_token`, `lock.hold.end_reason` (`released`, `sessionClosed`, or the loss:
//!   `deadlinePassed`, `notInHeartbeat`, `sessionLost`). It closes when the grant ends; a
//!   loss is also a `lock.lost` event (field `lock.lost.reason`) and `otel.status_code =
//!   "ERROR"`, the field `tracing-opentelemetry` maps to the span status.
//!
//! Without the feature (the npm module, a Rust wasm app) the same calls compile to nothing,
//! so the core calls them unconditionally and the wasm carries no `tracing`.
//!
//! A leaf: it takes plain values, so `handle` and `acquire` can both use it.

pub(crate) use imp::{AcquireSpan, HoldSpan};

/// How an acquire ended, as `lock.acquire.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A new grant.
    Granted,
    /// The budget ran out without a grant.
    NotGranted,
    /// Failed with an error (its code in `error.type`).
    Error,
}

impl Outcome {
    #[cfg_attr(
        not(all(feature = "native", not(target_arch = "wasm32"))),
        allow(dead_code)
    )]
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Granted => "granted",
            Outcome::NotGranted => "not_granted",
            Outcome::Error => "error",
        }
    }
}

#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
mod imp {
    use std::future::Future;
    use std::sync::Mutex;
    use std::time::Duration;

    use tracing::field::Empty;
    use tracing::{Instrument, Span};

    use super::Outcome;

    /// The `lock.acquire` span of one acquire call. Dropped before [`AcquireSpan::finish`]
    /// (the caller dropped the acquire future), it records `cancelled`.
    pub(crate) struct AcquireSpan {
        span: Span,
        finished: bool,
    }

    impl AcquireSpan {
        /// Opens the span under the current one.
        pub(crate) fn start(key: &str) -> Self {
            let span = tracing::info_span!(
                "lock.acquire",
                lock.key = key,
                lock.acquire.attempts = 0u32,
                lock.acquire.waited_ms = Empty,
                lock.acquire.outcome = Empty,
                lock.fencing_token = Empty,
                "error.type" = Empty,
                otel.status_code = Empty,
            );
            AcquireSpan {
                span,
                finished: false,
            }
        }

        /// Runs `future` inside the span (so the hold span of its grant is its child).
        pub(crate) fn instrument<F: Future>(&self, future: F) -> impl Future<Output = F::Output> {
            future.instrument(self.span.clone())
        }

        /// Counts one more L4 request.
        pub(crate) fn attempt(&self, attempts: u32) {
            self.span.record("lock.acquire.attempts", attempts);
        }

        /// Records how the acquire ended and closes the span.
        pub(crate) fn finish(
            mut self,
            outcome: Outcome,
            waited: Duration,
            fencing_token: Option<u64>,
            error_code: Option<&str>,
        ) {
            self.finished = true;
            let span = &self.span;
            span.record("lock.acquire.outcome", outcome.as_str());
            span.record("lock.acquire.waited_ms", waited.as_secs_f64() * 1000.0);
            if let Some(token) = fencing_token {
                span.record("lock.fencing_token", token);
            }
            if let Some(code) = error_code {
                span.record("error.type", code);
                span.record("otel.status_code", "ERROR");
            }
        }
    }

    impl Drop for AcquireSpan {
        fn drop(&mut self) {
            if !self.finished {
                self.span.record("lock.acquire.outcome", "cancelled");
            }
        }
    }

    /// The `lock.hold` span of one grant, kept by its handle until the grant ends.
    pub(crate) struct HoldSpan(Mutex<Option<Span>>);

    impl HoldSpan {
        /// Opens the span under the current one (the grant's `lock.acquire`).
        pub(crate) fn start(key: &str, fencing_token: u64) -> Self {
            let span = tracing::info_span!(
                "lock.hold",
                lock.key = key,
                lock.fencing_token = fencing_token,
                lock.hold.end_reason = Empty,
                otel.status_code = Empty,
                otel.status_message = Empty,
            );
            HoldSpan(Mutex::new(Some(span)))
        }

        /// Ends the hold for `reason` (`released`, ... see the module docs); a loss the owner
        /// did not ask for (`by_owner` false) is an event and an error status. Only the
        /// first call counts.
        pub(crate) fn end(&self, reason: &str, by_owner: bool) {
            let Some(span) = self.0.lock().unwrap().take() else {
                return;
            };
            span.record("lock.hold.end_reason", reason);
            if !by_owner {
                tracing::warn!(name: "lock.lost", parent: &span, { lock.lost.reason = reason }, "lock lost");
                span.record("otel.status_code", "ERROR");
                span.record("otel.status_message", format!("lock lost: {reason}"));
            }
        }
    }
}

#[cfg(not(all(feature = "native", not(target_arch = "wasm32"))))]
mod imp {
    use std::future::Future;
    use std::time::Duration;

    use super::Outcome;

    /// No-op: this build has no `tracing`.
    pub(crate) struct AcquireSpan;

    impl AcquireSpan {
        pub(crate) fn start(_key: &str) -> Self {
            AcquireSpan
        }

        pub(crate) fn instrument<F: Future>(&self, future: F) -> F {
            future
        }

        pub(crate) fn attempt(&self, _attempts: u32) {}

        pub(crate) fn finish(
            self,
            _outcome: Outcome,
            _waited: Duration,
            _fencing_token: Option<u64>,
            _error_code: Option<&str>,
        ) {
        }
    }

    /// No-op: this build has no `tracing`.
    pub(crate) struct HoldSpan;

    impl HoldSpan {
        pub(crate) fn start(_key: &str, _fencing_token: u64) -> Self {
            HoldSpan
        }

        pub(crate) fn end(&self, _reason: &str, _by_owner: bool) {}
    }
}
