//! What `exec` asks for: the key exclusively (the default), or a shared hold beside other
//! shared holders (`--shared`: a read-write lock's reader; with `--limit N` one of N permits
//! of a counting semaphore), as the SDK's `acquire_hold` takes it.

use lock_api::HoldKind;

use crate::exit::Failure;

/// The hold asked for by `--shared` and `--limit` (clap lets `--limit` come only with
/// `--shared`); its limit is checked here, before anything is sent.
pub fn from_flags(shared: bool, limit: Option<u32>) -> Result<HoldKind, Failure> {
    let mode = shared.then_some(lock_api::LockMode::Shared);
    lock_api::limits::validate_hold(mode, limit)
        .map_err(|rule| Failure::usage(format!("--limit {rule}")))
}

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
