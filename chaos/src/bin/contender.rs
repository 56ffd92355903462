//! One contender: a separate OS process using the native SDK, looping
//! acquire → ledger write with the token → check the handle, work, commit write → release,
//! and writing what it observed to a JSON-lines history (see `lock_chaos::history`).
//!
//! The commit write after the "work" is where a SIGSTOP longer than the TTL shows: the lease
//! expires while the process is frozen, another contender takes the key and writes a higher
//! token, and on resume the commit is rejected FENCED_OUT; it is never retried.
//!
//! Its `--role` says how it holds and what it writes:
//! - `exclusive` (a holder of an exclusive key, or the writer of a read-write key): as above,
//!   into the key's own fenced ledger;
//! - `reader` (shared, no limit): never writes; it reads the key's ledger, works, and checks
//!   its handle again before releasing;
//! - `semaphore` (shared under `--permits`): writes as `exclusive` does, but into a ledger of
//!   its own, `<key>/by/<name>`, since a permit's token does not make the key exclusive.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use lock_api::paths;
use lock_api::{HoldKind, LedgerAppend, LedgerEntries, ReleaseRequest};
use lock_chaos::history::{
    now_micros, AcquireOutcome, Event, HistoryWriter, LedgerVerdict, Window,
};
use lock_lab::native::client_over;
use lock_wasm::native::HttpTransport;
use lock_wasm::{
    AcquirePolicy, ClientConfig, LockClientSession, LockError, LockHandle, PolicySettings,
    TransportExt,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Contender settings.
#[derive(Debug, Parser)]
struct Args {
    /// Server base URL.
    #[arg(long)]
    url: String,
    /// Process name in the history (`c7`).
    #[arg(long)]
    name: String,
    /// Keys contended for (comma separated).
    #[arg(long, value_delimiter = ',')]
    keys: Vec<String>,
    /// Where to write the history.
    #[arg(long)]
    history: PathBuf,
    /// How long to loop.
    #[arg(long, default_value_t = 30_000)]
    duration_ms: u64,
    /// Lock TTL.
    #[arg(long, default_value_t = 2_000)]
    lock_ttl_ms: u64,
    /// Session TTL.
    #[arg(long, default_value_t = 3_000)]
    session_ttl_ms: u64,
    /// Acquire budget.
    #[arg(long, default_value_t = 2_000)]
    budget_ms: u64,
    /// `waitMillis` of each L4 (0: poll with full jitter; more: wait in the server's queue).
    #[arg(long, default_value_t = 0)]
    wait_ms: u64,
    /// Longest "work" between the check and the commit write.
    #[arg(long, default_value_t = 200)]
    work_ms: u64,
    /// RNG seed (key choice, work time).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How it holds its keys and what it writes (see the module docs).
    #[arg(long, value_enum, default_value_t = Role::Exclusive)]
    role: Role,
    /// `semaphore` role: the key's permits, the limit of each of its shared holds.
    #[arg(long, default_value_t = 3)]
    permits: u32,
}

/// How a contender holds its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Role {
    /// Exclusive holds; writes the key's own ledger.
    Exclusive,
    /// Shared holds without a limit; never writes.
    Reader,
    /// Shared holds under `--permits`; writes a ledger of its own.
    Semaphore,
}

