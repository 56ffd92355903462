//! The bounded acquire loop (C2 ct2-acquire).
//!
//! It asks its session for two things only (as etcd's `Mutex` asks its `Session` for a lease
//! and a client): the client's seams and settings ([`SessionState::parts`]) and the key's turn
//! ([`SessionState::claim`]), through which it reads the session's round-trip estimate, waits
//! on the session's end and registers the grant.
//!
//! - The deadline is computed once at entry: `start + totalBudget`; attempts are a
//!   secondary cap.
//! - First the key's turn in this session ([`crate::turns`]): another caller of the session
//!   that has the key (holds it, or is acquiring or releasing it) goes first, and so does
//!   every caller that asked before. That wait sends nothing and counts against the budget;
//!   when the budget ends first the acquire is not granted (`Ok(None)`, attempts 0).
//! - An L4 answered with a grant this session already ended (its L6 failed or has not
//!   arrived, and the server's L4 is idempotent per session) is released again and the L4
//!   re-sent: a new caller is never handed the previous holder's token.
//! - Each attempt's `waitMillis` plus its request timeout must fit in the remaining budget:
//!   the hop timeout is clipped to what remains, so waiting on the server cannot overrun.
//! - After a refusal the loop retries only if the remaining budget exceeds the next delay plus
//!   one estimated round trip (an EWMA of measured L4 round trips, per session).
//! - 409/429 → full-jitter sleep; 503 NOT_LEADER → fixed floor delay; 503 STORE_UNAVAILABLE →
//!   its `retryAfterMillis` (at least the floor), cut to what still lets one more attempt fit
//!   in the budget; no answer (timeout/network) →
//!   full-jitter sleep (L4 is idempotent per session, see [`crate::error`]); 404 → the session
//!   is lost; anything else → returned at once. Nothing but L4 is ever retried.
//! - With `waitMillis` > 0 each L4 waits in the key's FIFO queue on the server: a 409 (the
//!   wait ran out) or no answer is re-sent at once, so the ticket keeps its place; a grant's
//!   deadline counts `waitedMillis` (the server's wait) past the send.
//! - Not granted is `Ok(None)`, with the attempts and waited time in a `lock_not_granted`
//!   event: the last attempt that decided was refused as contended (409/429). When it was
//!   a 503 or got no answer at all, its `NotLeader`, `StoreUnavailable`, `Timeout` or
//!   `Network` error is returned
//!   instead: "the service was unavailable" is not "held by someone else". A timeout of an
//!   attempt whose hop the budget had cut short tells nothing new (a slow answer under load,
//!   or none): the attempt before it decides.
//! - Modes: the hold asked for ([`HoldKind`]) is validated before the key's turn is taken
//!   (`lock_api::limits::validate_hold`: a limit of 1…10,000, shared only), and only a shared
//!   hold puts `mode` and `limit` on the L4 body, so an exclusive acquire's body is what it
//!   was before shared holds. 409 LIMIT_MISMATCH and UPGRADE_NOT_ALLOWED end the loop at
//!   once (never retried: no wait changes a disagreeing limit, and an upgrade is refused).
//! - A lost or closed session fails the loop at once, even mid-sleep or mid-request.
//! - Cancellation: drop the future. The claim passes the key's turn on; a grant the server
//!   made meanwhile is released by the next heartbeat (orphan release).
//!
//! No escape hatch (C2 ct2-acquire): no `acquire_detailed` is shipped. `Option<LockHandle>`
//! plus the events suffices; nothing in the SDK needs to branch on a not-granted reason.

use std::time::Duration;

use futures::future::{select, Either};
use lock_api::limits::{validate_hold, validate_key};
use lock_api::{AcquireRequest, ErrorCode, HoldKind, LockGrant, LockMode};

use crate::backoff::{millis, Backoff};
use crate::error::{LockError, TransportError};
use crate::events::ClientEvent;
use crate::handle::LockHandle;
use crate::parts::ClientParts;
use crate::policy::AcquirePolicy;
use crate::session_state::{Claim, SessionState};
use crate::spans::{AcquireSpan, Outcome};
use crate::transport::{call, TransportExt};

/// What one attempt's outcome tells the loop.
enum Verdict {
    Granted(LockGrant),
    /// Retry-safe refusal: sleep this long (if the budget allows) and try again.
    Retry {
        delay: Duration,
        reason: &'static str,
        /// The service was unavailable (503, or no answer): the error to return if this was
        /// the last attempt. `None` for a contention refusal: then it is not granted.
        unavailable: Option<LockError>,
    },
    Fail(LockError),
}

