//! The `lock.acquire` and `lock.hold` spans (feature `native`) as a subscriber sees them.
#![cfg(not(target_arch = "wasm32"))]
// Scripted answers are `Result<_, TransportError>`, the seam's own type (see the crate root).
#![allow(clippy::result_large_err)]

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

use lock_wasm::clock::Clock;
use lock_wasm::test_support::Fixture;
use lock_wasm::transport::ScriptedTransport;

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

/// An acquire that waits (one 409, then a grant) inside a caller's span, a hold nested
/// through its handle (no span: no acquire), the release; then a lock lost when a heartbeat no longer
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
            let inner = outer.nest().unwrap();
            s.release(&inner).await.unwrap();
            s.release(&outer).await.unwrap();
        }
        .instrument(job),
    );
    let job = capture.named("job")[0].id;
    let acquires = capture.named("lock.acquire");
    assert_eq!(acquires.len(), 1, "{acquires:#?}");
    let first = &acquires[0];
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
    f.transport
        .push_heartbeat(Ok(HeartbeatResponse::full(15_000, None, Vec::new())));
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