/// Everything one iteration needs.
struct Contender {
    args: Args,
    history: HistoryWriter,
    transport: Arc<HttpTransport>,
    http: reqwest::Client,
    policy: AcquirePolicy,
    rng: SmallRng,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let transport = Arc::new(HttpTransport::new(args.url.clone()));
    let client = client_over(transport.clone()).with_config(ClientConfig {
        session_ttl: Some(Duration::from_millis(args.session_ttl_ms)),
        request_timeout: Duration::from_millis(1_000),
        owner: Some(args.name.clone()),
        backend: "chaos".into(),
        ..ClientConfig::default()
    });
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_millis(args.budget_ms),
        wait_millis: args.wait_ms,
        ..AcquirePolicy::default().settings()
    })
    .expect("valid policy");
    let mut c = Contender {
        history: HistoryWriter::create(&args.history).expect("history file"),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("http client"),
        rng: SmallRng::seed_from_u64(args.seed),
        transport,
        policy,
        args,
    };
    let stop = Instant::now() + Duration::from_millis(c.args.duration_ms);
    let mut session: Option<LockClientSession> = None;
    while Instant::now() < stop {
        if session.as_ref().is_none_or(LockClientSession::is_lost) {
            match client.open_session().await {
                Ok(s) => session = Some(s),
                Err(_) => {
                    // Server down (a kill -9 restart): try again shortly.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            }
        }
        let s = session.clone().expect("opened above");
        if let Err(LockError::SessionLost) = c.round(&s).await {
            session = None;
        }
    }
    if let Some(s) = session {
        let _ = s.close().await;
    }
}

impl Contender {
    fn record(&mut self, event: Event) {
        self.history.record(&event).expect("write history");
    }

    /// One acquire → write → work → commit → release cycle.
    async fn round(&mut self, s: &LockClientSession) -> Result<(), LockError> {
        let key = self.args.keys[self.rng.random_range(0..self.args.keys.len())].clone();
        let name = self.args.name.clone();
        let start = now_micros();
        self.record(Event::AcquireStart {
            proc: name.clone(),
            key: key.clone(),
            at: start,
            budget_ms: self.args.budget_ms,
        });
        let hold = match self.args.role {
            Role::Exclusive => HoldKind::Exclusive,
            Role::Reader => HoldKind::Shared { limit: None },
            Role::Semaphore => HoldKind::Shared {
                limit: Some(self.args.permits),
            },
        };
        let result = s
            .acquire_hold(
                &key,
                hold,
                Duration::from_millis(self.args.lock_ttl_ms),
                &self.policy,
            )
            .await;
        let window = Window::since(start);
        self.record(Event::AcquireEnd {
            proc: name.clone(),
            key: key.clone(),
            at: window.recv,
            outcome: match &result {
                Ok(Some(h)) => AcquireOutcome::Granted {
                    token: h.fencing_token(),
                },
                Ok(None) => AcquireOutcome::NotGranted,
                Err(e) => AcquireOutcome::Failed {
                    error: e.to_string(),
                },
            },
        });
        let handle = match result {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(()),
            Err(e) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Err(e);
            }
        };
        self.record(Event::Grant {
            proc: name,
            session: s.id().to_owned(),
            key: key.clone(),
            token: handle.fencing_token(),
            window,
            mode: handle.mode(),
            limit: handle.limit(),
        });
        // Where this role writes: the key's own ledger, a ledger of its own, or nowhere.
        let ledger = match self.args.role {
            Role::Exclusive => Some(key.clone()),
            Role::Semaphore => Some(format!("{key}/by/{}", self.args.name)),
            Role::Reader => None,
        };
        if let Some(ledger) = &ledger {
            self.write(&handle, ledger, "begin").await;
        }
        self.sample(&key).await;
        if ledger.is_none() {
            self.read_ledger(&handle).await;
        }
        if self.check(&handle) {
            // The work between checking the handle and committing: a SIGSTOP landing here
            // outlives the lease, and the commit must then be fenced out.
            let work = self.rng.random_range(0..=self.args.work_ms);
            tokio::time::sleep(Duration::from_millis(work)).await;
            match &ledger {
                Some(ledger) => self.write(&handle, ledger, "commit").await,
                // A reader's work ends by looking again: still holding, or lost meanwhile.
                None => {
                    self.check(&handle);
                }
            }
        }
        self.release(s, &handle).await;
        Ok(())
    }

    /// Whether the handle still holds its lock, recorded with the window of the question.
    fn check(&mut self, handle: &LockHandle) -> bool {
        let sent = now_micros();
        let valid = !handle.is_lost();
        self.record(Event::HoldCheck {
            proc: self.args.name.clone(),
            key: handle.key().to_owned(),
            token: handle.fencing_token(),
            window: Window::since(sent),
            valid,
        });
        valid
    }

    /// A reader's look at the key's ledger: the highest token it accepted so far.
    async fn read_ledger(&mut self, handle: &LockHandle) {
        let url = format!("{}{}", self.args.url, paths::ledger(handle.key()));
        let sent = now_micros();
        let Ok(answer) = self.http.get(url).send().await else {
            return;
        };
        let Ok(entries) = answer.json::<LedgerEntries>().await else {
            return;
        };
        self.record(Event::LedgerRead {
            proc: self.args.name.clone(),
            key: handle.key().to_owned(),
            token: handle.fencing_token(),
            window: Window::since(sent),
            highest: entries.highest_token,
        });
    }

    /// One write to `ledger` with the handle's token; never retried.
    async fn write(&mut self, handle: &LockHandle, ledger: &str, entry: &str) {
        let url = format!("{}{}", self.args.url, paths::ledger(ledger));
        let body = LedgerAppend {
            fencing_token: handle.fencing_token(),
            entry: format!("{} {entry}", self.args.name),
        };
        let sent = now_micros();
        let answer = self.http.post(url).json(&body).send().await;
        let window = Window::since(sent);
        let verdict = match answer {
            Ok(r) if r.status().as_u16() == 204 => LedgerVerdict::Accepted,
            Ok(r) if r.status().as_u16() == 409 => {
                let text = r.text().await.unwrap_or_default();
                if text.contains("FENCED_OUT") {
                    LedgerVerdict::FencedOut
                } else {
                    LedgerVerdict::Indeterminate
                }
            }
            _ => LedgerVerdict::Indeterminate,
        };
        self.record(Event::LedgerWrite {
            proc: self.args.name.clone(),
            key: ledger.to_owned(),
            token: handle.fencing_token(),
            window,
            verdict,
            lost_after: handle.is_lost(),
        });
    }

    /// One L7 read of `key`.
    async fn sample(&mut self, key: &str) {
        let sent = now_micros();
        if let Ok(state) = self.transport.read_lock(key, Duration::from_secs(1)).await {
            let window = Window::since(sent);
            self.record(Event::l7_sample(&self.args.name, key, &state, window));
        }
    }

    /// L6 straight through the transport first, so a 204 (the lock was live) is told apart
    /// from LOCK_LOST, which the SDK folds into `Ok`; then the SDK release for its own
    /// bookkeeping (its second L6 is a benign LOCK_LOST).
    async fn release(&mut self, s: &LockClientSession, handle: &LockHandle) {
        let request = ReleaseRequest {
            fencing_token: handle.fencing_token(),
            session_id: Some(s.id().to_owned()),
        };
        let sent = now_micros();
        let answer = self
            .transport
            .release(handle.key(), &request, Duration::from_secs(1))
            .await;
        self.record(Event::Release {
            proc: self.args.name.clone(),
            key: handle.key().to_owned(),
            token: handle.fencing_token(),
            window: Window::since(sent),
            ok: answer.is_ok(),
        });
        let _ = s.release(handle).await;
    }
}
