//! The SDK's trace spans through `tracing` (feature `native`, non-wasm targets), named and
//! shaped like the npm package's OpenTelemetry spans (C4, "Client spans"):
//!
//! - `lock.acquire`, one per acquire, a child of the caller's current span: `lock.key`,
//!   `lock.acquire.attempts` (L4 requests sent), `lock.acquire.waited_ms`,
//!   `lock.acquire.outcome` (`granted`, `nested`, `not_granted`, `error`, `cancelled`),
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
    /// Already held by this session: a nested hold, no request.
    Nested,
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
            Outcome::Nested => "nested",
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

#[cfg(all(test, not(target_arch = "wasm32")))]
#[cfg(feature = "native")]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex, Once};
    use std::time::Duration;

    use futures::FutureExt;
    use lock_api::{ErrorCode, HeartbeatResponse, LockGrant};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::subscriber::Interest;
    use tracing::{Event, Instrument, Metadata, Subscriber};
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
    use tracing_subscriber::registry::LookupSpan;

    use crate::clock::Clock;
    use crate::test_support::Fixture;
    use crate::transport::ScriptedTransport;

    /// One span as the capturing layer saw it.
    #[derive(Debug, Default, Clone)]
    struct Captured {
        name: &'static str,
        id: u64,
        parent: Option<u64>,
        fields: BTreeMap<String, String>,
        events: Vec<(&'static str, BTreeMap<String, String>)>,
        closed: bool,
    }

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<Captured>>>);

    struct Fields<'a>(&'a mut BTreeMap<String, String>);

    impl Visit for Fields<'_> {
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().into(), value.into());
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.insert(field.name().into(), format!("{value:?}"));
        }
    }

    impl Capture {
        fn with(&self, id: &Id, f: impl FnOnce(&mut Captured)) {
            let mut spans = self.0.lock().unwrap();
            if let Some(span) = spans.iter_mut().find(|s| s.id == id.into_u64()) {
                f(span);
            }
        }

        fn named(&self, name: &str) -> Vec<Captured> {
            let spans = self.0.lock().unwrap();
            spans.iter().filter(|s| s.name == name).cloned().collect()
        }
    }

    impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
            let mut span = Captured {
                name: attrs.metadata().name(),
                id: id.into_u64(),
                parent: ctx
                    .span(id)
                    .and_then(|s| s.parent())
                    .map(|p| p.id().into_u64()),
                ..Captured::default()
            };
            attrs.record(&mut Fields(&mut span.fields));
            self.0.lock().unwrap().push(span);
        }

        fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
            self.with(id, |span| values.record(&mut Fields(&mut span.fields)));
        }

        fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
            if let Some(parent) = ctx.event_span(event) {
                let mut fields = BTreeMap::new();
                event.record(&mut Fields(&mut fields));
                let name = event.metadata().name();
                self.with(&parent.id(), |span| span.events.push((name, fields)));
            }
        }

        fn on_close(&self, id: Id, _: Context<'_, S>) {
            self.with(&id, |span| span.closed = true);
        }
    }

    /// The test binary's global subscriber: it records nothing and answers `sometimes` for
    /// every callsite, so whether a span is recorded is asked of the subscriber of the
    /// thread that creates it.
    ///
    /// Without it, while exactly one dispatcher is registered (one capturing test running),
    /// tracing-core takes a callsite's interest from the subscriber of whichever thread
    /// reaches it first. A parallel test with no subscriber that reaches `lock.acquire`
    /// first then caches "never" for it, and the capturing test sees no span at all.
    struct Undecided;

    impl Subscriber for Undecided {
        fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
            Interest::sometimes()
        }
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            false
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            unreachable!("never enabled")
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// A capturing subscriber, the default on this thread while the guard lives.
    fn capture() -> (Capture, tracing::subscriber::DefaultGuard) {
        static GLOBAL: Once = Once::new();
        // Before any dispatcher exists tracing registers no callsite (its max level is
        // OFF), so installing this first means no callsite's interest is ever taken from a
        // thread without a subscriber.
        GLOBAL.call_once(|| {
            tracing::subscriber::set_global_default(Undecided)
                .expect("only these tests set a global subscriber")
        });
        let capture = Capture::default();
        let subscriber = tracing_subscriber::registry().with(capture.clone());
        (capture, tracing::subscriber::set_default(subscriber))
    }

    fn grant(key: &str, token: u64) -> LockGrant {
        ScriptedTransport::grant(key, "s1", token, 10_000)
    }

    /// An acquire that waits (one 409, then a grant) inside a caller's span, a nested
    /// acquire of the same key, the release; then a lock lost when a heartbeat no longer
    /// lists it. Every span has the names, fields and parents of C4's client spans.
    #[test]
    fn acquire_and_hold_spans_have_their_fields_and_parents() {
        let (capture, _default) = capture();
        let f = Fixture::new();
        let session = f.session();
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::LockContended)));
        f.transport.push_acquire(Ok(grant("k", 5)));
        f.transport.push_release(Ok(()));
        let started = f.clock.now();
        let s = session.clone();
        let job = tracing::info_span!("job");
        f.run(
            async move {
                let outer = s.acquire_default("k").await.unwrap().unwrap();
                let inner = s.acquire_default("k").await.unwrap().unwrap();
                s.release(&inner).await.unwrap();
                s.release(&outer).await.unwrap();
            }
            .instrument(job),
        );
        let job = capture.named("job")[0].id;
        let acquires = capture.named("lock.acquire");
        assert_eq!(acquires.len(), 2, "{acquires:#?}");
        let (first, nested) = (&acquires[0], &acquires[1]);
        assert_eq!(first.parent, Some(job));
        assert_eq!(first.fields["lock.key"], "k");
        assert_eq!(first.fields["lock.acquire.attempts"], "2");
        assert_eq!(first.fields["lock.acquire.outcome"], "granted");
        assert_eq!(first.fields["lock.fencing_token"], "5");
        let waited: f64 = first.fields["lock.acquire.waited_ms"].parse().unwrap();
        assert!(waited > 0.0, "the 409 was followed by a backoff sleep");
        assert!(waited <= (f.clock.now() - started).as_secs_f64() * 1000.0);
        assert!(!first.fields.contains_key("otel.status_code"));
        assert!(first.closed);
        assert_eq!(nested.parent, Some(job));
        assert_eq!(nested.fields["lock.acquire.outcome"], "nested");
        assert_eq!(nested.fields["lock.acquire.attempts"], "0");

        let holds = capture.named("lock.hold");
        assert_eq!(holds.len(), 1, "one hold per grant: {holds:#?}");
        let hold = &holds[0];
        assert_eq!(hold.parent, Some(first.id), "a hold is its acquire's child");
        assert_eq!(hold.fields["lock.key"], "k");
        assert_eq!(hold.fields["lock.fencing_token"], "5");
        assert_eq!(hold.fields["lock.hold.end_reason"], "released");
        assert!(hold.events.is_empty() && !hold.fields.contains_key("otel.status_code"));
        assert!(hold.closed, "ended on release");

        // A heartbeat that no longer lists the lock: the hold ends as a loss.
        f.transport.push_acquire(Ok(grant("lost", 6)));
        f.transport.push_heartbeat(Ok(HeartbeatResponse {
            ttl_millis: 15_000,
            locks: Vec::new(),
        }));
        let s = session.clone();
        let handle = f.run(async move { s.acquire_default("lost").await.unwrap().unwrap() });
        let hold = || capture.named("lock.hold").pop().unwrap();
        assert!(!hold().closed, "open while held");
        f.clock.advance(Duration::from_secs(5));
        f.run(async {});
        assert!(handle.is_lost());
        let hold = hold();
        assert_eq!(hold.fields["lock.fencing_token"], "6");
        assert_eq!(hold.fields["lock.hold.end_reason"], "notInHeartbeat");
        assert_eq!(hold.fields["otel.status_code"], "ERROR");
        assert_eq!(hold.events.len(), 1, "{hold:#?}");
        let (name, fields) = &hold.events[0];
        assert_eq!(*name, "lock.lost");
        assert_eq!(fields["lock.lost.reason"], "notInHeartbeat");
        // The handle still exists; the span closed with the loss, not with the handle.
        assert!(hold.closed);
        drop(handle);
    }

    /// A callsite first reached on a thread with no subscriber, while this thread captures,
    /// still reaches the capture here: the harness above does not depend on which test
    /// thread reaches a span first.
    #[test]
    fn a_span_first_reached_elsewhere_is_still_captured() {
        let (capture, _default) = capture();
        let elsewhere = || tracing::info_span!("lock.test.first_elsewhere");
        std::thread::spawn(move || drop(elsewhere()))
            .join()
            .unwrap();
        drop(elsewhere());
        let spans = capture.named("lock.test.first_elsewhere");
        assert_eq!(spans.len(), 1, "{spans:#?}");
    }

    /// An acquire dropped mid-wait records `cancelled`; one that fails records `error`.
    #[test]
    fn cancelled_and_failed_acquires_say_so() {
        let (capture, _default) = capture();
        let f = Fixture::new();
        let session = f.session();
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::LockContended)));
        let s = session.clone();
        // Polled once: the 409 arrives at once, then the acquire sleeps and is dropped.
        let pending = f.run(async move { s.acquire_default("k").now_or_never().is_none() });
        assert!(pending);
        let s = session.clone();
        let invalid = f.run(async move { s.acquire_default("").await });
        assert!(invalid.is_err());
        let acquires = capture.named("lock.acquire");
        assert_eq!(acquires[0].fields["lock.acquire.outcome"], "cancelled");
        assert_eq!(acquires[1].fields["lock.acquire.outcome"], "error");
        assert_eq!(acquires[1].fields["error.type"], "VALIDATION_FAILED");
        assert_eq!(acquires[1].fields["otel.status_code"], "ERROR");
    }
}
