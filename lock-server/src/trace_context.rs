//! The W3C `traceparent` of a request, joined to its log lines (C4): a client that traces
//! its calls (the npm package does, with OpenTelemetry) can find the server's lines for a
//! span by its trace id.
//!
//! - [`TraceId::from_traceparent`] reads the header by the W3C Trace Context rules; a value
//!   that breaks them is ignored, as the rules require (never an error answer).
//! - [`scope`] (middleware) runs the request with its trace id in a task-local, so every log
//!   line emitted while handling it, in any module, can carry it without passing it around.
//! - [`WithTraceId`] (log format) writes that id as the `traceId` field of each such line.
//!
//! The server starts no spans of its own and exports nothing: the join a user needs is the
//! trace id in the log line, and OTLP export would bring an exporter stack (opentelemetry
//! SDK, OTLP over gRPC or HTTP) whose 0.x releases break their API every few months.

use std::fmt;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The request header (lowercase, as HTTP/2 spells it and `HeaderMap` matches any case).
pub const TRACEPARENT: &str = "traceparent";

/// A valid 16-byte trace id as its 32 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceId([u8; 32]);

impl TraceId {
    /// The trace id of a `traceparent` value (`00-<trace-id>-<parent-id>-<flags>`), or `None`
    /// when the value breaks the W3C rules: version `ff` or not two hex digits; version `00`
    /// with anything after the flags (a later version may append `-…` fields); a field of
    /// the wrong length or not lowercase hex; an all-zero trace id or parent id.
    pub fn from_traceparent(value: &str) -> Option<TraceId> {
        let b = value.as_bytes();
        if b.len() < 55 || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let (version, trace_id, parent_id, flags) = (&b[..2], &b[3..35], &b[36..52], &b[53..55]);
        let hex = |s: &[u8]| s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
        let zero = |s: &[u8]| s.iter().all(|&c| c == b'0');
        let valid_version = hex(version) && version != b"ff";
        let valid_tail = match b.len() {
            55 => true,
            _ => version != b"00" && b[55] == b'-',
        };
        let valid = valid_version
            && valid_tail
            && hex(trace_id)
            && !zero(trace_id)
            && hex(parent_id)
            && !zero(parent_id)
            && hex(flags);
        valid.then(|| TraceId(trace_id.try_into().expect("32 bytes")))
    }

    /// The 32 hex digits.
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits get in (see `from_traceparent`).
        std::str::from_utf8(&self.0).expect("ASCII")
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

tokio::task_local! {
    static TRACE_ID: TraceId;
}

/// The trace id of the request being handled on this task, if it sent a valid one.
pub fn current() -> Option<TraceId> {
    TRACE_ID.try_with(|id| *id).ok()
}

/// Middleware: handles the request with the trace id of its one valid `traceparent` (two
/// or more `traceparent` headers are invalid, like a malformed one) in scope.
pub async fn scope(request: Request, next: Next) -> Response {
    let mut values = request.headers().get_all(TRACEPARENT).iter();
    let trace_id = match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().ok().and_then(TraceId::from_traceparent),
        _ => None,
    };
    match trace_id {
        Some(id) => TRACE_ID.scope(id, next.run(request)).await,
        None => next.run(request).await,
    }
}

/// Wraps the JSON log format: a line written while a request with a trace id is handled
/// starts `{"traceId":"<32 hex>",…`; every other line is the inner format's unchanged.
pub struct WithTraceId<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for WithTraceId<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let Some(id) = current() else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{\"traceId\":\"{id}\",{rest}"),
            None => writer.write_str(&line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_yields_its_trace_id() {
        let id = TraceId::from_traceparent(VALID).unwrap();
        assert_eq!(id.as_str(), "4bf92f3577b34da6a3ce929d0e0e4736");
        // A later version may append fields after the flags.
        let future = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert_eq!(TraceId::from_traceparent(future), Some(id));
    }

    #[test]
    fn values_that_break_the_rules_are_ignored() {
        for bad in [
            "",
            "garbage",
            // Version 00 has nothing after the flags; version ff is forbidden.
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // Uppercase hex, an all-zero trace id or parent id, a wrong separator.
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // A later version whose extra part does not start with '-'.
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
            // Not hex: a log-injection attempt must not reach a log line.
            "00-4bf92f3577b34da6a3ce929d0e0e47\"}-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceId::from_traceparent(bad), None, "{bad:?}");
        }
    }
}
