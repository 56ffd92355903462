//! The bounded acquire loop (C2 ct2-acquire).
//!
//! It asks its session for two things only (as etcd's `Mutex` asks its `Session` for a lease
//! and a client): the client's seams and settings ([`SessionState::parts`]) and the key's slot
//! ([`SessionState::claim`]), through which it reads the session's round-trip estimate, waits
//! on the session's end and registers the grant.
//!
//! - The deadline is computed once at entry: `start + totalBudget`; attempts are a
//!   secondary cap.
//! - Each attempt's `waitMillis` plus its request timeout must fit in the remaining budget:
//!   the hop timeout is clipped to what remains, so waiting on the server cannot overrun.
//! - After a refusal the loop retries only if the remaining budget exceeds the next delay plus
//!   one estimated round trip (an EWMA of measured L4 round trips, per session).
//! - 409/429 → full-jitter sleep; 503 → fixed floor delay; no answer (timeout/network) →
//!   full-jitter sleep (L4 is idempotent per session, see [`crate::error`]); 404 → the session
//!   is lost; anything else → returned at once. Nothing but L4 is ever retried.
//! - With `waitMillis` > 0 each L4 waits in the key's FIFO queue on the server: a 409 (the
//!   wait ran out) or no answer is re-sent at once, so the ticket keeps its place; a grant's
//!   deadline counts `waitedMillis` (the server's wait) past the send.
//! - Not granted is `Ok(None)`, with the attempts and waited time in a `lock_not_granted`
//!   event. When the last attempt got no answer at all, its `Timeout`/`Network` error is
//!   returned instead: "server unreachable" is not "held by someone else". A timeout of an
//!   attempt whose hop the budget had cut short tells nothing new (a slow answer under load,
//!   or none): the attempt before it decides, so a 409 or 503 then is still `Ok(None)`.
//! - A lost or closed session fails the loop at once, even mid-sleep or mid-request.
//! - Cancellation: drop the future. The claim frees the key; a grant the server made
//!   meanwhile is released by the next heartbeat (orphan release).
//!
//! No escape hatch (C2 ct2-acquire): no `acquire_detailed` is shipped. `Option<LockHandle>`
//! plus the events suffices; nothing in the SDK needs to branch on a not-granted reason.

use std::time::Duration;

use futures::future::{select, Either};
use lock_api::limits::validate_key;
use lock_api::{AcquireRequest, ErrorCode, LockGrant};

use crate::backoff::{millis, Backoff};
use crate::error::{LockError, TransportError};
use crate::events::ClientEvent;
use crate::handle::LockHandle;
use crate::parts::ClientParts;
use crate::policy::AcquirePolicy;
use crate::session_state::{Claim, Claimed, SessionState};
use crate::spans::{AcquireSpan, Outcome};
use crate::transport::{call, TransportExt};

/// What one attempt's outcome tells the loop.
enum Verdict {
    Granted(LockGrant),
    /// Retry-safe refusal: sleep this long (if the budget allows) and try again.
    Retry {
        delay: Duration,
        reason: &'static str,
        /// The refusal was "no answer": the error to return if this was the last attempt.
        unanswered: Option<LockError>,
    },
    Fail(LockError),
}

