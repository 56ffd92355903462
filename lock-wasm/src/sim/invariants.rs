//! The checks of the invariants the module docs of [`super`] list: invariant 1 after every
//! poll ([`check_holders`]), 4 to 6 over the whole run ([`check_renewals`],
//! [`check_reports`]). Each writes what it finds into the run's [`World`]. The others are
//! checked where they happen: 2 by the worker around each acquire, 3 by the network (or the
//! fault injector) at each send, 7 by the modelled server's queue.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::clock::{Clock, ManualClock};
use crate::config::ClientConfig;
use crate::handle::LostReason;
use crate::renewal::{self, RENEWAL_RESERVE};

use super::service::SimService;
use super::watch::HeartbeatWatch;
use super::world::{grant_of, Granted, World};

/// Invariant 1, checked after every poll.
pub(super) fn check_holders(world: &World, service: &SimService, clock: &ManualClock) {
    let held = world.held.lock().unwrap().clone();
    let mut valid: BTreeSet<(String, String, u64)> = BTreeSet::new();
    for (client, handle) in held.iter().filter(|(_, h)| !h.is_lost()) {
        let key = handle.key().to_owned();
        let grant = (
            key.clone(),
            handle.session_id().to_owned(),
            handle.fencing_token(),
        );
        valid.insert(grant.clone());
        let actual = service.holder(&key);
        if actual != Some((grant.1.clone(), grant.2)) {
            world.violate(format!(
                "client {client} believes it holds {key} with token {} at {:?}, server holder is {actual:?}",
                grant.2,
                clock.now()
            ));
        }
    }
    let keys: BTreeSet<&String> = valid.iter().map(|(k, _, _)| k).collect();
    if keys.len() < valid.len() {
        world.violate(format!("two holders at {:?}: {valid:?}", clock.now()));
    }
}

/// Invariants 5 and 6, over the whole run (see the module docs).
pub(super) fn check_reports(world: &World, end: Duration) {
    let granted = world.granted.lock().unwrap();
    let events = world.events.lock().unwrap();
    for g in granted.iter() {
        let grant = grant_of(&g.handle);
        let deadline = g.handle.deadline();
        // A grant can arrive after its deadline (it counts from an earlier unanswered L4):
        // then it is due to be reported when it arrives.
        let due = world.runs_again(g.client, deadline.max(g.at));
        let Some((at, reason)) = g.report else {
            if deadline <= end {
                world.violate(format!(
                    "{grant:?}: deadline {deadline:?} passed, never reported lost"
                ));
            }
            continue;
        };
        if at > due || (reason == LostReason::DeadlinePassed && at < deadline) {
            world.violate(format!(
                "{grant:?}: deadline {deadline:?} (client runs at {due:?}), reported {reason:?} at {at:?}"
            ));
        }
        if !reason.by_owner() && !events.contains(&(grant.clone(), at, reason)) {
            world.violate(format!(
                "{grant:?}: reported {reason:?} at {at:?} without a lock_lost event then"
            ));
        }
    }
    for e in world.effects.lock().unwrap().iter() {
        let g = &granted[e.handle];
        if let Some((at, reason)) = g.report {
            if e.start >= at || e.end > at {
                world.violate(format!(
                    "{:?}: side effect {:?}..{:?} not within its report ({reason:?} at {at:?})",
                    grant_of(&g.handle),
                    e.start,
                    e.end
                ));
            }
        }
    }
}

/// Invariant 4: while a client runs and gets every heartbeat of its session answered within
/// the renewal reserve, none of its locks is lost at its deadline, and none lapses at the
/// server before the client lets it go.
pub(super) fn check_renewals(
    world: &World,
    service: &SimService,
    watch: &HeartbeatWatch,
    config: &ClientConfig,
) {
    let granted = world.granted.lock().unwrap();
    let kept_alive = |g: &Granted, session: &str, until: Duration| {
        // The session's life up to `until` counts, not only the lock's: a heartbeat lost
        // before the grant can cost the session, and the lock with it.
        world.paused_between(g.client, Duration::ZERO, until) == Duration::ZERO
            && watch.all_answered(session, until, RENEWAL_RESERVE)
    };
    for g in granted.iter() {
        let Some((at, LostReason::DeadlinePassed)) = g.report else {
            continue;
        };
        // A grant answered after its first renewal was due (a slow or retried L4) may
        // rightly be lost before a heartbeat can help it.
        let ttl = g.handle.ttl();
        let in_time = g.at <= renewal::renew_by(g.since, ttl, config.margin(ttl));
        if in_time && kept_alive(g, g.handle.session_id(), at) {
            world.violate(format!(
                "{:?} (client {}) lost at its deadline {at:?} although its session's heartbeats were all answered",
                grant_of(&g.handle),
                g.client
            ));
        }
    }
    for lapse in service.lapses() {
        let grant = (lapse.key.clone(), lapse.token);
        // The latest handle of this grant granted before the lapse (orphans have none).
        let Some(g) = granted
            .iter()
            .rev()
            .find(|g| grant_of(&g.handle) == grant && g.since <= lapse.at)
        else {
            continue;
        };
        let let_go = g.report.is_some_and(|(at, _)| at <= lapse.at);
        if !let_go && kept_alive(g, &lapse.session, lapse.at) {
            world.violate(format!(
                "{grant:?} (client {}) expired at the server at {:?} although its session's heartbeats were all answered",
                g.client, lapse.at
            ));
        }
    }
}
