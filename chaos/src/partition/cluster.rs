//! The processes of a partition run, each in its own network namespace ([`crate::netns`]):
//! three etcd members (hosts 0–2, `10.213.0.10–12`) and two lock-server replicas on the etcd
//! backend (hosts 3–4, `10.213.0.13–14`). The run's contenders stay in the root namespace and
//! reach the replicas through the bridge.
//!
//! The members are started here rather than by `lock_e2e::etcd::EtcdCluster`, which puts
//! every member on 127.0.0.1: in separate namespaces each member needs its own address. The
//! timing is the same (heartbeat 50 ms, election timeout 500 ms, data on `/dev/shm`), and so
//! is the leader question (`etcdctl endpoint status`). The replicas are started by the shared
//! launcher through a two-line wrapper script that enters the namespace.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::netns::Network;
use crate::server::{server_binary, ServerProcess};

/// etcd members of a partition run (hosts `0..ETCD_MEMBERS`).
pub const ETCD_MEMBERS: usize = 3;
/// lock-server replicas (hosts `ETCD_MEMBERS..ETCD_MEMBERS + REPLICAS`).
pub const REPLICAS: usize = 2;

/// How long the cluster may take to elect a leader and serve a write (generous: 2 cores).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The network and everything running in it. Dropping it kills the processes, then removes
/// the network (fields drop in order).
pub struct NetCluster {
    members: Vec<Member>,
    replicas: Vec<ServerProcess>,
    /// Last: a namespace lives as long as a process in it does.
    pub net: Network,
}

/// One etcd member: its process and data dir.
struct Member {
    child: Child,
    _data_dir: tempfile::TempDir,
}

