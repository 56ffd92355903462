//! [`Worker`]: one simulated client process — a real [`LockClient`] running rounds of
//! acquire (exclusive or shared, as the key's role draws it) → hold (maybe nested) →
//! release, its side effects raced against each handle's
//! `lost()` — and the pause a run may schedule for it ([`schedule_pause`]). It writes what
//! it did into the run's [`World`] and checks invariant 2 around each acquire.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use lock_api::{HoldKind, LockMode};
use rand::rngs::StdRng;
use rand::Rng;

use crate::clock::{Clock, ManualClock};
use crate::election::CampaignOptions;
use crate::error::LockError;
use crate::handle::LockHandle;
use crate::session::{LockClient, LockClientSession};
use crate::spawn::Spawner;

use super::executor::SimExecutor;
use super::scenario::{Scenario, ELECTION};
use super::world::{Effect, Granted, World};

/// One simulated client process.
pub(super) struct Worker {
    pub(super) id: usize,
    pub(super) client: LockClient,
    pub(super) clock: ManualClock,
    pub(super) scenario: Arc<Scenario>,
    pub(super) world: Arc<World>,
    pub(super) rng: StdRng,
    pub(super) effects_rng: StdRng,
    /// Draws each acquire's mode on a read-write key: a stream of its own, so runs without
    /// shared keys draw as they did before them.
    pub(super) holds_rng: StdRng,
    /// Draws which rounds campaign, in a run that elects: a stream of its own, so runs
    /// without the election draw as they did before it.
    pub(super) elect_rng: StdRng,
    /// Spawns the observer of each grant's `lost()` future in this client's process.
    pub(super) spawner: Arc<dyn Spawner>,
}

impl Worker {
    pub(super) async fn run(mut self) {
        let mut session: Option<LockClientSession> = None;
        for _ in 0..self.scenario.rounds {
            let think = Duration::from_millis(self.rng.random_range(0..=500));
            self.clock.sleep(think).await;
            if session.as_ref().is_none_or(|s| s.is_lost()) {
                session = self.client.open_session().await.ok();
            }
            let Some(s) = session.clone() else { continue };
            if self.round(&s).await == Err(LockError::SessionLost) {
                session = None;
            }
        }
        if let Some(s) = session {
            let _ = s.close().await;
        }
        *self.world.sessions_lost.lock().unwrap() += self.client.session_lost_count();
        self.world.finished.fetch_add(1, Ordering::SeqCst);
    }

    /// One acquire → hold (maybe nested) → release cycle; in a run that elects, followed
    /// about half the time by a campaign → lead → resign one.
    async fn round(&mut self, s: &LockClientSession) -> Result<(), LockError> {
        self.lock_round(s).await?;
        if self.scenario.elects && self.elect_rng.random_bool(0.5) {
            self.campaign_round(s).await?;
        }
        Ok(())
    }

    /// One acquire → hold (maybe nested) → release cycle.
    async fn lock_round(&mut self, s: &LockClientSession) -> Result<(), LockError> {
        let keys = &self.scenario.keys;
        let index = self.scenario.pick_key(&mut self.rng, &mut self.holds_rng);
        let key = keys[index].clone();
        let hold = self.scenario.roles[index].draw(&mut self.holds_rng);
        let Some(handle) = self.timed_acquire(s, &key, hold).await? else {
            return Ok(());
        };
        self.world
            .held
            .lock()
            .unwrap()
            .push((self.id, handle.clone()));
        let index = self.observe(&handle);
        // Not drawn at all when the scenario does not nest, so the seed's stream is unchanged.
        let nested = self.scenario.nests && self.rng.random_bool(0.2);
        if nested {
            if let Ok(Some(inner)) = self.timed_acquire(s, &key, hold).await {
                if inner.fencing_token() != handle.fencing_token() {
                    self.world
                        .violate(format!("nested acquire of {key} changed the token"));
                }
            }
        }
        let ttl_ms = self.scenario.lock_ttl.as_millis() as u64;
        let hold = Duration::from_millis(self.rng.random_range(0..=ttl_ms * 2));
        self.side_effects(&handle, index, hold).await;
        if nested {
            let _ = s.release(&handle).await;
        }
        self.world
            .held
            .lock()
            .unwrap()
            .retain(|(_, h)| !h.same_grant(&handle));
        s.release(&handle).await.map(|_| ())
    }

