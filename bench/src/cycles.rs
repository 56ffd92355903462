//! One acquire+release cycle per compared system, and the closed-loop load generator that
//! runs `clients` of them for a fixed window. Each client owns its own key, so a cycle
//! measures the service's cost of a grant and a release, not contention.
//!
//! The HTTP cycle is L1 once, then L4 + L6; the others are the same two writes in each
//! system's own terms.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use lock_api::{paths, SessionOpened};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A reqwest client builder keeping enough idle connections for every bench client.
fn pooled() -> reqwest::ClientBuilder {
    reqwest::Client::builder().pool_max_idle_per_host(128)
}

/// The compare-and-delete release for Redis: delete only if the key still holds our token
/// (the same predicate as L6).
const REDIS_RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// Lock TTL every system is asked for, ms.
const TTL_MILLIS: u64 = 10_000;

/// Session TTL of the HTTP bench clients, ms: the longest the server allows (5 minutes),
/// so a bench window never needs a heartbeat.
pub const SESSION_TTL_MILLIS: u64 = lock_api::limits::TTL_MILLIS_MAX;

/// Distinguishes keys of successive runs so no run sees another's leftovers.
static RUN: AtomicU64 = AtomicU64::new(0);

/// How to reach one compared system.
// At most a few dozen of these exist per run; boxing the etcd client would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Target {
    /// lock-server or the trivial handler, over HTTP with reqwest.
    Http {
        /// `http://127.0.0.1:PORT` (or `https://`).
        base: String,
        /// Shared client: over HTTP/1.1 a pool of one connection per concurrent client, over
        /// HTTP/2 one connection all clients multiplex over.
        http: reqwest::Client,
    },
    /// `redis-server`: `SET key token NX PX ttl`, then the compare-delete script.
    Redis {
        /// Its address.
        addr: SocketAddr,
    },
    /// etcd: a txn putting the key if absent (with a lease), then a txn deleting it if its
    /// create revision is still our token.
    Etcd {
        /// A connected client (cloned per bench client; clones share one HTTP/2 channel,
        /// as etcd-client users normally do).
        client: etcd_client::Client,
        /// The lease every key is attached to.
        lease: i64,
        /// Which transactions a cycle sends.
        shape: EtcdShape,
    },
}

/// The transactions of a raw etcd cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtcdShape {
    /// The least a lock needs: put-if-absent with a lease, delete-if-token.
    Minimal,
    /// The very transactions a replica sends for L4 and L6 (session compare, lock and index
    /// puts, compare-and-delete of both), without the HTTP hop: splits the gap between a
    /// replica and [`EtcdShape::Minimal`] into transaction shape and HTTP.
    Replica,
}

impl Target {
    /// An HTTP target at `addr`.
    pub fn http(addr: SocketAddr) -> Target {
        Target::Http {
            base: format!("http://{addr}"),
            http: pooled().build().expect("reqwest client"),
        }
    }

    /// An HTTPS target at `addr` trusting only the certificate `ca_pem`, over `version`
    /// (ALPN): HTTP/2 multiplexes every client over one connection, as a browser or one SDK
    /// client shared by many tasks does; HTTP/1.1 pools a connection per concurrent client.
    pub fn https(addr: SocketAddr, ca_pem: &[u8], version: reqwest::Version) -> Target {
        let ca = reqwest::Certificate::from_pem(ca_pem).expect("CA certificate");
        let builder = pooled()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca);
        let builder = match version {
            reqwest::Version::HTTP_11 => builder.http1_only(),
            _ => builder,
        };
        Target::Http {
            base: format!("https://{addr}"),
            http: builder.build().expect("reqwest client"),
        }
    }

    /// The HTTP version a request to this target goes over (`None` for non-HTTP targets).
    pub async fn http_version(&self) -> Option<reqwest::Version> {
        let Target::Http { base, http } = self else {
            return None;
        };
        let response = http.get(format!("{base}/healthz")).send().await.ok()?;
        Some(response.version())
    }

    /// An etcd target at `addr` with a fresh 10-minute lease.
    pub async fn etcd(addr: SocketAddr, shape: EtcdShape) -> Target {
        let (client, lease) = etcd_with_lease(addr).await;
        Target::Etcd {
            client,
            lease,
            shape,
        }
    }

    async fn connect(&self, key: String) -> Cycler {
        match self {
            Target::Http { base, http } => {
                let session = open_session(http, base, SESSION_TTL_MILLIS)
                    .await
                    .session_id;
                Cycler::Http {
                    acquire_url: format!("{base}{}", paths::acquire(&key)),
                    release_url: format!("{base}{}", paths::release(&key)),
                    http: http.clone(),
                    session,
                }
            }
            Target::Redis { addr } => {
                let mut conn = Resp::connect(*addr).await;
                let sha = conn.call(&["SCRIPT", "LOAD", REDIS_RELEASE]).await;
                Cycler::Redis {
                    conn,
                    key,
                    sha: sha.text(),
                    token: 0,
                }
            }
            Target::Etcd {
                client,
                lease,
                shape,
            } => {
                let mut client = client.clone();
                // The replica shape compares a session record's revision, as L4 does.
                let session = format!("{key}/s");
                let session_revision = client
                    .put(session.clone(), "session", Some(lease_on(*lease)))
                    .await
                    .expect("etcd session put")
                    .header()
                    .expect("header")
                    .revision();
                Cycler::Etcd {
                    client,
                    lease: *lease,
                    key,
                    shape: *shape,
                    session,
                    session_revision,
                }
            }
        }
    }
}

