//! Mapping etcd failures to [`StoreError`]. The rule: anything that means "etcd cannot
//! accept writes now" is [`StoreError::StoreUnavailable`] with its cause (out of space, no
//! quorum, unreachable), so routes answer 503 STORE_UNAVAILABLE and clients retry; only
//! requests etcd calls malformed (a bug here) become [`StoreError::Internal`]. The
//! classification is [`classify`], a pure function of the gRPC code and message.

use etcd_client::Error;
use lock_api::Unavailability;

use crate::store::StoreError;

/// The retry hint of a replica that lost too many races against the others (ASSUMPTION:
/// about one etcd round trip under load; the SDK adds its own floor and jitter).
pub(super) const RETRY_AFTER_MILLIS: u64 = 200;

/// The retry hint of STORE_UNAVAILABLE by cause (ASSUMPTION: an election takes about
/// 200 ms at the default and test settings, an endpoint comes back or a balancer moves on in
/// about as long; freeing space takes an operator, so the client looks again each second,
/// the readiness probe's interval).
fn retry_after_millis(cause: Unavailability) -> u64 {
    match cause {
        Unavailability::SpaceExceeded => 1_000,
        _ => 200,
    }
}

/// gRPC status codes (the gRPC spec numbers them; `tonic` is not a direct dependency) that
/// mean our request was wrong rather than etcd unavailable.
const INVALID_ARGUMENT: i32 = 3;
const OUT_OF_RANGE: i32 = 11;
const UNIMPLEMENTED: i32 = 12;
const DEADLINE_EXCEEDED: i32 = 4;
const UNAVAILABLE: i32 = 14;
const RESOURCE_EXHAUSTED: i32 = 8;

/// A 503 NOT_LEADER for a replica that lost too many races on one key against the other
/// replicas (about this replica's attempts, not the store: etcd itself answered).
pub(super) fn raced(reason: impl Into<String>) -> StoreError {
    StoreError::Unavailable {
        reason: reason.into(),
        leader: None,
        retry_after_millis: Some(RETRY_AFTER_MILLIS),
    }
}

/// A 503 STORE_UNAVAILABLE for `cause`.
pub(super) fn store_unavailable(cause: Unavailability) -> StoreError {
    StoreError::StoreUnavailable {
        cause,
        retry_after_millis: retry_after_millis(cause),
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
        Error::GRpcStatus(status) => {
            store_unavailable(classify(Some(status.code() as i32), status.message()))
        }
        // `EtcdStore::call`'s own timeout: the connection was there, the answer was not,
        // which is what a member without quorum does (it cannot commit).
        Error::IoError(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            store_unavailable(Unavailability::NoQuorum)
        }
        other => store_unavailable(classify(None, &other.to_string())),
    }
}

/// Why etcd could not write, from a gRPC status code (`None`: the client failed before any
/// status, e.g. no connection) and the error's message:
/// - "database space exceeded" (the NOSPACE alarm, RESOURCE_EXHAUSTED): `space_exceeded`;
/// - no leader, leader changed, "request timed out" (etcd's own, for lack of quorum),
///   DEADLINE_EXCEEDED: `no_quorum`;
/// - anything else (connection refused or reset, DNS, an UNAVAILABLE without those words):
///   `unreachable`.
pub fn classify(code: Option<i32>, message: &str) -> Unavailability {
    let message = message.to_ascii_lowercase();
    if code == Some(RESOURCE_EXHAUSTED)
        || message.contains("database space exceeded")
        || message.contains("nospace")
    {
        return Unavailability::SpaceExceeded;
    }
    let no_quorum = [
        "no leader",
        "leader changed",
        "request timed out",
        "timeout expired",
    ];
    if code == Some(DEADLINE_EXCEEDED) || no_quorum.iter().any(|m| message.contains(m)) {
        return Unavailability::NoQuorum;
    }
    Unavailability::Unreachable
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_failures_are_classified_by_code_and_message() {
        let cases = [
            (
                Some(RESOURCE_EXHAUSTED),
                "etcdserver: mvcc: database space exceeded",
            ),
            (None, "grpc status: database space exceeded"),
        ];
        for (code, message) in cases {
            assert_eq!(
                classify(code, message),
                Unavailability::SpaceExceeded,
                "{message}"
            );
        }
        let cases = [
            (Some(UNAVAILABLE), "etcdserver: no leader"),
            (Some(UNAVAILABLE), "etcdserver: request timed out"),
            (
                Some(UNAVAILABLE),
                "etcdserver: request timed out, possibly due to previous leader failure",
            ),
            (Some(UNAVAILABLE), "etcdserver: leader changed"),
            (Some(DEADLINE_EXCEEDED), "context deadline exceeded"),
            (Some(4), "Timeout expired"),
        ];
        for (code, message) in cases {
            assert_eq!(
                classify(code, message),
                Unavailability::NoQuorum,
                "{message}"
            );
        }
        let cases = [
            (
                Some(UNAVAILABLE),
                "tcp connect error: Connection refused (os error 111)",
            ),
            (None, "transport error"),
            (None, "dns error: failed to lookup address information"),
            (
                Some(UNAVAILABLE),
                "error trying to connect: No route to host",
            ),
        ];
        for (code, message) in cases {
            assert_eq!(
                classify(code, message),
                Unavailability::Unreachable,
                "{message}"
            );
        }
    }

    #[test]
    fn a_timeout_of_the_call_is_no_quorum_and_a_bad_request_is_internal() {
        let timed_out = Error::IoError(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "etcd request timed out",
        ));
        assert!(matches!(
            from_etcd(timed_out),
            StoreError::StoreUnavailable {
                cause: Unavailability::NoQuorum,
                ..
            }
        ));
        let refused = Error::IoError(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused",
        ));
        assert!(matches!(
            from_etcd(refused),
            StoreError::StoreUnavailable {
                cause: Unavailability::Unreachable,
                ..
            }
        ));
        assert!(matches!(
            from_etcd(Error::InvalidArgs("bad".into())),
            StoreError::Internal(_)
        ));
    }
}