/// See the module docs. Traced as one `lock.acquire` span ([`crate::spans`]).
pub(crate) async fn acquire(
    session: &SessionState,
    key: &str,
    hold: HoldKind,
    ttl: Duration,
    policy: &AcquirePolicy,
) -> Result<Option<LockHandle>, LockError> {
    acquire_valued(session, key, hold, ttl, policy, None).await
}

/// [`acquire`] with the hold's L4 `value` (an election's candidate says where it serves),
/// checked before anything is sent.
pub(crate) async fn acquire_valued(
    session: &SessionState,
    key: &str,
    hold: HoldKind,
    ttl: Duration,
    policy: &AcquirePolicy,
    value: Option<&str>,
) -> Result<Option<LockHandle>, LockError> {
    if let Some(value) = value {
        lock_api::limits::validate_value(value)
            .map_err(|message| LockError::validation("value", message))?;
    }
    let clock = &session.parts().clock;
    let span = AcquireSpan::start(key);
    let start = clock.now();
    let result = span
        .instrument(claim_and_attempt(
            session, key, hold, ttl, policy, value, &span,
        ))
        .await;
    let outcome = match &result {
        Ok(Some(_)) => Outcome::Granted,
        Ok(None) => Outcome::NotGranted,
        Err(_) => Outcome::Error,
    };
    let token = result
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .map(LockHandle::fencing_token);
    let code = result.as_ref().err().map(LockError::code);
    span.finish(outcome, clock.now() - start, token, code);
    result
}

/// The acquire itself: the key's turn in the session, then the attempts.
async fn claim_and_attempt(
    session: &SessionState,
    key: &str,
    hold: HoldKind,
    ttl: Duration,
    policy: &AcquirePolicy,
    value: Option<&str>,
    span: &AcquireSpan,
) -> Result<Option<LockHandle>, LockError> {
    let parts = session.parts();
    validate_key(key).map_err(|e| LockError::validation("key", e.to_string()))?;
    parts.config.check_lock_ttl(ttl, "ttlMillis")?;
    let hold = checked_hold(hold)?;
    let start = parts.clock.now();
    let deadline = start + policy.total_budget();
    match session.claim(key, deadline).await? {
        Some(claim) => {
            let mut attempts = Attempts::new(claim, key, hold, ttl, policy, span, start);
            attempts.request.value = value.map(str::to_owned);
            attempts.run().await
        }
        None => {
            parts.emit(ClientEvent::NotGranted {
                key: key.into(),
                attempts: 0,
                waited: parts.clock.now() - start,
            });
            Ok(None)
        }
    }
}

/// `hold` as the shared rules take it (`validate_hold`): a `HoldKind` can be built with a
/// limit out of range, so it is checked here, before anything is sent.
fn checked_hold(hold: HoldKind) -> Result<HoldKind, LockError> {
    validate_hold(Some(hold.mode()), hold.limit())
        .map_err(|message| LockError::validation("limit", message))
}

/// The L4 body's `mode` and `limit`: set for a shared hold only, so an exclusive acquire's
/// body is byte for byte the one a server before shared holds knows.
fn wire_hold(hold: HoldKind) -> (Option<LockMode>, Option<u32>) {
    match hold {
        HoldKind::Exclusive => (None, None),
        HoldKind::Shared { limit } => (Some(LockMode::Shared), limit),
    }
}

/// 409/429: another session holds the key.
fn held_by_someone_else(outcome: &Result<LockGrant, TransportError>) -> bool {
    let code = outcome.as_ref().err().and_then(TransportError::code);
    matches!(
        code,
        Some(ErrorCode::LockContended | ErrorCode::ContentionExceeded)
    )
}

/// The state of one acquire call.
struct Attempts<'a> {
    parts: &'a ClientParts,
    claim: Claim<'a>,
    key: &'a str,
    policy: &'a AcquirePolicy,
    span: &'a AcquireSpan,
    request: AcquireRequest,
    backoff: Backoff,
    start: Duration,
    deadline: Duration,
    attempts: u32,
}

impl<'a> Attempts<'a> {
    fn new(
        claim: Claim<'a>,
        key: &'a str,
        hold: HoldKind,
        ttl: Duration,
        policy: &'a AcquirePolicy,
        span: &'a AcquireSpan,
        start: Duration,
    ) -> Self {
        let parts = claim.parts();
        let (mode, limit) = wire_hold(hold);
        Attempts {
            request: AcquireRequest {
                value: None,
                session_id: claim.session_id().to_owned(),
                ttl_millis: Some(millis(ttl)),
                wait_millis: Some(policy.wait_millis()),
                mode,
                limit,
            },
            parts,
            claim,
            key,
            policy,
            span,
            backoff: Backoff::new(policy.base_backoff(), policy.max_backoff()),
            start,
            deadline: start + policy.total_budget(),
            attempts: 0,
        }
    }