/// One bench client's connection state.
// One per bench client (≤ 50 alive); the size difference is immaterial.
#[allow(clippy::large_enum_variant)]
pub enum Cycler {
    /// See [`Target::Http`].
    Http {
        /// L4 URL of this client's key.
        acquire_url: String,
        /// L6 URL of this client's key.
        release_url: String,
        /// Shared pool.
        http: reqwest::Client,
        /// This client's session.
        session: String,
    },
    /// See [`Target::Redis`].
    Redis {
        /// This client's own connection.
        conn: Resp,
        /// This client's key.
        key: String,
        /// SHA of the loaded release script.
        sha: String,
        /// Next token to write (a fencing-token stand-in).
        token: u64,
    },
    /// See [`Target::Etcd`].
    Etcd {
        /// Client handle.
        client: etcd_client::Client,
        /// Lease id.
        lease: i64,
        /// This client's key.
        key: String,
        /// Which transactions to send.
        shape: EtcdShape,
        /// This client's session record (used by [`EtcdShape::Replica`]).
        session: String,
        /// Its mod revision.
        session_revision: i64,
    },
}

impl Cycler {
    /// One acquire + release; returns the acquire's latency. Panics if a grant is refused:
    /// every client owns its key, so a refusal means the system under test is broken.
    pub async fn cycle(&mut self) -> Duration {
        let start = Instant::now();
        match self {
            Cycler::Http {
                acquire_url,
                release_url,
                http,
                session,
            } => http_cycle(start, http, acquire_url, release_url, session).await,
            Cycler::Redis {
                conn,
                key,
                sha,
                token,
            } => {
                *token += 1;
                redis_cycle(start, conn, key, sha, &token.to_string()).await
            }
            Cycler::Etcd {
                client,
                lease,
                key,
                shape: EtcdShape::Minimal,
                ..
            } => {
                let acquire = put_if_absent(key, *lease);
                etcd_cycle(start, client, acquire, |token| delete_if_token(key, token)).await
            }
            Cycler::Etcd {
                client,
                lease,
                key,
                shape: EtcdShape::Replica,
                session,
                session_revision,
            } => {
                let index = format!("{key}/h");
                let acquire = replica_acquire(key, &index, session, *session_revision, *lease);
                etcd_cycle(start, client, acquire, |token| {
                    replica_release(key, &index, token)
                })
                .await
            }
        }
    }
}

/// L1 at `base`: opens a session of `ttl_millis`.
pub async fn open_session(http: &reqwest::Client, base: &str, ttl_millis: u64) -> SessionOpened {
    http.post(format!("{base}{}", paths::SESSIONS))
        .json(&json!({ "ttlMillis": ttl_millis }))
        .send()
        .await
        .expect("L1")
        .json()
        .await
        .expect("L1 body")
}

