//! [`Semaphore`]: a counting semaphore of N permits on one key, as shared holds with
//! `limit` N (C2 ct2-shared). Each permit is a grant of its own, with a token of its own.
//!
//! A small value that names what to acquire, not a client-side counter: the server counts
//! the holders, and every holder of the key must ask for the same limit (a different one is
//! refused with `LimitMismatch`, which carries the limit in force). Built by
//! `LockClientSession::semaphore` (permits taken on that session) or `LockClient::semaphore`
//! (on the client's own session). Within one session, callers take turns per key as for
//! every acquire, so N permits held at once need N sessions.

use std::time::Duration;

use lock_api::HoldKind;

use crate::error::LockError;
use crate::handle::LockHandle;
use crate::policy::AcquirePolicy;
use crate::session::{LockClient, LockClientSession};

/// N permits on one key (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct Semaphore {
    on: Sessions,
    key: String,
    permits: u32,
}

/// Where a semaphore's permits are taken.
#[derive(Clone)]
enum Sessions {
    /// This session.
    One(LockClientSession),
    /// The client's own session, whichever it is at the acquire.
    Own(LockClient),
}

impl LockClientSession {
    /// A counting semaphore of `permits` on `key`, its permits taken on this session. Nothing
    /// is checked or sent until [`Semaphore::acquire`] (`permits` outside 1…10,000 is then
    /// `Validation` on `limit`).
    pub fn semaphore(&self, key: &str, permits: u32) -> Semaphore {
        Semaphore::new(Sessions::One(self.clone()), key, permits)
    }
}

impl LockClient {
    /// A counting semaphore of `permits` on `key`, its permits taken on the client's own
    /// session ([`LockClient::session`]). Nothing is checked or sent until
    /// [`Semaphore::acquire`].
    pub fn semaphore(&self, key: &str, permits: u32) -> Semaphore {
        Semaphore::new(Sessions::Own(self.clone()), key, permits)
    }
}

impl Semaphore {
    fn new(on: Sessions, key: &str, permits: u32) -> Self {
        Semaphore {
            on,
            key: key.to_owned(),
            permits,
        }
    }

    /// The key whose shared holds are the permits.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How many permits: the `limit` of every shared hold it asks for.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The hold each permit is.
    pub fn hold(&self) -> HoldKind {
        HoldKind::Shared {
            limit: Some(self.permits),
        }
    }

    /// Takes a permit: a shared hold of the key with `limit` = the permits, for `ttl`, under
    /// `policy`. `Ok(None)` when none was free within the budget; the handle otherwise, with
    /// a token of its own. Fails at once with `LimitMismatch` when the key's holders use
    /// another number of permits. See `LockClientSession::acquire_hold`.
    pub async fn acquire(
        &self,
        ttl: Duration,
        policy: &AcquirePolicy,
    ) -> Result<Option<LockHandle>, LockError> {
        let session = self.session().await?;
        session
            .acquire_hold(&self.key, self.hold(), ttl, policy)
            .await
    }

    /// [`Semaphore::acquire`] with the default lock TTL and [`AcquirePolicy::default`].
    pub async fn acquire_default(&self) -> Result<Option<LockHandle>, LockError> {
        let session = self.session().await?;
        let ttl = session.default_lock_ttl();
        session
            .acquire_hold(&self.key, self.hold(), ttl, &AcquirePolicy::default())
            .await
    }

    /// Gives a permit back: `LockClientSession::release` on the session that granted it. On
    /// the client's own session, a permit of a session that has since ended was lost with
    /// it: nothing is left to release.
    pub async fn release(&self, handle: &LockHandle) -> Result<(), LockError> {
        let session = match &self.on {
            Sessions::One(session) => session.clone(),
            Sessions::Own(client) => match client.open_own_session().await {
                Some(session) if session.id() == handle.session_id() => session,
                _ => return Ok(()),
            },
        };
        session.release(handle).await
    }

    async fn session(&self) -> Result<LockClientSession, LockError> {
        match &self.on {
            Sessions::One(session) => Ok(session.clone()),
            Sessions::Own(client) => client.session().await,
        }
    }
}