impl Drop for Member {
    fn drop(&mut self) {
        // SIGCONT first: a stopped process dies of SIGKILL too, but say it plainly.
        signal(self.child.id(), libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl NetCluster {
    /// The network, three etcd members (ready: a leader and a write) and two replicas over
    /// them (healthy), with logs in `out_dir`.
    pub fn start(out_dir: &Path) -> std::io::Result<NetCluster> {
        let net = Network::create(&["e0", "e1", "e2", "r0", "r1"])?;
        let initial_cluster = (0..ETCD_MEMBERS)
            .map(|i| format!("m{i}=http://{}:2380", net.addr(i)))
            .collect::<Vec<_>>()
            .join(",");
        let members = (0..ETCD_MEMBERS)
            .map(|i| start_member(&net, i, &initial_cluster, out_dir))
            .collect::<std::io::Result<Vec<Member>>>()?;
        let mut cluster = NetCluster {
            members,
            replicas: Vec::new(),
            net,
        };
        cluster.wait_ready()?;
        for r in 0..REPLICAS {
            let replica = cluster.start_replica(r, out_dir)?;
            cluster.replicas.push(replica);
        }
        Ok(cluster)
    }

    fn start_replica(&self, r: usize, out_dir: &Path) -> std::io::Result<ServerProcess> {
        let host = ETCD_MEMBERS + r;
        let wrapper = out_dir.join(format!("replica-r{r}.sh"));
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec ip netns exec {} '{}' \"$@\"\n",
                self.net.namespace(host),
                server_binary().display()
            ),
        )?;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))?;
        let data_dir = out_dir.join(format!("data-r{r}"));
        std::fs::create_dir_all(&data_dir)?;
        let args = [
            "--backend",
            "etcd",
            "--etcd-endpoints",
            &self.endpoints(),
            // Not loopback, so protected mode asks for an auth file or this opt-out; the
            // network is private to the run.
            "--allow-unauthenticated",
        ];
        ServerProcess::start_on(
            &wrapper,
            &data_dir,
            args.iter().map(|a| a.to_string()).collect(),
            &out_dir.join(format!("replica-r{r}.log")),
            &self.net.addr(host),
        )
    }

    /// Client URLs of every member, comma separated (what replicas are configured with).
    pub fn endpoints(&self) -> String {
        (0..ETCD_MEMBERS)
            .map(|i| self.member_url(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn member_url(&self, i: usize) -> String {
        format!("http://{}:2379", self.net.addr(i))
    }

    /// Base URL of replica `r`.
    pub fn replica_url(&self, r: usize) -> String {
        self.replicas[r].base_url()
    }

    /// Pid of replica `r`.
    pub fn replica_pid(&self, r: usize) -> Option<u32> {
        self.replicas[r].pid()
    }

    /// Pid of etcd member `i`.
    pub fn member_pid(&self, i: usize) -> u32 {
        self.members[i].child.id()
    }

    /// The member the most recent term's leader is, as the members answering from the root
    /// namespace report it (an isolated old leader may still claim an older term).
    pub fn leader(&self) -> Option<usize> {
        let statuses: Vec<(usize, u64, u64, u64)> = (0..ETCD_MEMBERS)
            .filter_map(|i| {
                let out = etcdctl(&self.member_url(i), &["endpoint", "status", "-w", "json"])?;
                let value: serde_json::Value = serde_json::from_str(&out).ok()?;
                let status = &value.get(0)?["Status"];
                let member = status["header"]["member_id"].as_u64()?;
                let leader = status["leader"].as_u64().filter(|id| *id != 0)?;
                let term = status["raftTerm"].as_u64()?;
                Some((i, member, leader, term))
            })
            .collect();
        let (_, _, leader, _) = statuses.iter().max_by_key(|s| s.3)?;
        statuses
            .iter()
            .find(|(_, member, _, _)| member == leader)
            .map(|(i, ..)| *i)
    }

    /// Blocks until a leader is known and a write through every endpoint's client succeeds.
    pub fn wait_ready(&self) -> std::io::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if self.leader().is_some()
                && etcdctl(&self.endpoints(), &["put", "/lock-chaos/probe", "ok"]).is_some()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(std::io::Error::other(
            "etcd members in the namespaces never elected a leader; see etcd-*.log in the run dir",
        ))
    }

    /// Peak RSS of the replicas now, KiB.
    pub fn replicas_rss_kib(&self) -> u64 {
        self.replicas
            .iter()
            .filter_map(|r| r.rss_kib())
            .max()
            .unwrap_or(0)
    }
}

fn start_member(
    net: &Network,
    i: usize,
    initial_cluster: &str,
    out_dir: &Path,
) -> std::io::Result<Member> {
    let data_dir = tempfile::Builder::new()
        .prefix("etcd-partition-")
        .tempdir_in(data_root())?;
    let log = std::fs::File::create(out_dir.join(format!("etcd-{i}.log")))?;
    let client = format!("http://{}:2379", net.addr(i));
    let peer = format!("http://{}:2380", net.addr(i));
    let child = net
        .command(i, &etcd_bin())
        .args(["--name", &format!("m{i}")])
        .arg("--data-dir")
        .arg(data_dir.path().join("data"))
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .args(["--listen-peer-urls", &peer])
        .args(["--initial-advertise-peer-urls", &peer])
        .args(["--initial-cluster", initial_cluster])
        .args(["--initial-cluster-token", "lock-chaos-partition"])
        .args(["--initial-cluster-state", "new"])
        .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
        .args(["--logger", "zap", "--log-outputs", "stderr"])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .map_err(|e| std::io::Error::other(format!("spawn etcd in a namespace: {e}")))?;
    Ok(Member {
        child,
        _data_dir: data_dir,
    })
}

/// Sends `sig` to `pid` (a process this run started).
pub fn signal(pid: u32, sig: libc::c_int) -> bool {
    // SAFETY: kill(2) on a child of this run that has not been reaped.
    unsafe { libc::kill(pid as libc::pid_t, sig) == 0 }
}

/// Runs etcdctl from the root namespace against `endpoints`; stdout on success.
fn etcdctl(endpoints: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .args(["--command-timeout=2s", "--dial-timeout=1s"])
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
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

fn etcdctl_bin() -> String {
    std::env::var("ETCDCTL_BIN").unwrap_or_else(|_| "/usr/bin/etcdctl".into())
}
