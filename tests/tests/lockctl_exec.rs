//! `lockctl exec` against real lock-server processes: jobs on one key run one after another
//! in the order they were started, `--no-wait` is not granted at once, a command that
//! outlives its lock (revoked, or heartbeats unanswered) is stopped by SIGTERM and, if it
//! ignores that, SIGKILL; SIGINT reaches the command and the lock is released after it
//! ended; a kill -9 of lockctl leaves the lock to its TTL; shared holds run side by side up
//! to their limit.
//!
//! The job scripts write lines to files and wait for files the test creates, so every check
//! waits for a state, never for an amount of time.

mod lockctl_kit;

use std::io::Write;

use lock_e2e::launcher::{server_binary, Launch};
use lock_e2e::{Api, ServerOptions, TestServer};
use lockctl_kit::{eventually, line_in, start, Dir, LOST, NOT_GRANTED};

const ADMIN: &str = "lockctl-exec-admin";

fn server() -> TestServer {
    TestServer::start(ServerOptions::new().admin_token(ADMIN))
}

/// A job that logs its start, waits for the file `go`, and logs its end, each line with its
/// name and fencing token.
const WAITS_FOR_GO: &str = "echo \"start $NAME $LOCK_FENCING_TOKEN\" >> log; \
     while [ ! -e go ]; do sleep 0.02; done; echo \"end $NAME $LOCK_FENCING_TOKEN\" >> log";