    /// Campaigns in [`ELECTION`] (giving up after three lock TTLs, by dropping the
    /// campaign), leads for a while with side effects raced against the term's end, then
    /// resigns. The leadership's handle is a grant like any other for the invariants, and is
    /// recorded as a leadership for the election's own two.
    async fn campaign_round(&mut self, s: &LockClientSession) -> Result<(), LockError> {
        let options = CampaignOptions {
            value: Some(format!("client-{}", self.id)),
            ttl: Some(self.scenario.lock_ttl),
        };
        let give_up = self.clock.sleep(self.scenario.lock_ttl * 3);
        let campaign = Box::pin(s.campaign(ELECTION, options));
        let leadership = match futures::future::select(campaign, give_up).await {
            futures::future::Either::Left((won, _)) => won?,
            futures::future::Either::Right(_) => return Ok(()),
        };
        let handle = leadership.handle().clone();
        let born_lost = handle.is_lost();
        self.world
            .leaders
            .lock()
            .unwrap()
            .push((self.clock.now(), handle.clone(), born_lost));
        self.world.terms_won.fetch_add(1, Ordering::SeqCst);
        self.world
            .held
            .lock()
            .unwrap()
            .push((self.id, handle.clone()));
        let index = self.observe(&handle);
        let ttl_ms = self.scenario.lock_ttl.as_millis() as u64;
        let lead = Duration::from_millis(self.elect_rng.random_range(0..=ttl_ms * 2));
        self.side_effects(&handle, index, lead).await;
        self.world
            .held
            .lock()
            .unwrap()
            .retain(|(_, h)| !h.same_grant(&handle));
        leadership.resign().await
    }

    /// Records the grant and, from a task of this client's process, when its `lost()` future
    /// completes. Returns its index in [`World::granted`].
    fn observe(&self, handle: &LockHandle) -> usize {
        let index = {
            let mut granted = self.world.granted.lock().unwrap();
            granted.push(Granted {
                client: self.id,
                handle: handle.clone(),
                since: handle.anchor(),
                at: self.clock.now(),
                report: None,
            });
            granted.len() - 1
        };
        let (handle, world, clock) = (handle.clone(), self.world.clone(), self.clock.clone());
        self.spawner.spawn(Box::pin(async move {
            let reason = handle.lost().await;
            world.granted.lock().unwrap()[index].report = Some((clock.now(), reason));
            world.reported.fetch_add(1, Ordering::SeqCst);
        }));
        index
    }

    /// Holds `handle` for `hold`, as a run of short side effects, each started only while the
    /// handle is valid and abandoned the moment it is reported lost.
    async fn side_effects(&mut self, handle: &LockHandle, index: usize, hold: Duration) {
        let until = self.clock.now() + hold;
        loop {
            let start = self.clock.now();
            if start >= until || handle.is_lost() {
                return;
            }
            let length = Duration::from_millis(self.effects_rng.random_range(20..=200));
            let effect = self.clock.sleep(length.min(until - start));
            let lost = Box::pin(handle.lost());
            let aborted = matches!(
                futures::future::select(effect, lost).await,
                futures::future::Either::Right(_)
            );
            self.world.effects.lock().unwrap().push(Effect {
                handle: index,
                start,
                end: self.clock.now(),
            });
            if aborted {
                return;
            }
        }
    }

    /// An acquire of `hold` with invariant 2 checked on its duration.
    async fn timed_acquire(
        &mut self,
        s: &LockClientSession,
        key: &str,
        hold: HoldKind,
    ) -> Result<Option<LockHandle>, LockError> {
        let policy = self.scenario.policy;
        let start = self.clock.now();
        let ttl = self.scenario.lock_ttl;
        let result = s.acquire_hold(key, hold, ttl, &policy).await;
        let end = self.clock.now();
        self.world.acquires.fetch_add(1, Ordering::SeqCst);
        let allowed = policy.total_budget() + self.world.paused_between(self.id, start, end);
        if end - start > allowed {
            self.world.violate(format!(
                "client {} acquire of {key} took {:?}, budget {:?} (+ pauses)",
                self.id,
                end - start,
                policy.total_budget()
            ));
        }
        if let Ok(Some(handle)) = &result {
            self.world.grants.fetch_add(1, Ordering::SeqCst);
            if handle.mode() == LockMode::Shared {
                self.world.shared_grants.fetch_add(1, Ordering::SeqCst);
            }
        }
        result
    }
}

/// With probability `chance`, pauses the client once for 0.1–6 s (sometimes past its
/// session TTL). Returns whether it did.
pub(super) fn schedule_pause(
    exec: &SimExecutor,
    world: &Arc<World>,
    client: usize,
    chance: f64,
    rng: &mut StdRng,
) -> bool {
    if !rng.random_bool(chance) {
        return false;
    }
    let at = Duration::from_millis(rng.random_range(0..=5_000));
    let length = Duration::from_millis(rng.random_range(100..=6_000));
    let (exec2, world) = (exec.clone(), world.clone());
    exec.spawn_in(0, async move {
        exec2.clock().sleep(at).await;
        world.pauses.lock().unwrap().push((client, at, at + length));
        exec2.pause(client, at + length);
    });
    true
}
