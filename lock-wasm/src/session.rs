//! The SDK's entry points: [`LockClient`] (the seams plus configuration) and
//! [`LockClientSession`] (one server session: acquire, release, close, status).
//!
//! A session is its shared state ([`crate::session_state`]) plus a background task that keeps
//! it ([`crate::heartbeat`]): heartbeats renew the session and every lock it holds in time,
//! and a deadline watchdog reports each passed deadline at its instant. Deadlines: every lock
//! and the session itself are valid locally until `sent_at + ttl - safety_margin`, where
//! `sent_at` is when the granting or renewing request was sent (see [`crate::renewal`]).
//! When the session's deadline passes without a renewal (or the server answers 404) the
//! session is lost: every handle is reported lost, waiters fail at once with `SessionLost`,
//! `lock_session_lost` is counted, and the session sends nothing more.

use std::sync::Arc;
use std::time::Duration;

use lock_api::{ErrorCode, HoldKind, OpenSessionRequest, SessionStatus};

use crate::backoff::RngSource;
use crate::clock::Clock;
use crate::config::ClientConfig;
use crate::error::LockError;
use crate::events::{ClientEvent, EventSink, NoEvents};
use crate::handle::LockHandle;
use crate::parts::ClientParts;
use crate::policy::AcquirePolicy;
use crate::session_state::SessionState;
use crate::spawn::Spawner;
use crate::transport::{call, Transport, TransportExt};

/// Entry point: the seams and settings shared by every session it opens, and the client's
/// own session ([`LockClient::session`]). Cheap to clone; clones share that session.
#[derive(Clone)]
pub struct LockClient {
    parts: Arc<ClientParts>,
    /// The session [`LockClient::session`] runs, once opened. An async mutex, so that
    /// concurrent first callers wait for one L1 instead of each opening a session.
    managed: Arc<futures::lock::Mutex<Option<LockClientSession>>>,
}

impl LockClient {
    /// A client over the given seams, with default settings and no event sink.
    pub fn new(
        transport: Arc<dyn Transport>,
        clock: Arc<dyn Clock>,
        spawner: Arc<dyn Spawner>,
        rng: Arc<dyn RngSource>,
    ) -> Self {
        LockClient {
            parts: Arc::new(ClientParts {
                transport,
                clock,
                spawner,
                rng,
                events: Arc::new(NoEvents),
                config: ClientConfig::default(),
                sessions_lost: Arc::default(),
            }),
            managed: Arc::default(),
        }
    }

    /// Replaces the event sink (logs, JS `onEvent`).
    pub fn with_events(self, events: Arc<dyn EventSink>) -> Self {
        self.map_parts(|p| p.events = events)
    }

    /// Replaces the settings.
    pub fn with_config(self, config: ClientConfig) -> Self {
        self.map_parts(|p| p.config = config)
    }

    fn map_parts(self, f: impl FnOnce(&mut ClientParts)) -> Self {
        let mut parts = (*self.parts).clone();
        f(&mut parts);
        LockClient {
            parts: Arc::new(parts),
            managed: Arc::default(),
        }
    }

    /// The seams and settings its sessions share.
    pub(crate) fn parts(&self) -> &Arc<ClientParts> {
        &self.parts
    }

    /// The settings in use.
    pub fn config(&self) -> &ClientConfig {
        &self.parts.config
    }

    /// `lock_session_lost{backend}`: sessions of this client lost so far. The SDK's only
    /// metric; label it with [`ClientConfig::backend`] when exporting.
    pub fn session_lost_count(&self) -> u64 {
        self.parts.sessions_lost.get()
    }

    /// The client's own session, for a service that does not want to manage sessions: opened
    /// on first use, shared by every caller (each acquire waits its turn per key, so callers
    /// never share a hold), and replaced by a new one (a new L1) on the first call after it
    /// was lost. A lost session's locks are reported lost through their handles as always;
    /// what was acquired on the new session is independent of them. Fails as
    /// [`LockClient::open_session`] does when no session can be opened.
    pub async fn session(&self) -> Result<LockClientSession, LockError> {
        let mut managed = self.managed.lock().await;
        if let Some(session) = managed.as_ref().filter(|s| s.state.ensure_open().is_ok()) {
            return Ok(session.clone());
        }
        let session = self.open_session().await?;
        *managed = Some(session.clone());
        Ok(session)
    }

    /// The client's own session if one is open now, without opening one.
    pub(crate) async fn open_own_session(&self) -> Option<LockClientSession> {
        let managed = self.managed.lock().await;
        managed
            .as_ref()
            .filter(|s| s.state.ensure_open().is_ok())
            .cloned()
    }

