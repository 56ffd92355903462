//! Real etcd processes for the tests: one member or a cluster of several, on 127.0.0.1
//! random ports with temp data dirs, with the controls the failover tests need (find the
//! leader, kill a member with SIGKILL, restart it on its data dir).
//!
//! Uses only std, `tempfile` and `serde_json`, so `lock-server`'s own tests can include this
//! file with `#[path]` as well. The binaries are `/usr/bin/etcd` and `/usr/bin/etcdctl`
//! (Debian's etcd 3.4), overridable with `ETCD_BIN` / `ETCDCTL_BIN`.
//!
//! Timing (ASSUMPTION, chosen for fast tests): heartbeat 50 ms and election timeout 500 ms,
//! which makes etcd's minimum lease TTL 1 s (1.5 × election timeout, rounded up). Data dirs
//! live on `/dev/shm` when it exists, because fsync cost, not logic, dominates etcd on CI
//! disks.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a cluster may take to elect a leader before the harness gives up (generous).
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// One member: its ports, data dir and process (absent while killed).
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    data_dir: tempfile::TempDir,
    log: PathBuf,
    child: Option<Child>,
}

impl Member {
    fn client_url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }
}

/// A running etcd cluster (1 or more members). Dropping it kills every member.
pub struct EtcdCluster {
    members: Vec<Member>,
    initial_cluster: String,
    token: String,
    /// Flags every member starts with beside the harness's own (e.g. a backend quota).
    extra_args: Vec<String>,
    /// `http`, or `https` for members serving clients over TLS (`etcd_secure`).
    scheme: &'static str,
    /// Flags of every etcdctl call the harness makes (TLS files, `--user` once auth is on).
    etcdctl_args: Vec<String>,
}

impl EtcdCluster {
    /// Starts a one-member cluster and waits until it serves writes.
    pub fn single() -> EtcdCluster {
        EtcdCluster::start(1)
    }

    /// Starts `size` members and waits until the cluster has a leader and serves writes.
    pub fn start(size: usize) -> EtcdCluster {
        EtcdCluster::start_in(size, &data_root())
    }

    /// Like [`EtcdCluster::start`] with the data dirs under `root` (benchmarks use a real
    /// disk, where fsync costs what it costs in production).
    pub fn start_in(size: usize, root: &std::path::Path) -> EtcdCluster {
        EtcdCluster::launch(size, root, &[])
    }

    /// Like [`EtcdCluster::start`] with extra etcd flags for every member, on every start
    /// and restart (e.g. `["--quota-backend-bytes", "16777216"]`).
    pub fn start_with_args(size: usize, extra_args: &[&str]) -> EtcdCluster {
        EtcdCluster::launch(size, &data_root(), extra_args)
    }

    fn launch(size: usize, root: &std::path::Path, extra_args: &[&str]) -> EtcdCluster {
        EtcdCluster::launch_as(size, root, extra_args, "http", Vec::new())
    }

    /// Like [`EtcdCluster::start_with_args`] with clients served on `scheme` (`https` with
    /// the TLS flags in `extra_args`) and `etcdctl_args` on every etcdctl call.
    pub fn start_secured(
        size: usize,
        extra_args: &[&str],
        scheme: &'static str,
        etcdctl_args: Vec<String>,
    ) -> EtcdCluster {
        EtcdCluster::launch_as(size, &data_root(), extra_args, scheme, etcdctl_args)
    }

    fn launch_as(
        size: usize,
        root: &std::path::Path,
        extra_args: &[&str],
        scheme: &'static str,
        etcdctl_args: Vec<String>,
    ) -> EtcdCluster {
        let members: Vec<Member> = (0..size)
            .map(|i| {
                let data_dir = tempfile::Builder::new()
                    .prefix("etcd-test-")
                    .tempdir_in(root)
                    .expect("etcd temp dir");
                let log = data_dir.path().join("etcd.log");
                Member {
                    name: format!("m{i}"),
                    client_port: free_port(),
                    peer_port: free_port(),
                    data_dir,
                    log,
                    child: None,
                }
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!("lock-test-{}", members[0].client_port);
        let mut cluster = EtcdCluster {
            members,
            initial_cluster,
            token,
            extra_args: extra_args.iter().map(|a| a.to_string()).collect(),
            scheme,
            etcdctl_args,
        };
        for i in 0..size {
            cluster.spawn(i, "new");
        }
        cluster.wait_ready();
        cluster
    }

    /// Client URLs of every member, running or not (what a replica is configured with).
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| m.client_url(self.scheme))
            .collect()
    }

    /// [`EtcdCluster::endpoints`] joined with commas, for `--etcd-endpoints`.
    pub fn endpoints_arg(&self) -> String {
        self.endpoints().join(",")
    }

    /// Number of members (running or not).
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Index of the current leader as seen by the running members, if they agree on one.
    pub fn leader(&self) -> Option<usize> {
        let statuses = self.statuses();
        let leader_id = statuses.iter().find_map(|(_, _, leader)| *leader)?;
        statuses
            .iter()
            .find(|(_, member_id, _)| *member_id == leader_id)
            .map(|(index, _, _)| *index)
    }

    /// Kills member `index` with SIGKILL (no clean shutdown) and reaps it.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.members[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Restarts a killed member on its data dir and waits until the cluster serves writes.
    pub fn restart(&mut self, index: usize) {
        self.kill(index);
        self.spawn(index, "existing");
        self.wait_ready();
    }

    /// Restarts several killed members at once on their data dirs, then waits until the
    /// cluster serves writes: a quorum lost to two dead members comes back in one step.
    pub fn restart_together(&mut self, indices: &[usize]) {
        for &index in indices {
            self.kill(index);
            self.spawn(index, "existing");
        }
        self.wait_ready();
    }