    async fn run(mut self) -> Result<Option<LockHandle>, LockError> {
        let clock = self.parts.clock.clone();
        let mut rng = self.parts.rng.rng();
        let wait = Duration::from_millis(self.policy.wait_millis());
        let mut unavailable = None;
        loop {
            self.claim.check_open()?;
            let sent_at = clock.now();
            let remaining = self.deadline.saturating_sub(sent_at);
            if remaining <= wait {
                break;
            }
            let full_hop = self.parts.config.request_timeout + wait;
            let hop = full_hop.min(remaining);
            self.attempts += 1;
            self.span.attempt(self.attempts);
            let earlier = self.claim.sending(sent_at);
            let outcome = self.attempt(hop).await?;
            if held_by_someone_else(&outcome) {
                // So no earlier L4 of ours holds it (a 503 says nothing about that, so it
                // does not clear the mark).
                self.claim.held_elsewhere();
            }
            match self.classify(outcome, clock.now() - sent_at, &mut rng) {
                Verdict::Granted(grant) if self.claim.is_finished(&grant) => {
                    self.release_finished(&grant).await;
                    if self.attempts >= self.policy.max_attempts() {
                        break;
                    }
                }
                Verdict::Granted(grant) => return Ok(Some(self.granted(grant, sent_at, earlier))),
                Verdict::Fail(err) => return Err(err),
                Verdict::Retry {
                    delay,
                    reason,
                    unavailable: this_one,
                } => {
                    // A timeout of a hop the budget cut short tells nothing new (a slow
                    // answer, or none): the previous attempt's verdict stands.
                    let inconclusive =
                        hop < full_hop && matches!(this_one, Some(LockError::Timeout(_)));
                    if !inconclusive || self.attempts == 1 {
                        unavailable = this_one;
                    }
                    if !self.may_retry(delay, wait) {
                        break;
                    }
                    self.parts.emit(ClientEvent::Contention {
                        key: self.key.into(),
                        attempt: self.attempts,
                        delay,
                        reason: reason.into(),
                    });
                    self.sleep(delay).await?;
                }
            }
        }
        self.parts.emit(ClientEvent::NotGranted {
            key: self.key.into(),
            attempts: self.attempts,
            waited: clock.now() - self.start,
        });
        match unavailable {
            Some(err) => Err(err),
            None => Ok(None),
        }
    }

    /// Releases a grant this session already ended that the server answered an L4 with
    /// (see [`Claim::is_finished`]), so the next L4 gets a grant of its own. Best effort: if
    /// this L6 fails too, the next L4 gets the same answer and tries again, and the lock's
    /// TTL ends it at worst.
    ///
    /// The L6 gets what is left of the budget, never more: the L4 before it has used part of
    /// the hop it was given, so that hop would overrun the deadline by the L4's round trip
    /// when the L6 goes unanswered. With nothing left it is not sent: the heartbeat's orphan
    /// release ends the grant once this acquire has given the key's turn back.
    async fn release_finished(&self, grant: &LockGrant) {
        let clock = &*self.parts.clock;
        let hop = self
            .parts
            .config
            .request_timeout
            .min(self.deadline.saturating_sub(clock.now()));
        if hop.is_zero() {
            return;
        }
        let l6 = self.claim.release(grant.fencing_token, clock, hop);
        let _ = select(Box::pin(l6), Box::pin(self.claim.ended())).await;
    }

    /// One L4 call, abandoned at once if the session ends meanwhile.
    async fn attempt(&self, hop: Duration) -> Result<Result<LockGrant, TransportError>, LockError> {
        let l4 = call(
            &*self.parts.clock,
            hop,
            self.parts.transport.acquire(self.key, &self.request, hop),
        );
        match select(Box::pin(l4), Box::pin(self.claim.ended())).await {
            Either::Left((outcome, _)) => Ok(outcome),
            Either::Right(_) => Err(self.claim.end_error()),
        }
    }

