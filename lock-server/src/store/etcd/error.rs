//! Mapping etcd failures to [`StoreError`]. The rule: anything that means "etcd cannot
//! answer now" (no leader, no quorum, unreachable, timed out, overloaded) is
//! [`StoreError::Unavailable`], so routes answer 503 NOT_LEADER and clients retry; only
//! requests etcd calls malformed (a bug here) become [`StoreError::Internal`].

use etcd_client::Error;

use crate::store::StoreError;

/// The retry hint sent with NOT_LEADER (ASSUMPTION: about one etcd election at the default
/// and test settings; the SDK adds its own floor and jitter).
pub(super) const RETRY_AFTER_MILLIS: u64 = 200;

/// gRPC status codes (the gRPC spec numbers them; `tonic` is not a direct dependency) that
/// mean our request was wrong rather than etcd unavailable.
const INVALID_ARGUMENT: i32 = 3;
const OUT_OF_RANGE: i32 = 11;
const UNIMPLEMENTED: i32 = 12;
const DEADLINE_EXCEEDED: i32 = 4;
const UNAVAILABLE: i32 = 14;

/// A 503 with the given reason.
pub(super) fn unavailable(reason: impl Into<String>) -> StoreError {
    StoreError::Unavailable {
        reason: reason.into(),
        leader: None,
        retry_after_millis: Some(RETRY_AFTER_MILLIS),
    }
}

/// Classifies an etcd client error.
pub(super) fn from_etcd(error: Error) -> StoreError {
    match &error {
        Error::GRpcStatus(status)
            if [INVALID_ARGUMENT, OUT_OF_RANGE, UNIMPLEMENTED]
                .contains(&(status.code() as i32)) =>
        {
            StoreError::Internal(format!("etcd rejected a request: {error}"))
        }
        Error::InvalidArgs(_) | Error::InvalidUri(_) | Error::Utf8Error(_) => {
            StoreError::Internal(format!("etcd client: {error}"))
        }
        _ => unavailable(format!("etcd unavailable: {error}")),
    }
}

/// Whether a put with a lease or a keep-alive failed because the lease is gone (the session
/// expired or was closed between our read and our write).
pub(super) fn is_lease_gone(error: &Error) -> bool {
    match error {
        Error::GRpcStatus(status) => status.message().contains("requested lease not found"),
        Error::LeaseKeepAliveError(message) => message.contains("lease not found"),
        _ => false,
    }
}

/// Whether a read at a revision (or a watch from one) asked for history etcd no longer has
/// (compacted) or does not have yet (a future revision).
pub(super) fn is_out_of_range(error: &Error) -> bool {
    match error {
        Error::GRpcStatus(status) => {
            status.code() as i32 == OUT_OF_RANGE
                || status.message().contains("compacted")
                || status.message().contains("future revision")
        }
        _ => false,
    }
}

/// Whether the connection broke under the request (reset, broken pipe, closed: tonic's
/// "transport error"), as opposed to etcd answering, the request timing out, or no
/// connection being made at all (a member that is down refuses the second try too, and
/// [`never_applied`] already moves such a request to the next member).
pub(super) fn is_connection_lost(error: &Error) -> bool {
    match error {
        Error::IoError(io) => io.kind() != std::io::ErrorKind::TimedOut,
        Error::TransportError(_) => true,
        Error::GRpcStatus(status) => status.message().contains("transport error"),
        _ => false,
    }
}

/// Whether the endpoint itself failed (unreachable, timed out, cut off from its leader), so
/// another member should be tried next.
pub(super) fn is_endpoint_failure(error: &Error) -> bool {
    match error {
        Error::IoError(_) | Error::TransportError(_) => true,
        Error::GRpcStatus(status) => {
            let message = status.message();
            status.code() as i32 == UNAVAILABLE
                || status.code() as i32 == DEADLINE_EXCEEDED
                || message.contains("no leader")
                || message.contains("Timeout expired")
        }
        _ => false,
    }
}

/// Whether the request certainly never reached etcd's replicated log, so re-sending it to
/// another member cannot apply it twice: the connection was refused, or the member rejected
/// it up front for having no leader (`require_leader`).
pub(super) fn never_applied(error: &Error) -> bool {
    match error {
        Error::GRpcStatus(status) => {
            let message = status.message();
            message.contains("tcp connect error") || message.contains("no leader")
        }
        _ => false,
    }
}