/// See the module docs. Traced as one `lock.acquire` span ([`crate::spans`]).
pub(crate) async fn acquire(
    session: &SessionState,
    key: &str,
    ttl: Duration,
    policy: &AcquirePolicy,
) -> Result<Option<LockHandle>, LockError> {
    let clock = &session.parts().clock;
    let span = AcquireSpan::start(key);
    let start = clock.now();
    let (result, nested) = span
        .instrument(claim_and_attempt(session, key, ttl, policy, &span))
        .await;
    let outcome = match &result {
        Ok(Some(_)) if nested => Outcome::Nested,
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

/// The acquire itself; the flag says whether the session already held the key.
async fn claim_and_attempt(
    session: &SessionState,
    key: &str,
    ttl: Duration,
    policy: &AcquirePolicy,
    span: &AcquireSpan,
) -> (Result<Option<LockHandle>, LockError>, bool) {
    let parts = session.parts();
    let claimed = validate_key(key)
        .map_err(|e| LockError::validation("key", e.to_string()))
        .and_then(|()| parts.config.check_lock_ttl(ttl, "ttlMillis"))
        .and_then(|()| session.claim(key));
    match claimed {
        Ok(Claimed::Held(handle)) => (Ok(Some(handle)), true),
        Ok(Claimed::Fresh(claim)) => {
            let attempts = Attempts::new(parts, claim, key, ttl, policy, span);
            (attempts.run().await, false)
        }
        Err(e) => (Err(e), false),
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
        parts: &'a ClientParts,
        claim: Claim<'a>,
        key: &'a str,
        ttl: Duration,
        policy: &'a AcquirePolicy,
        span: &'a AcquireSpan,
    ) -> Self {
        let start = parts.clock.now();
        Attempts {
            request: AcquireRequest {
                session_id: claim.session_id().to_owned(),
                ttl_millis: Some(millis(ttl)),
                wait_millis: Some(policy.wait_millis()),
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
        let mut last_unanswered = None;
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
                Verdict::Granted(grant) => return Ok(Some(self.granted(grant, sent_at, earlier))),
                Verdict::Fail(err) => return Err(err),
                Verdict::Retry {
                    delay,
                    reason,
                    unanswered,
                } => {
                    // A timeout of a hop the budget cut short tells nothing new (a slow
                    // answer, or none): the previous attempt's verdict stands.
                    let inconclusive =
                        hop < full_hop && matches!(unanswered, Some(LockError::Timeout(_)));
                    if !inconclusive || self.attempts == 1 {
                        last_unanswered = unanswered;
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
        match last_unanswered {
            Some(err) => Err(err),
            None => Ok(None),
        }
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
                unanswered: Some(LockError::from_transport(err, self.key)),
            },
            TransportError::Status { body, .. } => {
                self.claim.observe_rtt(rtt);
                match body.code {
                    ErrorCode::LockContended => Verdict::Retry {
                        delay: resend,
                        reason: body.code.as_str(),
                        unanswered: None,
                    },
                    ErrorCode::ContentionExceeded => Verdict::Retry {
                        delay: jitter,
                        reason: body.code.as_str(),
                        unanswered: None,
                    },
                    ErrorCode::NotLeader => Verdict::Retry {
                        delay: self.parts.config.not_leader_delay,
                        reason: body.code.as_str(),
                        unanswered: None,
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
        let handle = self.claim.grant(grant, sent_at, earlier);
        parts.emit(ClientEvent::Granted {
            key: key.to_owned(),
            session_id: handle.session_id().to_owned(),
            fencing_token: handle.fencing_token(),
            attempts,
            waited: parts.clock.now() - start,
            queued,
        });
        handle
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))] // uses test_support (native only)
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::policy::PolicySettings;
    use crate::test_support::Fixture;
    use crate::transport::ScriptedTransport;
    use futures::FutureExt;

    fn grant(token: u64) -> Result<LockGrant, TransportError> {
        Ok(ScriptedTransport::grant("k", "s1", token, 10_000))
    }

    /// C2 ct2-pinned, *Bounded give-up*: L4 always 409 → `Ok(None)` within the budget and
    /// the attempt cap.
    #[test]
    fn always_contended_gives_up_within_budget_and_attempts() {
        let f = Fixture::new();
        let session = f.session();
        let start = f.clock.now();
        let policy = AcquirePolicy::default();
        let result = f.run(async move {
            // The declared type, checked at compile time.
            let r: Result<Option<LockHandle>, LockError> =
                session.acquire("k", Duration::from_secs(10), &policy).await;
            r
        });
        assert_eq!(result.unwrap().map(|h| h.fencing_token()), None);
        let calls = f.transport.acquire_calls();
        let took = f.clock.now() - start;
        println!("always 409: {calls} L4 calls in {took:?} (budget 10 s, cap 12)");
        assert!((2..=12).contains(&calls), "{calls} calls");
        assert!(took <= Duration::from_secs(10), "took {took:?}");
        assert!(f.event_names().contains(&"lock_not_granted"));
    }

    #[test]
    fn the_attempt_cap_bounds_calls_when_the_budget_is_large() {
        let f = Fixture::new();
        let session = f.session();
        let policy = AcquirePolicy::new(PolicySettings {
            total_budget: Duration::from_secs(300),
            max_attempts: 3,
            ..PolicySettings::default()
        })
        .unwrap();
        let result =
            f.run(async move { session.acquire("k", Duration::from_secs(10), &policy).await });
        assert!(matches!(result, Ok(None)));
        assert_eq!(f.transport.acquire_calls(), 3);
    }

    /// C2 ct2-pinned, *Through NOT_LEADER*: 503, 503, 200 → a grant with the server's token,
    /// after the floor delays.
    #[test]
    fn not_leader_twice_then_granted() {
        let f = Fixture::new();
        let session = f.session();
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::NotLeader)));
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::NotLeader)));
        f.transport.push_acquire(grant(4242));
        let start = f.clock.now();
        let handle = f
            .run(async move { session.acquire_default("k").await })
            .unwrap()
            .expect("granted");
        assert_eq!(handle.fencing_token(), 4242);
        assert_eq!(f.transport.acquire_calls(), 3);
        assert_eq!(
            f.clock.now() - start,
            Duration::from_millis(200),
            "two 100 ms floors"
        );
    }

    #[test]
    fn credential_refusals_are_not_retried() {
        let f = Fixture::new();
        let session = f.session();
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::Forbidden)));
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::Unauthorized)));
        let s = session.clone();
        let first = f.run(async move { s.acquire_default("k").await });
        assert!(
            matches!(first, Err(LockError::Forbidden { .. })),
            "{first:?}"
        );
        let second = f.run(async move { session.acquire_default("k").await });
        assert!(
            matches!(second, Err(LockError::Unauthorized { .. })),
            "{second:?}"
        );
        assert_eq!(f.transport.acquire_calls(), 2, "one L4 each");
    }

    #[test]
    fn validation_and_other_errors_are_not_retried() {
        let f = Fixture::new();
        let session = f.session();
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::ValidationFailed)));
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::Internal)));
        let s = session.clone();
        let first = f.run(async move { s.acquire_default("k").await });
        assert!(
            matches!(first, Err(LockError::Validation { .. })),
            "{first:?}"
        );
        let second = f.run(async move { session.acquire_default("k").await });
        assert!(matches!(
            second,
            Err(LockError::Unexpected { status: 500, .. })
        ));
        assert_eq!(f.transport.acquire_calls(), 2);
    }

    #[test]
    fn bad_input_is_refused_before_sending() {
        let f = Fixture::new();
        let session = f.session();
        let result = f.run(async move {
            let bad_key = session
                .acquire("a\nb", Duration::from_secs(1), &AcquirePolicy::default())
                .await;
            let bad_ttl = session
                .acquire("k", Duration::from_millis(1), &AcquirePolicy::default())
                .await;
            (bad_key, bad_ttl)
        });
        assert!(matches!(result.0, Err(LockError::Validation { ref field, .. }) if field == "key"));
        assert!(
            matches!(result.1, Err(LockError::Validation { ref field, .. }) if field == "ttlMillis")
        );
        assert_eq!(f.transport.acquire_calls(), 0);
    }

    #[test]
    fn session_not_found_on_acquire_loses_the_session() {
        let f = Fixture::new();
        let session = f.session();
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
        let s = session.clone();
        let result = f.run(async move { s.acquire_default("k").await });
        assert_eq!(result.unwrap_err(), LockError::SessionLost);
        assert!(session.is_lost());
        assert_eq!(f.client.session_lost_count(), 1);
        let again = f.run(async move { session.acquire_default("k").await });
        assert_eq!(again.unwrap_err(), LockError::SessionLost);
        assert_eq!(
            f.transport.acquire_calls(),
            1,
            "nothing sent after the loss"
        );
    }

    #[test]
    fn an_unanswered_attempt_is_retried_and_a_last_one_is_reported() {
        let f = Fixture::new();
        let session = f.session();
        let timeout = TransportError::Timeout(Duration::from_secs(2));
        f.transport.push_acquire(Err(timeout.clone()));
        f.transport.push_acquire(grant(9));
        let s = session.clone();
        let handle = f
            .run(async move { s.acquire_default("k").await })
            .unwrap()
            .unwrap();
        assert_eq!(handle.fencing_token(), 9);
        let policy = AcquirePolicy::new(PolicySettings {
            max_attempts: 1,
            ..PolicySettings::default()
        })
        .unwrap();
        f.transport.push_acquire(Err(timeout));
        let result = f.run(async move {
            session
                .acquire("other", Duration::from_secs(10), &policy)
                .await
        });
        assert!(matches!(result, Err(LockError::Timeout(_))), "{result:?}");
    }

    /// The last attempt's hop cut short by the budget and timing out (a slow answer under
    /// load) tells nothing new: after a 503 the acquire is not granted, after another
    /// unanswered attempt it is that error. A connection failure on such a hop is reported.
    #[test]
    fn a_timeout_of_a_hop_the_budget_cut_short_leaves_the_verdict_to_the_attempt_before() {
        let f = Fixture::new();
        let session = f.session();
        // 300 ms budget, far less than the 5 s request timeout: every hop is cut short. Two
        // attempts: a 503, then the one under test.
        let policy = AcquirePolicy::new(PolicySettings {
            total_budget: Duration::from_millis(300),
            max_attempts: 2,
            ..PolicySettings::default()
        })
        .unwrap();
        let slow = TransportError::Timeout(Duration::from_millis(200));
        let try_twice = |first: TransportError, second: TransportError| {
            let (s, policy) = (session.clone(), policy);
            f.transport.push_acquire(Err(first));
            f.transport.push_acquire(Err(second));
            f.run(async move { s.acquire("k", Duration::from_secs(10), &policy).await })
        };
        let not_leader = || ScriptedTransport::error(ErrorCode::NotLeader);
        let after_503 = try_twice(not_leader(), slow.clone());
        assert!(matches!(after_503, Ok(None)), "{after_503:?}");
        let never_answered = try_twice(slow.clone(), slow);
        assert!(
            matches!(never_answered, Err(LockError::Timeout(_))),
            "{never_answered:?}"
        );
        let refused = try_twice(not_leader(), TransportError::Network("refused".into()));
        assert!(matches!(refused, Err(LockError::Network(_))), "{refused:?}");
        assert_eq!(f.transport.acquire_calls(), 6);
    }

    /// A grant after an unanswered attempt may be the server's idempotent answer to the
    /// earlier request, so its deadline conservatively counts from the earlier send (safe
    /// even against a server that does not renew on a repeated L4).
    #[test]
    fn a_grant_after_an_unanswered_attempt_counts_from_the_first_send() {
        let f = Fixture::new();
        let session = f.session();
        f.transport
            .push_acquire(Err(TransportError::Network("reset".into())));
        f.transport.push_acquire(grant(3));
        let start = f.clock.now();
        let handle = f
            .run(async move { session.acquire_default("k").await })
            .unwrap()
            .unwrap();
        assert!(f.clock.now() > start, "a backoff happened");
        // 10 s TTL, margin 1 s, counted from the first (unanswered) send.
        assert_eq!(handle.deadline(), start + Duration::from_secs(9));
    }

    #[test]
    fn a_concurrent_acquire_of_a_key_in_flight_is_contended() {
        let f = Fixture::new();
        let session = f.session();
        let (a, b) = f.run(async move {
            futures::join!(session.acquire_default("k"), session.acquire_default("k"))
        });
        assert!(matches!(a, Ok(None)), "{a:?}");
        assert!(matches!(b, Err(LockError::Contention { .. })), "{b:?}");
    }

    #[test]
    fn dropping_an_acquire_mid_flight_frees_the_key() {
        let f = Fixture::new();
        let session = f.session();
        let s = session.clone();
        let mut first = Box::pin(async move { s.acquire_default("k").await });
        assert!(
            (&mut first).now_or_never().is_none(),
            "sleeping after a 409"
        );
        drop(first);
        f.transport.push_acquire(grant(5));
        let handle = f
            .run(async move { session.acquire_default("k").await })
            .unwrap();
        assert_eq!(handle.unwrap().fencing_token(), 5);
    }

    /// Queued (`waitMillis` > 0): a 409 (the server-side wait ran out) and a lost answer are
    /// re-sent at once, keeping the ticket's place; a 429 (queue full) backs off; every L4
    /// carries the wait.
    #[test]
    fn a_queued_acquire_re_sends_at_once_and_backs_off_only_when_the_queue_is_full() {
        let f = Fixture::new();
        let session = f.session();
        let contended = || Err(ScriptedTransport::error(ErrorCode::LockContended));
        f.transport.push_acquire(contended());
        f.transport
            .push_acquire(Err(TransportError::Timeout(Duration::from_secs(2))));
        f.transport.push_acquire(contended());
        f.transport.push_acquire(grant(8));
        let policy = AcquirePolicy::new(PolicySettings {
            wait_millis: 1_000,
            ..PolicySettings::default()
        })
        .unwrap();
        let start = f.clock.now();
        let s = session.clone();
        let handle = f
            .run(async move { s.acquire("k", Duration::from_secs(10), &policy).await })
            .unwrap()
            .expect("granted");
        assert_eq!(handle.fencing_token(), 8);
        assert_eq!(f.clock.now(), start, "no backoff between the re-sends");
        let waits: Vec<Option<u64>> = f
            .transport
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                crate::transport::Call::Acquire(_, r) => Some(r.wait_millis),
                _ => None,
            })
            .collect();
        assert_eq!(waits, [Some(1_000); 4]);
        f.transport
            .push_acquire(Err(ScriptedTransport::error(ErrorCode::ContentionExceeded)));
        f.transport.push_acquire(grant(9));
        let start = f.clock.now();
        f.run(async move {
            session
                .acquire("other", Duration::from_secs(10), &policy)
                .await
        })
        .unwrap()
        .expect("granted");
        assert!(f.clock.now() > start, "a full queue is backed off from");
    }

    /// A lost session wakes its waiters at once instead of letting them spin to the budget.
    #[test]
    fn a_lost_session_fails_waiters_promptly() {
        let f = Fixture::new();
        let session = f.session();
        f.transport
            .push_heartbeat(Err(ScriptedTransport::error(ErrorCode::SessionNotFound)));
        let policy = AcquirePolicy::new(PolicySettings {
            total_budget: Duration::from_secs(60),
            max_attempts: 1_000,
            ..PolicySettings::default()
        })
        .unwrap();
        let start = f.clock.now();
        let result =
            f.run(async move { session.acquire("k", Duration::from_secs(10), &policy).await });
        assert_eq!(result.unwrap_err(), LockError::SessionLost);
        // The first heartbeat (5 s) answered 404; the waiter failed right then.
        assert_eq!(f.clock.now() - start, Duration::from_secs(5));
        assert_eq!(f.client.session_lost_count(), 1);
    }
}
