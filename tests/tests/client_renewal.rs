//! Lock renewal against a real lock-server: a lock far shorter than its session's heartbeat
//! period stays held while heartbeats are answered (the schedule renews it every third of
//! its TTL), and when the client's network path is cut (a TCP proxy that drops it) the
//! handle is reported lost at its deadline — its `lost()` future completes and a `lock_lost`
//! event fires — and another session takes the key over with a higher token.
//!
//! The one timing bound here is a correctness bound, not a speed goal: the loss must be
//! reported at the deadline, not whenever someone next looks. It allows one scheduling slice
//! of lateness; the behaviour it rules out misses the deadline by seconds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_e2e::{ServerOptions, TestServer};
use lock_wasm::native::{HttpTransport, OsRngSource, TokioClock, TokioSpawner};
use lock_wasm::{
    AcquirePolicy, ClientConfig, ClientEvent, Clock, EventSink, LockClient, LostReason,
    PolicySettings,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How late a timer may fire on a loaded two-core machine and still count as "at" its
/// instant (ASSUMPTION for these tests).
const SCHEDULING_SLICE: Duration = Duration::from_millis(250);

const SESSION_TTL: Duration = Duration::from_secs(15);
const LOCK_TTL: Duration = Duration::from_millis(500);

fn config() -> ClientConfig {
    ClientConfig {
        session_ttl: Some(SESSION_TTL),
        backend: "sqlite".into(),
        ..ClientConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500ms_lock_on_a_15s_session_stays_held_through_5s_of_work() {
    let server = TestServer::start(ServerOptions::new());
    let api = server.api();
    let session = LockClient::native(server.base_url())
        .with_config(config())
        .open_session()
        .await
        .unwrap();
    let handle = session
        .acquire("renewal/short", LOCK_TTL, &AcquirePolicy::default())
        .await
        .unwrap()
        .expect("free key");

    // Five seconds of "work" (ten times the lock's TTL, a third of the session's), the
    // server's view read every 100 ms.
    let start = Instant::now();
    let mut reads = 0;
    while start.elapsed() < Duration::from_secs(5) {
        let holder = api.lock_state("renewal/short").await.holder;
        assert_eq!(
            holder.map(|h| h.fencing_token),
            Some(handle.fencing_token()),
            "L7 after {:?} of work",
            start.elapsed()
        );
        assert!(!handle.is_lost(), "{handle:?}");
        reads += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reads >= 20, "only {reads} L7 reads");
    assert_eq!(handle.lost_reason(), None);
    session.release(&handle).await.unwrap();
    session.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_its_path_cut_the_lock_is_lost_at_its_deadline_and_taken_over() {
    let server = TestServer::start(ServerOptions::new());
    let proxy = Proxy::start(server.addr()).await;
    let clock = Arc::new(TokioClock::new());
    let events = Arc::new(Timed::new(clock.clone()));
    let client = LockClient::new(
        Arc::new(HttpTransport::new(proxy.base_url())),
        clock.clone(),
        Arc::new(TokioSpawner),
        Arc::new(OsRngSource),
    )
    .with_events(events.clone())
    .with_config(config());
    let session = client.open_session().await.unwrap();
    let handle = session
        .acquire("renewal/blocked", LOCK_TTL, &AcquirePolicy::default())
        .await
        .unwrap()
        .expect("free key");

    proxy.cut();
    let reason = tokio::time::timeout(Duration::from_secs(10), handle.lost())
        .await
        .expect("the handle is reported lost long before the session is");
    let lost_at = clock.now();
    // No renewal gets through any more, so the deadline is final now.
    let deadline = handle.deadline();
    assert_eq!(reason, LostReason::DeadlinePassed);
    assert!(
        lost_at >= deadline && lost_at - deadline <= SCHEDULING_SLICE,
        "deadline {deadline:?}, reported at {lost_at:?}"
    );
    let lost: Vec<_> = events.lost();
    assert_eq!(lost.len(), 1, "{lost:?}");
    let (at, event) = &lost[0];
    assert_eq!(
        event,
        &ClientEvent::Lost {
            key: "renewal/blocked".into(),
            fencing_token: handle.fencing_token(),
            reason: LostReason::DeadlinePassed,
        }
    );
    assert!(*at >= deadline && *at - deadline <= SCHEDULING_SLICE);
    assert!(
        !session.is_lost(),
        "only the lock is gone; the session has 15 s"
    );

    // Once the server expires the lock, another session gets the key, with a higher token.
    let other = LockClient::native(server.base_url())
        .open_session()
        .await
        .unwrap();
    let policy = AcquirePolicy::new(PolicySettings {
        total_budget: Duration::from_secs(10),
        max_attempts: 1_000,
        ..PolicySettings::default()
    })
    .unwrap();
    let taken = other
        .acquire("renewal/blocked", Duration::from_secs(10), &policy)
        .await
        .unwrap()
        .expect("granted once the server expired the lapsed lock");
    assert!(taken.fencing_token() > handle.fencing_token());
    other.release(&taken).await.unwrap();
    other.close().await.unwrap();
    proxy.restore();
    session.release(&handle).await.unwrap(); // LOCK_LOST is benign
    session.close().await.unwrap();
}

/// Client events with the client clock's reading when each was emitted.
struct Timed {
    clock: Arc<TokioClock>,
    events: Mutex<Vec<(Duration, ClientEvent)>>,
}

impl Timed {
    fn new(clock: Arc<TokioClock>) -> Self {
        Timed {
            clock,
            events: Mutex::default(),
        }
    }

    fn lost(&self) -> Vec<(Duration, ClientEvent)> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|(_, e)| e.name() == "lock_lost")
            .cloned()
            .collect()
    }
}

impl EventSink for Timed {
    fn on_event(&self, event: &ClientEvent) {
        let at = self.clock.now();
        self.events.lock().unwrap().push((at, event.clone()));
    }
}

/// A TCP proxy in front of the server whose path can be cut, as a dead network would:
/// [`Proxy::cut`] drops every open connection and leaves new ones accepted but never
/// forwarded (requests hang until the client's own timeout); [`Proxy::restore`] forwards
/// new connections again.
struct Proxy {
    addr: String,
    cut: watch::Sender<bool>,
}

impl Proxy {
    async fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (cut, _) = watch::channel(false);
        let (upstream, watching) = (upstream.to_owned(), cut.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(client, upstream.clone(), watching.subscribe()));
            }
        });
        Proxy { addr, cut }
    }

    fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn cut(&self) {
        self.cut.send_replace(true);
    }

    fn restore(&self) {
        self.cut.send_replace(false);
    }
}

/// One connection through the proxy: piped to `upstream` until the path is cut; accepted
/// while cut, it is held open and never answered.
async fn forward(mut client: TcpStream, upstream: String, mut cut: watch::Receiver<bool>) {
    if *cut.borrow_and_update() {
        std::future::pending::<()>().await;
    }
    let Ok(mut server) = TcpStream::connect(&upstream).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = cut.wait_for(|cut| *cut) => {} // dropping both sockets cuts the connection
    }
}
