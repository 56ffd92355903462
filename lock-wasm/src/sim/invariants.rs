//! The checks of the invariants the module docs of [`super`] list: invariant 1 after every
//! poll ([`check_holders`]), 4 to 6 over the whole run ([`check_renewals`],
//! [`check_reports`]), 8 and 9 over the modelled server's history ([`check_history`]). Each
//! writes what it finds into the run's [`World`]. The others are checked where they happen:
//! 2 by the worker around each acquire, 3 by the network (or the fault injector) at each
//! send, 7 by the modelled server's queue.

use std::collections::BTreeMap;
use std::time::Duration;

use lock_api::{HoldKind, LockMode};

use crate::clock::{Clock, ManualClock};
use crate::config::ClientConfig;
use crate::handle::LostReason;
use crate::renewal::{self, RENEWAL_RESERVE};

use super::scenario::ELECTION;
use super::service::{Event, LiveHold, SimService, Step};
use super::watch::HeartbeatWatch;
use super::world::{grant_of, Granted, World};

/// Invariant 1, checked after every poll.
pub(super) fn check_holders(world: &World, service: &SimService, clock: &ManualClock) {
    let held = world.held.lock().unwrap().clone();
    // Per key, one entry per grant: two handles may share one.
    let mut valid: BTreeMap<String, BTreeMap<Grantee, ModeLimit>> = BTreeMap::new();
    for (client, handle) in held.iter().filter(|(_, h)| !h.is_lost()) {
        let key = handle.key();
        let (session, token, mode) = (handle.session_id(), handle.fencing_token(), handle.mode());
        let holds = service.holds(key);
        let is_held = |h: &LiveHold| h.session == session && h.token == token;
        if !holds.iter().any(|h| is_held(h) && h.kind.mode() == mode) {
            world.violate(format!(
                "client {client} believes it holds {key} {} with token {token} at {:?}, server holds are {holds:?}",
                mode.as_str(),
                clock.now()
            ));
        }
        let holds = valid.entry(key.to_owned()).or_default();
        holds.insert((token, session.to_owned()), (mode, handle.limit()));
    }
    for (key, holds) in &valid {
        let modes: Vec<ModeLimit> = holds.values().copied().collect();
        if let Some(wrong) = crowded(&modes) {
            world.violate(format!("{wrong} of {key} at {:?}: {holds:?}", clock.now()));
        }
    }
}

/// The election's invariant "never two leaders", checked after every poll: at most one
/// leadership of [`ELECTION`] whose handle is valid (its deadline, which keeps the safety
/// margin from the server's lease, not passed and no loss reported).
pub(super) fn check_leaders(world: &World, clock: &ManualClock) {
    let leaders = world.leaders.lock().unwrap();
    let mut live: Vec<u64> = leaders
        .iter()
        .filter(|(_, h, _)| !h.is_lost())
        .map(|(_, h, _)| h.fencing_token())
        .collect();
    live.sort_unstable();
    live.dedup();
    if live.len() > 1 {
        world.violate(format!(
            "two live leaders of {ELECTION} at {:?}: terms {live:?}",
            clock.now()
        ));
    }
}

/// The election's invariant "terms rise", over the whole run: each leadership that was
/// valid when its campaign returned has a greater term than every one before it.
pub(super) fn check_terms(world: &World) {
    let leaders = world.leaders.lock().unwrap();
    let mut last: Option<u64> = None;
    for (at, handle, born_lost) in leaders.iter() {
        if *born_lost {
            continue;
        }
        let term = handle.fencing_token();
        if last.is_some_and(|last| term <= last) {
            world.violate(format!(
                "leader terms of {ELECTION} did not rise: term {term} won at {at:?} after term {last:?}"
            ));
        }
        last = Some(term);
    }
}

/// Whose a grant is: its token and session.
type Grantee = (u64, String);
/// How a grant holds its key: its mode and (shared) limit.
type ModeLimit = (LockMode, Option<u32>);