/// Waits until L7 counts `n` waiters on `key`.
async fn waiters(api: &Api, key: &str, n: u32) {
    eventually(&format!("{n} waiting on {key}"), || async {
        (api.lock_state(key).await.waiter_count == n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_on_one_key_run_one_after_another_in_the_order_started() {
    let server = server();
    let api = server.api();
    let dir = Dir::new();
    let url = server.base_url();
    let exec = ["exec", "jobs/nightly", "--", "sh", "-c", WAITS_FOR_GO];
    let mut a = start(&dir, "a", &url, &[("NAME", "a")], &exec);
    line_in(&dir, "log", "start a").await;
    let mut b = start(&dir, "b", &url, &[("NAME", "b")], &exec);
    waiters(&api, "jobs/nightly", 1).await;
    let mut c = start(&dir, "c", &url, &[("NAME", "c")], &exec);
    waiters(&api, "jobs/nightly", 2).await;
    assert_eq!(
        dir.lines("log").len(),
        1,
        "b and c wait while a holds the key"
    );

    std::fs::write(dir.path("go"), "").unwrap();
    for (name, job) in [("a", &mut a), ("b", &mut b), ("c", &mut c)] {
        assert_eq!(job.code().await, 0, "{name}: {}", job.stderr());
    }
    let lines = dir.lines("log");
    let words: Vec<Vec<&str>> = lines.iter().map(|l| l.split(' ').collect()).collect();
    let order: Vec<String> = words.iter().map(|w| format!("{} {}", w[0], w[1])).collect();
    assert_eq!(
        order,
        ["start a", "end a", "start b", "end b", "start c", "end c"],
        "never overlapping, in the order started: {lines:?}"
    );
    let tokens: Vec<u64> = words.iter().map(|w| w[2].parse().unwrap()).collect();
    for job in tokens.chunks(2) {
        assert_eq!(job[0], job[1], "one token per job: {lines:?}");
    }
    assert!(
        tokens[1] < tokens[2] && tokens[3] < tokens[4],
        "tokens rise: {lines:?}"
    );
    assert!(api.lock_state("jobs/nightly").await.holder.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_key_is_not_granted_without_waiting_and_the_holder_is_named() {
    let server = server();
    let api = server.api();
    let dir = Dir::new();
    let url = server.base_url();
    let exec = ["exec", "jobs/busy", "--", "sh", "-c", WAITS_FOR_GO];
    let mut holder = start(&dir, "holder", &url, &[("NAME", "a")], &exec);
    line_in(&dir, "log", "start a").await;
    let held = api.lock_state("jobs/busy").await.holder.expect("held");

    let tries = [
        ["exec", "jobs/busy", "--no-wait", "--", "touch", "ran"],
        ["exec", "jobs/busy", "--wait-ms=300", "--", "touch", "ran"],
    ];
    for (i, args) in tries.iter().enumerate() {
        let mut busy = start(&dir, &format!("busy{i}"), &url, &[], args);
        assert_eq!(busy.code().await, NOT_GRANTED, "{}", busy.stderr());
        busy.assert_clear_failure("not granted");
        busy.assert_clear_failure(&held.holder_id);
        busy.assert_clear_failure(held.owner.as_deref().expect("lockctl names its owner"));
    }
    assert!(!dir.path("ran").exists(), "no command ran without the lock");
    assert_eq!(dir.lines("log").len(), 1, "the holder was still holding");

    std::fs::write(dir.path("go"), "").unwrap();
    assert_eq!(holder.code().await, 0, "{}", holder.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_holds_run_side_by_side_up_to_their_limit() {
    let server = server();
    let api = server.api();
    if !grants_shared_holds(&api).await {
        // Visible without --nocapture: the harness captures only the print macros.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED shared_holds_run_side_by_side_up_to_their_limit: this lock-server answers \
             a shared L4 with an exclusive grant (its store grants exclusive holds only)"
        );
        return;
    }
    let dir = Dir::new();
    let url = server.base_url();
    let shared = [
        "exec",
        "jobs/reports",
        "--shared",
        "--limit=2",
        "--",
        "sh",
        "-c",
        WAITS_FOR_GO,
    ];
    let mut a = start(&dir, "a", &url, &[("NAME", "a")], &shared);
    line_in(&dir, "log", "start a").await;
    let mut b = start(&dir, "b", &url, &[("NAME", "b")], &shared);
    line_in(&dir, "log", "start b").await;
    let state = api.lock_state("jobs/reports").await;
    assert_eq!(state.holders.len(), 2, "both hold it at once: {state:?}");
    assert_eq!(state.limit, Some(2), "{state:?}");

    let third = [
        "exec",
        "jobs/reports",
        "--shared",
        "--limit=2",
        "--no-wait",
        "--",
        "touch",
        "ran",
    ];
    let writer = ["exec", "jobs/reports", "--no-wait", "--", "touch", "ran"];
    for (name, args) in [("third", &third[..]), ("writer", &writer[..])] {
        let mut refused = start(&dir, name, &url, &[], args);
        assert_eq!(
            refused.code().await,
            NOT_GRANTED,
            "{name}: {}",
            refused.stderr()
        );
    }
    assert!(
        !dir.path("ran").exists(),
        "no third holder, no writer beside the readers"
    );

    std::fs::write(dir.path("go"), "").unwrap();
    assert_eq!(a.code().await, 0, "{}", a.stderr());
    assert_eq!(b.code().await, 0, "{}", b.stderr());
    let tokens: Vec<String> = dir
        .lines("log")
        .iter()
        .map(|l| l.split(' ').nth(2).unwrap().to_owned())
        .collect();
    assert_ne!(tokens[0], tokens[1], "each hold has a token of its own");
}

/// Whether the server grants a shared L4 as shared: the store of a server may still grant
/// every hold exclusive, which lockctl accepts (a stronger hold) but this test cannot use.
async fn grants_shared_holds(api: &Api) -> bool {
    let session = api.open_session(15_000).await;
    let body = serde_json::json!({ "sessionId": session.session_id, "mode": "shared" });
    let reply = api
        .json("POST", &lock_api::paths::acquire("probe/shared"), &body)
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    api.close_session(&session.session_id).await;
    reply.parse::<lock_api::LockGrant>().mode == lock_api::LockMode::Shared
}

/// Logs its start with its pid, and `TERM` when SIGTERM comes, then exits 0.
const STOPS_ON_TERM: &str = "trap 'echo TERM >> log; exit 0' TERM; echo \"start $$\" >> log; \
     while :; do sleep 0.02; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_lock_stops_the_command_with_sigterm() {
    let server = server();
    let api = server.api();
    let dir = Dir::new();
    let args = [
        "exec",
        "jobs/revoked",
        "--ttl-ms=1500",
        "--",
        "sh",
        "-c",
        STOPS_ON_TERM,
    ];
    let mut job = start(&dir, "job", &server.base_url(), &[], &args);
    line_in(&dir, "log", "start").await;
    let revoked = api.revoke("jobs/revoked", "stuck job").await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    assert_eq!(job.code().await, LOST, "{}", job.stderr());
    job.assert_clear_failure("was lost while the command ran");
    assert!(
        dir.lines("log").contains(&"TERM".to_owned()),
        "SIGTERM reached the command"
    );
    assert!(api.lock_state("jobs/revoked").await.holder.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let server = server();
    let api = server.api();
    let dir = Dir::new();
    let script = "trap '' TERM; echo \"start $$\" >> log; while :; do sleep 0.02; done";
    let args = [
        "exec",
        "jobs/stubborn",
        "--ttl-ms=1500",
        "--kill-after-ms=300",
        "--",
        "sh",
        "-c",
        script,
    ];
    let mut job = start(&dir, "job", &server.base_url(), &[], &args);
    let started = line_in(&dir, "log", "start").await;
    let pid = started.trim_start_matches("start ").to_owned();
    let revoked = api.revoke("jobs/stubborn", "stuck job").await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    // Without the SIGKILL the command would run on and lockctl would wait for it.
    assert_eq!(job.code().await, LOST, "{}", job.stderr());
    assert!(lockctl_kit::ended(&pid), "the command was killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_heartbeats_stop_the_command_at_the_locks_deadline() {
    // Started here rather than as a TestServer: the test stops the process (SIGSTOP), so
    // every heartbeat goes unanswered while the connection stays open.
    let data = tempfile::tempdir().unwrap();
    let server = Launch::new(&server_binary(), data.path())
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let pid = server.pid().expect("running") as libc::pid_t;
    let dir = Dir::new();
    let args = [
        "exec",
        "jobs/silent",
        "--ttl-ms=1500",
        "--",
        "sh",
        "-c",
        STOPS_ON_TERM,
    ];
    let mut job = start(&dir, "job", &server.base_url(), &[], &args);
    line_in(&dir, "log", "start").await;
    // SAFETY: kill(2) on the server process this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let code = job.code().await;
    // SAFETY: as above; the server goes on for the drop's kill -9.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert_eq!(code, LOST, "{}", job.stderr());
    job.assert_clear_failure("deadline passed");
    assert!(
        dir.lines("log").contains(&"TERM".to_owned()),
        "SIGTERM reached the command"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_reaches_the_command_and_the_lock_is_released_after_it_ended() {
    let server = server();
    let api = server.api();
    let dir = Dir::new();
    // On SIGINT the job records L7 (through lockctl status, as any script could) before it
    // exits 7: the lock must still be held then.
    let script = "trap 'echo INT >> log; lockctl_status >> log; exit 7' INT; \
         echo \"start $LOCK_FENCING_TOKEN\" >> log; while :; do sleep 0.02; done";
    let script = script.replace(
        "lockctl_status",
        &format!(
            "{} status jobs/interrupted --json",
            lockctl_kit::lockctl_bin().display()
        ),
    );
    let args = ["exec", "jobs/interrupted", "--", "sh", "-c", &script];
    let mut job = start(&dir, "job", &server.base_url(), &[], &args);
    let started = line_in(&dir, "log", "start").await;
    let token: u64 = started.trim_start_matches("start ").parse().unwrap();
    job.signal(libc::SIGINT);
    assert_eq!(
        job.code().await,
        7,
        "the command's status: {}",
        job.stderr()
    );
    let lines = dir.lines("log");
    assert_eq!(lines.get(1).map(String::as_str), Some("INT"), "{lines:?}");
    let during: lock_api::LockState = serde_json::from_str(&lines[2]).expect("L7 JSON");
    assert_eq!(
        during.holder.map(|h| h.fencing_token),
        Some(token),
        "held while the command handled SIGINT"
    );
    assert!(
        api.lock_state("jobs/interrupted").await.holder.is_none(),
        "released before lockctl exited"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_lockctl_leaves_the_lock_to_its_ttl() {
    let server = server();
    let api = server.api();
    let dir = Dir::new();
    let script = "echo $$ > pid; echo \"start $LOCK_FENCING_TOKEN\" >> log; \
         while :; do sleep 0.02; done";
    let args = [
        "exec",
        "jobs/orphan",
        "--ttl-ms=1500",
        "--session-ttl-ms=1500",
        "--",
        "sh",
        "-c",
        script,
    ];
    let mut job = start(&dir, "job", &server.base_url(), &[], &args);
    let started = line_in(&dir, "log", "start").await;
    let token: u64 = started.trim_start_matches("start ").parse().unwrap();
    let held = api.lock_state("jobs/orphan").await.holder.expect("held");
    assert_eq!(held.fencing_token, token);

    job.signal(libc::SIGKILL);
    job.exit().await;
    eventually("the lock expires with its TTL", || async {
        api.lock_state("jobs/orphan")
            .await
            .holder
            .is_none()
            .then_some(())
    })
    .await;
    // The command, in a group of its own, is not told: the lock's token fences it out.
    lockctl_kit::kill_group(&dir.path("pid"));
}
