//! What `exec` asks for: the key exclusively (the default), or a shared hold beside other
//! shared holders (`--shared`: a read-write lock's reader; with `--limit N` one of N permits
//! of a counting semaphore).

use std::time::Duration;

use lock_api::HoldKind;
use lock_wasm::{AcquirePolicy, LockClientSession, LockError, LockHandle};

use crate::exit::Failure;

/// The hold asked for by `--shared` and `--limit` (clap lets `--limit` come only with
/// `--shared`); its limit is checked here, before anything is sent.
pub fn from_flags(shared: bool, limit: Option<u32>) -> Result<HoldKind, Failure> {
    let mode = shared.then_some(lock_api::LockMode::Shared);
    lock_api::limits::validate_hold(mode, limit)
        .map_err(|rule| Failure::usage(format!("--limit {rule}")))
}

/// One acquire of `hold` on `key`. An error is the SDK's; `Ok(None)` is not granted within
/// the policy's budget.
pub async fn acquire(
    session: &LockClientSession,
    key: &str,
    hold: HoldKind,
    ttl: Duration,
    policy: &AcquirePolicy,
) -> Result<Option<LockHandle>, AcquireError> {
    match hold {
        HoldKind::Exclusive => Ok(session.acquire(key, ttl, policy).await?),
        HoldKind::Shared { .. } => Err(AcquireError::SharedUnsupported),
    }
}

/// Why an acquire failed.
#[derive(Debug)]
pub enum AcquireError {
    /// The SDK's error.
    Lock(LockError),
    /// This build's SDK takes exclusive holds only.
    SharedUnsupported,
}

impl From<LockError> for AcquireError {
    fn from(error: LockError) -> Self {
        AcquireError::Lock(error)
    }
}

/// The words for [`AcquireError::SharedUnsupported`].
pub const SHARED_UNSUPPORTED: &str = "shared holds need an SDK with shared acquires \
     (LockClientSession::acquire_hold); this lockctl was built with exclusive holds only";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_make_the_hold() {
        assert_eq!(from_flags(false, None), Ok(HoldKind::Exclusive));
        assert_eq!(from_flags(true, None), Ok(HoldKind::Shared { limit: None }));
        assert_eq!(
            from_flags(true, Some(3)),
            Ok(HoldKind::Shared { limit: Some(3) })
        );
        assert_eq!(
            from_flags(true, Some(0)).map_err(|f| f.status),
            Err(crate::exit::USAGE)
        );
    }
}