    /// Closes the client's own session, if one is open (graceful shutdown: its locks are
    /// released server-side at once instead of at their TTL). The next
    /// [`LockClient::session`] opens a new one.
    pub async fn close(&self) -> Result<(), LockError> {
        let session = self.managed.lock().await.take();
        match session {
            Some(session) => session.close().await,
            None => Ok(()),
        }
    }

    /// L1: opens a session and starts its background task.
    pub async fn open_session(&self) -> Result<LockClientSession, LockError> {
        let parts = self.parts.clone();
        let request = OpenSessionRequest {
            ttl_millis: parts.config.session_ttl.map(crate::backoff::millis),
            owner: parts.config.owner.clone(),
        };
        let hop = parts.config.request_timeout;
        let sent_at = parts.clock.now();
        let opened = call(
            &*parts.clock,
            hop,
            parts.transport.open_session(&request, hop),
        )
        .await
        .map_err(|e| LockError::from_transport(e, ""))?;
        let state = Arc::new(SessionState::new(
            opened.session_id,
            opened.holder_id,
            Duration::from_millis(opened.ttl_millis),
            Duration::from_millis(opened.heartbeat_millis.max(1)),
            sent_at,
            parts,
        ));
        crate::heartbeat::spawn(&state);
        Ok(LockClientSession { state })
    }
}

/// One server session. Cheap to clone; clones share the session. Dropping every clone
/// without [`LockClientSession::close`] stops the heartbeat and lets the server expire it;
/// its handles end then (`LostReason::SessionClosed`).
#[derive(Clone)]
pub struct LockClientSession {
    state: Arc<SessionState>,
}

impl LockClientSession {
    /// The server's session id: the session's credential, for this client only (never log
    /// or show it; [`LockClientSession::holder_id`] is its public name).
    pub fn id(&self) -> &str {
        self.state.id()
    }

    /// The session's public name, L1's `holderId`: what L7 shows as the holder of this
    /// session's locks, and what the server's logs call it. Safe to log and display.
    pub fn holder_id(&self) -> &str {
        self.state.holder_id()
    }