/// What is wrong with holds of one key held at once, if anything: an exclusive holder beside
/// any other holder, or more shared holders than their limit.
fn crowded(holds: &[ModeLimit]) -> Option<&'static str> {
    let exclusive = holds
        .iter()
        .filter(|(m, _)| *m == LockMode::Exclusive)
        .count();
    let shared = holds.len() - exclusive;
    let limit = holds.iter().filter_map(|(_, limit)| *limit).min();
    if exclusive > 1 {
        Some("two holders")
    } else if exclusive == 1 && shared > 0 {
        Some("an exclusive holder beside a shared one")
    } else if limit.is_some_and(|limit| shared > limit as usize) {
        Some("more shared holders than their limit")
    } else {
        None
    }
}

/// Invariants 8 and 9, over the modelled server's history of the whole run.
pub(super) fn check_history(world: &World, service: &SimService) {
    let history = service
        .history()
        .expect("the seed runner's server records its history");
    for violation in history_violations(history.events()) {
        world.violate(violation);
    }
}

/// Replays a history key by key: each grant must fit beside the holds before it, take a
/// token above every earlier one of its key, and, when shared, pass no waiting writer (come
/// from a ticket older than every exclusive ticket waiting then).
fn history_violations(events: &[Event]) -> Vec<String> {
    let mut keys: BTreeMap<&str, KeyReplay> = BTreeMap::new();
    let mut found = Vec::new();
    for event in events {
        let key = keys.entry(&event.key).or_default();
        match &event.step {
            Step::Queued {
                ticket,
                session,
                kind: HoldKind::Exclusive,
            } => key.writers.push((*ticket, session.clone(), event.at)),
            Step::Queued { .. } => {}
            Step::Left { ticket } => key.writers.retain(|(t, _, _)| t != ticket),
            Step::Granted { .. } => found.extend(key.grant(event)),
            Step::Ended { token } => key.holds.retain(|(t, _)| t != token),
        }
    }
    found
}

/// One key's state in a replayed history.
#[derive(Default)]
struct KeyReplay {
    /// Live holds: token, kind.
    holds: Vec<(u64, HoldKind)>,
    last_token: u64,
    /// Exclusive tickets waiting: ticket, session, since when.
    writers: Vec<(u64, String, Duration)>,
}