/// L4 then L6 of the client's session; the L4's latency from `start`. Panics unless the L4
/// is granted and the L6 answers 204: the caller owns the key.
pub async fn http_cycle(
    start: Instant,
    http: &reqwest::Client,
    acquire_url: &str,
    release_url: &str,
    session: &str,
) -> Duration {
    let grant: Value = http
        .post(acquire_url)
        .json(&json!({"sessionId": session, "ttlMillis": TTL_MILLIS}))
        .send()
        .await
        .expect("L4")
        .json()
        .await
        .expect("L4 body");
    let took = start.elapsed();
    let token = grant["fencingToken"].as_u64().expect("granted");
    let status = http
        .post(release_url)
        .json(&json!({"fencingToken": token, "sessionId": session}))
        .send()
        .await
        .expect("L6")
        .status();
    assert_eq!(status.as_u16(), 204, "L6");
    took
}

/// `SET key token NX PX ttl`, then the compare-delete script; the SET's latency from
/// `start`.
async fn redis_cycle(
    start: Instant,
    conn: &mut Resp,
    key: &str,
    sha: &str,
    token: &str,
) -> Duration {
    let ttl = TTL_MILLIS.to_string();
    let set = conn.call(&["SET", key, token, "NX", "PX", &ttl]).await;
    let took = start.elapsed();
    assert_eq!(set, Reply::Simple("OK".into()), "SET NX");
    let del = conn.call(&["EVALSHA", sha, "1", key, token]).await;
    assert_eq!(del, Reply::Int(1), "compare-delete");
    took
}

/// The `acquire` txn, then the txn `release` makes of the token it granted (the answer's
/// header revision); the acquire's latency from `start`.
async fn etcd_cycle(
    start: Instant,
    client: &mut etcd_client::Client,
    acquire: Txn,
    release: impl FnOnce(i64) -> Txn,
) -> Duration {
    let response = client.txn(acquire).await.expect("etcd txn");
    let took = start.elapsed();
    assert!(response.succeeded(), "etcd put-if-absent");
    let token = response.header().expect("header").revision();
    let response = client.txn(release(token)).await.expect("etcd delete txn");
    assert!(response.succeeded(), "etcd compare-delete");
    took
}

/// The txn a replica sends for an uncontended L4: if `key` is free and the session record is
/// unchanged, put the lock record under `key` and its holder `index`.
fn replica_acquire(
    key: &str,
    index: &str,
    session: &str,
    session_revision: i64,
    lease: i64,
) -> Txn {
    // A lock record of the size the replica writes (its JSON LockRecord).
    let value = format!(
        r#"{{"key":"{key}","sessionId":"0123456789abcdef0123456789abcdef","ttlMillis":10000,"deadlineMs":1764560000000,"sessionDeadlineMs":1764560000000}}"#
    );
    Txn::new()
        .when(vec![
            Compare::create_revision(key, CompareOp::Equal, 0),
            Compare::mod_revision(session, CompareOp::Equal, session_revision),
        ])
        .and_then(vec![
            TxnOp::put(key, value.clone(), Some(lease_on(lease))),
            TxnOp::put(index, value, Some(lease_on(lease))),
            TxnOp::get(key, None),
        ])
        .or_else(vec![TxnOp::get(session, None), TxnOp::get(key, None)])
}

/// The txn a replica sends for L6: delete `key` and its `index` if both are still the grant
/// of `token`.
fn replica_release(key: &str, index: &str, token: i64) -> Txn {
    Txn::new()
        .when(vec![
            Compare::create_revision(key, CompareOp::Equal, token),
            Compare::create_revision(index, CompareOp::Equal, token),
        ])
        .and_then(vec![
            TxnOp::get(key, None),
            TxnOp::delete(key, None),
            TxnOp::delete(index, None),
        ])
}

fn lease_on(lease: i64) -> PutOptions {
    PutOptions::new().with_lease(lease)
}

/// A client of the etcd at `addr` and a fresh 10-minute lease for the bench's keys.
pub async fn etcd_with_lease(addr: SocketAddr) -> (etcd_client::Client, i64) {
    let client = etcd_client::Client::connect([format!("http://{addr}")], None)
        .await
        .expect("connect etcd");
    let lease = client
        .clone()
        .lease_grant(600, None)
        .await
        .expect("etcd lease")
        .id();
    (client, lease)
}