    /// Acquires `key` exclusively for `ttl` under `policy`: `Ok(Some(handle))` when granted,
    /// `Ok(None)` when not granted within the budget. Every call is an independent caller:
    /// when another caller of this session has the key, this one waits its turn within its
    /// budget and then gets a grant and a token of its own (nest through the handle instead:
    /// [`LockHandle::nest`]). See [`crate::acquire`] for the loop. Cancel by dropping the
    /// future.
    pub async fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        policy: &AcquirePolicy,
    ) -> Result<Option<LockHandle>, LockError> {
        self.acquire_hold(key, HoldKind::Exclusive, ttl, policy)
            .await
    }

    /// Acquires `key` in the mode `hold` asks for: [`HoldKind::Exclusive`] (as
    /// [`LockClientSession::acquire`]) or [`HoldKind::Shared`], beside the key's other shared
    /// holders up to its `limit` (`None`: no limit). Every grant, shared or not, has a token
    /// of its own. A limit out of 1…10,000 is `Validation` on `limit`, before anything is sent.
    /// Ends at once with `LimitMismatch` (the key's shared holders agreed on another limit,
    /// which the error carries) or `UpgradeNotAllowed` (an exclusive acquire while this
    /// session holds the key shared); neither is retried. Callers of one session take turns
    /// per key in either mode (C2 ct2-shared).
    pub async fn acquire_hold(
        &self,
        key: &str,
        hold: HoldKind,
        ttl: Duration,
        policy: &AcquirePolicy,
    ) -> Result<Option<LockHandle>, LockError> {
        crate::acquire::acquire(&self.state, key, hold, ttl, policy).await
    }

    /// A read lock: `key` shared without a limit, beside every other reader, while no writer
    /// holds it ([`LockClientSession::acquire_hold`] with `HoldKind::Shared { limit: None }`).
    pub async fn read(
        &self,
        key: &str,
        ttl: Duration,
        policy: &AcquirePolicy,
    ) -> Result<Option<LockHandle>, LockError> {
        let hold = HoldKind::Shared { limit: None };
        self.acquire_hold(key, hold, ttl, policy).await
    }

    /// A write lock: `key` exclusively, with no reader and no other writer beside it; the
    /// same as [`LockClientSession::acquire`], named for the read-write pair.
    pub async fn write(
        &self,
        key: &str,
        ttl: Duration,
        policy: &AcquirePolicy,
    ) -> Result<Option<LockHandle>, LockError> {
        self.acquire(key, ttl, policy).await
    }

    /// [`LockClientSession::acquire`] with the default lock TTL and [`AcquirePolicy::default`].
    pub async fn acquire_default(&self, key: &str) -> Result<Option<LockHandle>, LockError> {
        let ttl = self.default_lock_ttl();
        self.acquire(key, ttl, &AcquirePolicy::default()).await
    }

    /// The session's shared state (for the election's queued acquire).
    pub(crate) fn state(&self) -> &SessionState {
        &self.state
    }

    /// The client's seams and settings, shared (for what outlives a call).
    pub(crate) fn shared_parts(&self) -> Arc<ClientParts> {
        self.state.shared_parts()
    }

    /// The lock TTL of the `*_default` acquires ([`ClientConfig::default_lock_ttl`]).
    pub(crate) fn default_lock_ttl(&self) -> Duration {
        self.state.parts().config.default_lock_ttl
    }

    /// Releases one hold of `handle`. Only the outermost release (depth zero) sends L6;
    /// 409 LOCK_LOST is benign (the lock is already gone). A released handle reports lost.
    /// Releasing a handle that is no longer registered does nothing. A lost or closed session
    /// sends nothing: its locks are gone with it. A lost handle releases quietly: its L6 is
    /// still sent (the server may hold the lock a little longer), but a failure is not an error.
    ///
    /// A release that fails never wedges the key: the handle is finished before the L6 is
    /// sent (no heartbeat renews it), the key's turn passes to the next caller whatever the
    /// answer, the failure is a `lock_release_failed` event and the error, and the L6 is
    /// re-sent in the background until the lock's TTL would end it. A later L4 answered with
    /// this grant releases it again instead of handing it out.
    pub async fn release(&self, handle: &LockHandle) -> Result<(), LockError> {
        let s = &self.state;
        if handle.session_id() != s.id() {
            return Err(LockError::validation(
                "handle",
                "handle belongs to another session",
            ));
        }
        let was_lost = handle.is_lost();
        let Some(turn) = s.release_hold(handle) else {
            return Ok(());
        };
        if s.ensure_open().is_err() {
            return Ok(());
        }
        let parts = s.parts();
        let (key, token) = (handle.key(), handle.fencing_token());
        let hop = parts.config.request_timeout;
        let result = s.send_release(key, token, &*parts.clock, hop).await;
        // The next caller's turn, whatever the answer.
        drop(turn);
        match &result {
            Ok(()) => {}
            Err(LockError::SessionLost) => s.mark_lost(),
            Err(e) => {
                parts.emit(ClientEvent::ReleaseFailed {
                    key: key.to_owned(),
                    fencing_token: token,
                    code: e.code(),
                });
                crate::heartbeat::retry_release(&self.state, handle);
            }
        }
        // The holder of a lost lock has been told already (the `lost` event, the handle's
        // signal), and a failed L6 leaves nothing that the next heartbeat or the lock's own TTL
        // does not end. Failing here would only hide the caller's result: after a network
        // partition heals, the first request often meets a pooled connection the peer closed.
        if was_lost {
            return Ok(());
        }
        result
    }

    /// L3: closes the session (the server releases all its locks) and stops the heartbeat.
    /// 404 is benign; closing a lost or closed session sends nothing.
    pub async fn close(&self) -> Result<(), LockError> {
        let s = &self.state;
        if !s.mark_closed() {
            return Ok(());
        }
        let parts = s.parts();
        let hop = parts.config.request_timeout;
        let closed = parts.transport.close_session(s.session_ref(), hop);
        match call(&*parts.clock, hop, closed).await {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(ErrorCode::SessionNotFound) => Ok(()),
            Err(e) => Err(LockError::from_transport(e, "")),
        }
    }

    /// L5: the server's view of this session.
    pub async fn status(&self) -> Result<SessionStatus, LockError> {
        let s = &self.state;
        s.ensure_open()?;
        let parts = s.parts();
        let hop = parts.config.request_timeout;
        let status = parts.transport.session_status(s.session_ref(), hop);
        s.check_session_answer(call(&*parts.clock, hop, status).await)
    }

    /// True once the session is lost (404, or its deadline passed without renewal: read from
    /// the clock, so a process that was paused past it knows at once).
    pub fn is_lost(&self) -> bool {
        self.state.ensure_open() == Err(LockError::SessionLost)
    }

    /// True once [`LockClientSession::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.state.is_closed()
    }

    /// The session's conservative local deadline, on the client's clock.
    pub fn deadline(&self) -> Duration {
        self.state.deadline()
    }
}
