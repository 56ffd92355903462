//! Store faults of a real etcd, for the etcd backend's outage tests
//! (`tests/etcd_store_faults.rs`), built on [`EtcdCluster`]:
//! - [`QuorumCluster`]: three members; two are killed, so the one left has no quorum (it
//!   answers "no leader" or times out, the dead ones refuse connections), then both are
//!   restarted on their data dirs together and the cluster serves writes again.
//! - [`QuotaMember`]: one member with a small backend quota, filled with big values written
//!   through `etcdctl` until etcd raises its NOSPACE alarm, then cleared the way the operator's
//!   runbook says (docs/etcd.md, "etcd over quota"): delete, compact, defrag, alarm disarm.
//!
//! Every fault checks itself with `etcdctl` (a write fails while it is in force, and succeeds
//! after it is cleared), so a test that sees no effect on the server knows the fault was real.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::etcd::{etcdctl_bin, EtcdCluster};

/// Members of the quorum cluster: two stopped leave one, which is no majority.
const QUORUM_MEMBERS: usize = 3;

/// The backend quota of [`QuotaMember`] (ASSUMPTION: 16 MiB, which ten to twenty 1 MiB
/// writes fill in about a second; etcd's default is 2 GiB).
pub const QUOTA_BYTES: u64 = 16 * 1024 * 1024;

/// One filler value: 1 MiB, under etcd's default request limit of 1.5 MiB.
const FILLER_VALUE_BYTES: usize = 1024 * 1024;

/// The filler key, outside any lock-server prefix the tests use.
const FILLER_KEY: &str = "/etcd-faults/filler";

/// A probe key for the self-checks.
const PROBE_KEY: &str = "/etcd-faults/probe";

/// What etcd says when its backend is over quota (with gRPC code RESOURCE_EXHAUSTED).
pub const NOSPACE_MESSAGE: &str = "database space exceeded";

/// A three-member cluster whose quorum the test takes away and gives back.
pub struct QuorumCluster {
    cluster: EtcdCluster,
    stopped: Vec<usize>,
}

impl QuorumCluster {
    /// Starts three members and waits until they serve writes.
    pub fn start() -> QuorumCluster {
        QuorumCluster {
            cluster: EtcdCluster::start(QUORUM_MEMBERS),
            stopped: Vec::new(),
        }
    }

    /// `--etcd-endpoints` for a replica: every member, running or not.
    pub fn endpoints_arg(&self) -> String {
        self.cluster.endpoints_arg()
    }

    /// Kills (SIGKILL) two members, the leader among them, and checks that the one left
    /// refuses a write. Returns the index of the member left running.
    pub fn lose_quorum(&mut self) -> usize {
        assert!(self.stopped.is_empty(), "quorum already lost");
        let leader = self.cluster.leader().unwrap_or(0);
        let survivor = (leader + 1) % QUORUM_MEMBERS;
        self.stopped = (0..QUORUM_MEMBERS).filter(|&i| i != survivor).collect();
        for &index in &self.stopped {
            self.cluster.kill(index);
        }
        let endpoint = &self.cluster.endpoints()[survivor];
        let put = etcdctl(endpoint, &["put", PROBE_KEY, "no-quorum"], None);
        assert!(
            put.is_err(),
            "a write succeeded on the member left without quorum: {put:?}"
        );
        survivor
    }

    /// Restarts the stopped members together on their data dirs and waits until the cluster
    /// has a leader and serves writes (the harness's own check, through etcdctl).
    pub fn restore_quorum(&mut self) {
        let stopped = std::mem::take(&mut self.stopped);
        self.cluster.restart_together(&stopped);
    }
}

/// One member whose backend quota is [`QUOTA_BYTES`].
pub struct QuotaMember {
    cluster: EtcdCluster,
}

impl QuotaMember {
    /// Starts the member with `--quota-backend-bytes` [`QUOTA_BYTES`].
    pub fn start() -> QuotaMember {
        let quota = QUOTA_BYTES.to_string();
        QuotaMember {
            cluster: EtcdCluster::start_with_args(1, &["--quota-backend-bytes", &quota]),
        }
    }

    /// `--etcd-endpoints` for a replica.
    pub fn endpoints_arg(&self) -> String {
        self.cluster.endpoints_arg()
    }

    /// Overwrites the filler key with 1 MiB values until etcd refuses a write as over quota.
    /// Each overwrite keeps the previous revision, so the backend grows by about a value per
    /// write. Returns how many writes succeeded; panics unless the NOSPACE alarm is raised
    /// after twice as many writes as the quota holds.
    pub fn fill(&self) -> usize {
        let value = vec![b'x'; FILLER_VALUE_BYTES];
        let bound = 2 * QUOTA_BYTES as usize / FILLER_VALUE_BYTES;
        for written in 0..bound {
            match etcdctl(&self.endpoints_arg(), &["put", FILLER_KEY], Some(&value)) {
                Ok(_) => {}
                Err(error) if error.contains(NOSPACE_MESSAGE) => {
                    assert!(self.alarmed(), "over quota without an alarm");
                    return written;
                }
                Err(error) => panic!("filling etcd: {error}\n{}", self.cluster.logs()),
            }
        }
        panic!("{bound} MiB written and etcd is not over its quota");
    }

    /// Whether etcd lists its NOSPACE alarm.
    pub fn alarmed(&self) -> bool {
        etcdctl(&self.endpoints_arg(), &["alarm", "list"], None)
            .unwrap_or_else(|e| panic!("etcdctl alarm list: {e}"))
            .contains("NOSPACE")
    }

    /// The operator's fix (docs/etcd.md, "etcd over quota"): delete what filled the
    /// backend, compact the history up to the current revision, defragment to give the
    /// space back, then disarm the alarm. Checks that the alarm is gone and a write succeeds.
    pub fn clear(&self) {
        let endpoint = self.endpoints_arg();
        run(&endpoint, &["del", FILLER_KEY]);
        let revision = self.revision();
        run(&endpoint, &["compact", &revision.to_string(), "--physical"]);
        run(&endpoint, &["defrag"]);
        run(&endpoint, &["alarm", "disarm"]);
        assert!(!self.alarmed(), "NOSPACE alarm still listed after disarm");
        run(&endpoint, &["put", PROBE_KEY, "cleared"]);
    }

    /// The member's current revision (`etcdctl endpoint status`).
    fn revision(&self) -> u64 {
        let status = run(&self.endpoints_arg(), &["endpoint", "status", "-w", "json"]);
        let value: serde_json::Value = serde_json::from_str(&status).expect("status JSON");
        value[0]["Status"]["header"]["revision"]
            .as_u64()
            .unwrap_or_else(|| panic!("no revision in {status}"))
    }
}

/// [`etcdctl`] that must succeed.
fn run(endpoints: &str, args: &[&str]) -> String {
    etcdctl(endpoints, args, None).unwrap_or_else(|e| panic!("etcdctl {args:?}: {e}"))
}

/// Runs etcdctl against `endpoints` with `stdin` as the value of a `put` (a value too big
/// for a command-line argument); stdout on success, stderr on failure (the error the tests
/// check). Bounded by a 1 s dial and a 2 s command timeout.
fn etcdctl(endpoints: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<String, String> {
    let mut child = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .args(["--command-timeout=2s", "--dial-timeout=1s"])
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn etcdctl: {e}"))?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes)
            .map_err(|e| format!("etcdctl stdin: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("etcdctl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