    /// `etcdctl snapshot save` of member `index` into `file`.
    pub fn snapshot_save(&self, index: usize, file: &std::path::Path) {
        let endpoint = self.members[index].client_url(self.scheme);
        let args = ["snapshot".as_ref(), "save".as_ref(), file.as_os_str()];
        etcdctl_checked(&endpoint, &args).unwrap_or_else(|e| panic!("snapshot save: {e}"));
    }

    /// The runbook's restore of a one-member cluster: kill the member, `etcdctl snapshot
    /// restore` the snapshot into a fresh data dir (same name, peer URL and cluster token, so
    /// the cluster id may well stay the same), start etcd on it and wait until it serves.
    pub fn restore_snapshot(&mut self, index: usize, file: &std::path::Path) {
        self.kill(index);
        let member = &self.members[index];
        let data = member.data_dir.path().join("data");
        std::fs::remove_dir_all(&data).expect("remove the old data dir");
        let peer = member.peer_url();
        let out = Command::new(etcdctl_bin())
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "restore"])
            .arg(file)
            .arg("--data-dir")
            .arg(&data)
            .args(["--name", &member.name])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-token", &self.token])
            .args(["--initial-advertise-peer-urls", &peer])
            .stdin(Stdio::null())
            .output()
            .expect("run etcdctl snapshot restore");
        assert!(
            out.status.success(),
            "snapshot restore: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.spawn(index, "new");
        self.wait_ready();
    }

    /// Whether member `index` is running.
    pub fn is_running(&self, index: usize) -> bool {
        self.members[index].child.is_some()
    }

    /// Blocks until every running member reports the same leader and a write through
    /// `etcdctl` succeeds; panics with the members' logs after [`READY_TIMEOUT`].
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if self.leader().is_some() && self.put_probe() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("etcd cluster not ready; logs:\n{}", self.logs());
    }

    /// The tail of every member's log, for failure messages.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let text = std::fs::read_to_string(&m.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- {} ---\n{}", m.name, tail.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn spawn(&mut self, index: usize, state: &str) {
        let member = &self.members[index];
        let log = std::fs::File::create(&member.log).expect("etcd log file");
        let child = Command::new(etcd_bin())
            .args(["--name", &member.name])
            .arg("--data-dir")
            .arg(member.data_dir.path().join("data"))
            .args(["--listen-client-urls", &member.client_url(self.scheme)])
            .args(["--advertise-client-urls", &member.client_url(self.scheme)])
            .args(["--listen-peer-urls", &member.peer_url()])
            .args(["--initial-advertise-peer-urls", &member.peer_url()])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-token", &self.token])
            .args(["--initial-cluster-state", state])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .expect("spawn etcd (is etcd-server installed?)");
        self.members[index].child = Some(child);
    }

    /// `(index, member id, leader id)` of every running member that answers.
    fn statuses(&self) -> Vec<(usize, u64, Option<u64>)> {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.child.is_some())
            .filter_map(|(i, m)| {
                let url = m.client_url(self.scheme);
                let out = self.etcdctl_at(&url, &["endpoint", "status", "-w", "json"])?;
                let value: serde_json::Value = serde_json::from_str(&out).ok()?;
                let status = &value.get(0)?["Status"];
                let member_id = status["header"]["member_id"].as_u64()?;
                let leader = status["leader"].as_u64().filter(|id| *id != 0);
                Some((i, member_id, leader))
            })
            .collect()
    }

    fn put_probe(&self) -> bool {
        let endpoints = self
            .members
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| m.client_url(self.scheme))
            .collect::<Vec<_>>()
            .join(",");
        self.etcdctl_at(&endpoints, &["put", "/lock-test/probe", "ok"])
            .is_some()
    }

    /// Runs etcdctl with the cluster's etcdctl flags against every member; stdout on
    /// success, else stderr as the error.
    pub fn etcdctl(&self, args: &[&str]) -> Result<String, String> {
        etcdctl_output(&self.endpoints_arg(), &self.etcdctl_args, args)
    }

    /// Replaces the flags of every later etcdctl call (e.g. `--user root:PW` once auth is on).
    pub fn set_etcdctl_args(&mut self, args: Vec<String>) {
        self.etcdctl_args = args;
    }

    fn etcdctl_at(&self, endpoints: &str, args: &[&str]) -> Option<String> {
        etcdctl_output(endpoints, &self.etcdctl_args, args).ok()
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// Runs etcdctl against `endpoints` with `flags`; stdout on success, else stderr.
fn etcdctl_output(endpoints: &str, flags: &[String], args: &[&str]) -> Result<String, String> {
    let out = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .args(["--command-timeout=2s", "--dial-timeout=1s"])
        .args(flags)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Runs etcdctl against `endpoints`; stdout, or the error output on failure.
fn etcdctl_checked(endpoints: &str, args: &[&std::ffi::OsStr]) -> Result<String, String> {
    let out = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .args(["--command-timeout=10s", "--dial-timeout=2s"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// A port the OS just handed out. Another process could take it before etcd binds it; the
/// window is tiny and a clash fails loudly at start.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn data_root() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

fn etcd_bin() -> String {
    std::env::var("ETCD_BIN").unwrap_or_else(|_| "/usr/bin/etcd".into())
}

/// The etcdctl binary: `ETCDCTL_BIN`, else Debian's.
pub fn etcdctl_bin() -> String {
    std::env::var("ETCDCTL_BIN").unwrap_or_else(|_| "/usr/bin/etcdctl".into())
}