    fn classify(
        &self,
        outcome: Result<LockGrant, TransportError>,
        rtt: Duration,
        rng: &mut rand::rngs::SmallRng,
    ) -> Verdict {
        let err = match outcome {
            Ok(grant) => {
                self.claim.observe_rtt(rtt);
                return Verdict::Granted(grant);
            }
            Err(err) => err,
        };
        let jitter = self.backoff.delay(self.attempts - 1, rng);
        // Queued (`waitMillis` > 0), the request held a ticket in the key's queue: a 409 means
        // its wait ran out (that wait was the backoff), and an unanswered one may still hold
        // the ticket. Either is re-sent at once, within the ticket's grace period, so the
        // ticket keeps its place. A 429 (queue full) backs off as always.
        let resend = if self.policy.wait_millis() > 0 {
            Duration::ZERO
        } else {
            jitter
        };
        match &err {
            TransportError::Timeout(_) | TransportError::Network(_) => Verdict::Retry {
                delay: resend,
                reason: if matches!(err, TransportError::Timeout(_)) {
                    "TIMEOUT"
                } else {
                    "NETWORK"
                },
                unavailable: Some(LockError::from_transport(err, self.key)),
            },
            TransportError::Status { body, .. } => {
                self.claim.observe_rtt(rtt);
                match body.code {
                    ErrorCode::LockContended => Verdict::Retry {
                        delay: resend,
                        reason: body.code.as_str(),
                        unavailable: None,
                    },
                    ErrorCode::ContentionExceeded => Verdict::Retry {
                        delay: jitter,
                        reason: body.code.as_str(),
                        unavailable: None,
                    },
                    ErrorCode::NotLeader => Verdict::Retry {
                        delay: self.parts.config.not_leader_delay,
                        reason: body.code.as_str(),
                        unavailable: Some(LockError::from_transport(err.clone(), self.key)),
                    },
                    ErrorCode::StoreUnavailable => Verdict::Retry {
                        delay: self.store_delay(body.retry_after_millis),
                        reason: body.code.as_str(),
                        unavailable: Some(LockError::from_transport(err.clone(), self.key)),
                    },
                    ErrorCode::SessionNotFound => {
                        self.claim.session_gone();
                        Verdict::Fail(LockError::SessionLost)
                    }
                    _ => Verdict::Fail(LockError::from_transport(err, self.key)),
                }
            }
            TransportError::Decode(_) | TransportError::Unexpected { .. } => {
                Verdict::Fail(LockError::from_transport(err, self.key))
            }
        }
    }

    /// The delay after a STORE_UNAVAILABLE: the server's hint (at least the NOT_LEADER
    /// floor), but never so long that the attempt after it no longer fits in the budget: an
    /// outage that ends before the deadline still gets its grant. A cut delay is at least
    /// the floor too (else the hint stands and the loop ends), so the last moments of a
    /// budget are not spent re-sending back to back.
    fn store_delay(&self, hint_millis: Option<u64>) -> Duration {
        let floor = self.parts.config.not_leader_delay;
        let hinted = hint_millis.map_or(floor, Duration::from_millis).max(floor);
        let wait = Duration::from_millis(self.policy.wait_millis());
        let last_moment = self
            .deadline
            .saturating_sub(self.parts.clock.now() + self.claim.rtt() + wait)
            .saturating_sub(Duration::from_millis(1));
        if hinted <= last_moment || last_moment < floor {
            hinted
        } else {
            last_moment
        }
    }

    /// Retry only within the attempt cap and if, after `delay`, one round trip plus the
    /// server wait still fits before the deadline.
    fn may_retry(&self, delay: Duration, wait: Duration) -> bool {
        if self.attempts >= self.policy.max_attempts() {
            return false;
        }
        let next_answer = self.parts.clock.now() + delay + self.claim.rtt() + wait;
        next_answer < self.deadline
    }

    /// Sleeps through the clock seam, waking early with an error if the session ends.
    async fn sleep(&self, delay: Duration) -> Result<(), LockError> {
        let sleep = self.parts.clock.sleep(delay);
        match select(sleep, Box::pin(self.claim.ended())).await {
            Either::Left(_) => Ok(()),
            Either::Right(_) => Err(self.claim.end_error()),
        }
    }

    /// Registers the grant (its deadline counting from the earliest L4 it may answer, see
    /// `SessionState::grant_anchor`) and reports it.
    fn granted(self, grant: LockGrant, sent_at: Duration, earlier: Option<Duration>) -> LockHandle {
        let (parts, key, attempts, start) = (self.parts, self.key, self.attempts, self.start);
        let queued = Duration::from_millis(grant.waited_millis);
        let holder_id = self.claim.holder_id().to_owned();
        let handle = self.claim.grant(grant, sent_at, earlier);
        parts.emit(ClientEvent::Granted {
            key: key.to_owned(),
            holder_id,
            fencing_token: handle.fencing_token(),
            attempts,
            waited: parts.clock.now() - start,
            queued,
        });
        handle
    }
}