/// The least an etcd lock acquire needs: put `key` on `lease` if it does not exist. The token
/// is the answer's header revision (the key's `create_revision`).
pub fn put_if_absent(key: &str, lease: i64) -> Txn {
    Txn::new()
        .when(vec![Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then(vec![TxnOp::put(key, "holder", Some(lease_on(lease)))])
}

/// The least an etcd lock release needs: delete `key` if it is still the grant of `token`.
pub fn delete_if_token(key: &str, token: i64) -> Txn {
    Txn::new()
        .when(vec![Compare::create_revision(key, CompareOp::Equal, token)])
        .and_then(vec![TxnOp::delete(key, None)])
}

/// What one load window measured.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Completed cycles.
    pub cycles: u64,
    /// Wall time of the window.
    pub elapsed: Duration,
    /// Acquire latencies, ms, sorted.
    pub latencies_ms: Vec<f64>,
}

impl Run {
    /// Cycles per second.
    pub fn throughput(&self) -> f64 {
        self.cycles as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// One short window per target before measuring, so connection set-up and first-touch costs
/// stay out of the first measured round.
pub async fn warm_up(targets: &[Target], clients: usize) {
    for target in targets {
        drive(target, clients, Duration::from_millis(500)).await;
    }
}

/// Runs `clients` closed-loop clients against `target` for `window`: connections and
/// sessions are set up first (untimed), then every client cycles until the window ends.
pub async fn drive(target: &Target, clients: usize, window: Duration) -> Run {
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let mut cyclers = Vec::with_capacity(clients);
    for n in 0..clients {
        cyclers.push(target.connect(format!("bench-{run}-{n}")).await);
    }
    let start = Instant::now();
    let until = start + window;
    let tasks: Vec<_> = cyclers
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                let mut lat = Vec::new();
                while Instant::now() < until {
                    lat.push(c.cycle().await.as_secs_f64() * 1000.0);
                }
                lat
            })
        })
        .collect();
    let mut result = Run::default();
    for t in tasks {
        let lat = t.await.expect("bench client panicked");
        result.cycles += lat.len() as u64;
        result.latencies_ms.extend(lat);
    }
    result.elapsed = start.elapsed();
    result.latencies_ms.sort_by(f64::total_cmp);
    result
}

/// A minimal RESP2 client: enough for SET, EVALSHA and SCRIPT LOAD, without a dependency.
pub struct Resp {
    stream: BufReader<TcpStream>,
    out: Vec<u8>,
}

/// A RESP2 reply (arrays are not needed here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`.
    Simple(String),
    /// `:1`.
    Int(i64),
    /// `$n` bulk string; `None` for `$-1` (nil).
    Bulk(Option<Vec<u8>>),
}

impl Reply {
    fn text(&self) -> String {
        match self {
            Reply::Simple(s) => s.clone(),
            Reply::Int(i) => i.to_string(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Bulk(None) => String::new(),
        }
    }
}

impl Resp {
    /// Connects to `addr` with Nagle off (one small request per round trip).
    pub async fn connect(addr: SocketAddr) -> Resp {
        let stream = TcpStream::connect(addr).await.expect("connect redis");
        stream.set_nodelay(true).expect("nodelay");
        Resp {
            stream: BufReader::new(stream),
            out: Vec::new(),
        }
    }

    /// Sends one command and reads its reply; a Redis error reply panics (a bench bug).
    pub async fn call(&mut self, args: &[&str]) -> Reply {
        self.out.clear();
        self.out
            .extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            self.out
                .extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.stream
            .get_mut()
            .write_all(&self.out)
            .await
            .expect("redis write");
        let mut line = String::new();
        self.stream.read_line(&mut line).await.expect("redis read");
        let (kind, rest) = line.trim_end().split_at(1);
        match kind {
            "+" => Reply::Simple(rest.to_owned()),
            ":" => Reply::Int(rest.parse().expect("int reply")),
            "$" => {
                let len: i64 = rest.parse().expect("bulk length");
                if len < 0 {
                    return Reply::Bulk(None);
                }
                let mut buf = vec![0; len as usize + 2];
                self.stream.read_exact(&mut buf).await.expect("bulk body");
                buf.truncate(len as usize);
                Reply::Bulk(Some(buf))
            }
            _ => panic!("redis replied {line:?}"),
        }
    }
}
