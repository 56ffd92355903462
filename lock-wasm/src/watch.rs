//! `watch(key)`: a key's L8 events as a [`Stream`] (C2 ct2-watch), over the JSON long poll
//! of the one `Transport::send` seam, so it runs the same natively, in wasm, in the test kit
//! and in the simulation.
//!
//! - Each poll asks for the events after the last id seen (none at first: the server answers
//!   a `snapshot`), waiting up to [`WATCH_WAIT`] for the first; its hop timeout is the request
//!   timeout plus that wait.
//! - Events are yielded in the server's order, each once; the id of each yielded event is the
//!   resume point, so what was not yet yielded is asked for again.
//! - A poll that fails for a passing reason (no answer, a network error, 503, 429 "too many
//!   watchers", a 5xx) is retried after a full-jitter delay on the client's clock and RNG
//!   seams, from the last id: nothing is lost, and a server that cannot serve the id (a
//!   restart, an id older than its window) answers one `reset` with the key's state, which
//!   the stream yields like any event. These failures are not yielded.
//! - The stream ends only after yielding a non-retryable error (401, 403, 400, an answer
//!   that is not the lock service's). Dropping it stops it: a poll in flight is abandoned.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use lock_api::WatchEvent;
use rand::rngs::SmallRng;

use crate::backoff::{millis, Backoff};
use crate::error::LockError;
use crate::parts::ClientParts;
use crate::transport::{call, TransportExt};

/// How long one poll may wait at the server for the first event (ASSUMPTION): under the
/// server's 30 s cap, and under the idle timeouts of common proxies (60 s).
pub const WATCH_WAIT: Duration = Duration::from_secs(25);
/// First window of the delay before a failed poll is retried (ASSUMPTION).
pub const WATCH_BASE_BACKOFF: Duration = Duration::from_millis(100);
/// Largest window of that delay (ASSUMPTION).
pub const WATCH_MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A stream of a key's events (see the module docs): `Send` natively, not on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchEvent, LockError>> + Send>>;
/// A stream of a key's events (see the module docs): `Send` natively, not on wasm32.
#[cfg(target_arch = "wasm32")]
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchEvent, LockError>>>>;

/// What one watch carries from poll to poll.
struct Watch {
    parts: Arc<ClientParts>,
    key: String,
    /// The id of the last event yielded: where the next poll resumes.
    after: Option<String>,
    /// Events polled and not yet yielded.
    pending: VecDeque<WatchEvent>,
    /// Polls failed in a row (the backoff's attempt).
    failures: u32,
    rng: Option<SmallRng>,
    ended: bool,
}

/// Watches `key` from the event after `after` (`None`: from a `snapshot` of now).
pub(crate) fn watch(parts: Arc<ClientParts>, key: &str, after: Option<String>) -> WatchStream {
    let watch = Watch {
        parts,
        key: key.to_owned(),
        after,
        pending: VecDeque::new(),
        failures: 0,
        rng: None,
        ended: false,
    };
    Box::pin(futures::stream::unfold(watch, |mut watch| async move {
        let next = watch.next().await?;
        Some((next, watch))
    }))
}

impl Watch {
    /// The next item: an event, or the error that ends the stream; `None` once it ended.
    async fn next(&mut self) -> Option<Result<WatchEvent, LockError>> {
        if self.ended {
            return None;
        }
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.after = Some(event.id.clone());
                return Some(Ok(event));
            }
            if let Err(err) = self.poll().await {
                if !passing(&err) {
                    self.ended = true;
                    return Some(Err(err));
                }
                self.pause().await;
            }
        }
    }

    /// One long poll; its events go to `pending`.
    async fn poll(&mut self) -> Result<(), LockError> {
        let parts = &*self.parts;
        let hop = parts.config.request_timeout + WATCH_WAIT;
        let wait = millis(WATCH_WAIT);
        let after = self.after.as_deref();
        let poll = parts.transport.events(&self.key, after, wait, hop);
        let batch = call(&*parts.clock, hop, poll)
            .await
            .map_err(|e| LockError::from_transport(e, &self.key))?;
        self.failures = 0;
        self.pending.extend(batch.events);
        Ok(())
    }

    /// The full-jitter delay before a failed poll is sent again.
    async fn pause(&mut self) {
        let parts = &*self.parts;
        let rng = self.rng.get_or_insert_with(|| parts.rng.rng());
        let backoff = Backoff::new(WATCH_BASE_BACKOFF, WATCH_MAX_BACKOFF);
        let delay = backoff.delay(self.failures, rng);
        self.failures = self.failures.saturating_add(1);
        parts.clock.sleep(delay).await;
    }
}

/// Whether a failed poll is retried: no answer, a replica that cannot serve now, too many
/// watchers, a server error. Everything else (401, 403, 400, not the lock service) ends it.
fn passing(err: &LockError) -> bool {
    match err {
        LockError::Timeout(_)
        | LockError::Network(_)
        | LockError::NotLeader { .. }
        | LockError::StoreUnavailable { .. }
        | LockError::Contention { .. } => true,
        LockError::Unexpected { status, .. } => *status >= 500,
        _ => false,
    }
}