impl KeyReplay {
    /// Replays the grant `event`; returns what it broke.
    fn grant(&mut self, event: &Event) -> Vec<String> {
        let Step::Granted {
            token,
            session,
            kind,
            ticket,
        } = &event.step
        else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let what = format!(
            "{} hold of {} by {session} with token {token} at {:?}",
            kind.mode().as_str(),
            event.key,
            event.at
        );
        if *token <= self.last_token {
            found.push(format!(
                "{what}: token not above the key's last, {}",
                self.last_token
            ));
        }
        self.last_token = self.last_token.max(*token);
        let passed = self
            .writers
            .iter()
            .find(|(t, _, _)| ticket.is_none_or(|own| own > *t));
        if let (HoldKind::Shared { .. }, Some((t, writer, since))) = (kind, passed) {
            found.push(format!(
                "{what}: granted past writer ticket {t} of {writer}, waiting since {since:?}"
            ));
        }
        self.holds.push((*token, *kind));
        let modes: Vec<_> = self
            .holds
            .iter()
            .map(|(_, k)| (k.mode(), k.limit()))
            .collect();
        if let Some(wrong) = crowded(&modes) {
            found.push(format!("{what}: {wrong}: {:?}", self.holds));
        }
        found
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
    // A grant answered after its first renewal was due (a slow or retried L4) may rightly
    // be lost before a heartbeat can help it.
    let in_time = |g: &Granted| {
        let ttl = g.handle.ttl();
        g.at <= renewal::renew_by(g.since, ttl, config.margin(ttl))
    };
    for g in granted.iter() {
        let Some((at, LostReason::DeadlinePassed)) = g.report else {
            continue;
        };
        if in_time(g) && kept_alive(g, g.handle.session_id(), at) {
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
        // The same holds for the server's side of such a grant. Its answer was lost and a
        // re-sent L4 got it back unrenewed (the model's deliberate difference, see
        // `service`) after its renewal was due, often after the lapse itself: the client
        // never held it in time to renew it. Its deadline counts from the first L4's send,
        // so the client reports it lost when it arrives (invariant 5) and never believes it
        // holds it past the lapse (invariant 1). Counting such a lapse as the client's
        // was checking "while the client holds it" wrongly.
        if !let_go && in_time(g) && kept_alive(g, &lapse.session, lapse.at) {
            world.violate(format!(
                "{grant:?} (client {}) expired at the server at {:?} although its session's heartbeats were all answered",
                g.client, lapse.at
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lock_api::HoldKind;

    use super::history_violations;
    use crate::sim::service::{Event, Step};

    const READ: HoldKind = HoldKind::Shared { limit: None };

    fn at(ms: u64, step: Step) -> Event {
        Event {
            at: Duration::from_millis(ms),
            key: "k".into(),
            step,
        }
    }

    fn queued(ticket: u64, kind: HoldKind) -> Step {
        Step::Queued {
            ticket,
            session: format!("s{ticket}"),
            kind,
        }
    }

    fn granted(token: u64, kind: HoldKind, ticket: Option<u64>) -> Step {
        Step::Granted {
            token,
            session: format!("holder{token}"),
            kind,
            ticket,
        }
    }

    /// The violations of `steps`, one per millisecond.
    fn check(steps: Vec<Step>) -> Vec<String> {
        let events: Vec<Event> = (0..).zip(steps).map(|(ms, step)| at(ms, step)).collect();
        history_violations(&events)
    }

    #[test]
    fn a_history_by_the_rules_passes() {
        let found = check(vec![
            granted(1, READ, None),
            queued(1, READ),
            queued(2, HoldKind::Exclusive),
            queued(3, READ),
            granted(2, READ, Some(1)),
            Step::Left { ticket: 1 },
            Step::Ended { token: 1 },
            Step::Ended { token: 2 },
            Step::Left { ticket: 2 },
            granted(3, HoldKind::Exclusive, Some(2)),
            Step::Ended { token: 3 },
            Step::Left { ticket: 3 },
            granted(4, READ, Some(3)),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_reader_beside_a_writer_fails() {
        let found = check(vec![
            granted(1, HoldKind::Exclusive, None),
            granted(2, READ, None),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("an exclusive holder beside a shared one"));
    }

    #[test]
    fn a_writer_beside_a_writer_fails() {
        let found = check(vec![
            granted(1, HoldKind::Exclusive, None),
            granted(2, HoldKind::Exclusive, None),
        ]);
        assert!(found[0].contains("two holders"), "{found:?}");
    }

    #[test]
    fn more_permits_than_the_limit_fail() {
        let two = HoldKind::Shared { limit: Some(2) };
        let fine = check(vec![granted(1, two, None), granted(2, two, None)]);
        assert!(fine.is_empty(), "{fine:?}");
        let found = check(vec![
            granted(1, two, None),
            granted(2, two, None),
            granted(3, two, None),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("more shared holders than their limit"));
    }

    #[test]
    fn a_token_not_above_the_keys_last_fails() {
        let found = check(vec![
            granted(2, READ, None),
            Step::Ended { token: 2 },
            granted(2, HoldKind::Exclusive, None),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("token not above the key's last, 2"));
    }

    #[test]
    fn a_reader_granted_past_a_waiting_writer_fails() {
        // A newcomer, and a reader queued after the writer: both pass it.
        let found = check(vec![
            granted(1, READ, None),
            queued(1, HoldKind::Exclusive),
            queued(2, READ),
            granted(2, READ, None),
            granted(3, READ, Some(2)),
        ]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found
            .iter()
            .all(|f| f.contains("past writer ticket 1 of s1")));
        // Once the writer's ticket left (it died), readers pass nothing.
        let found = check(vec![
            granted(1, READ, None),
            queued(1, HoldKind::Exclusive),
            Step::Left { ticket: 1 },
            granted(2, READ, None),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }
}
