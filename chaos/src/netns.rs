//! A private network of Linux network namespaces for partition runs: one bridge in the root
//! namespace (address [`BRIDGE_ADDR`], where the run's contenders live) and one namespace per
//! host, each joined to the bridge by a veth pair, all on 10.213.0.0/24. Links between two
//! hosts are cut and healed by the hosts themselves: each side gets a permanent neighbour
//! entry for the other's address pointing at a MAC address nobody has ([`BLACKHOLE_MAC`]), so
//! frames go nowhere and both directions drop **silently**, as a real partition does (open
//! connections stall, new ones time out). Only `ip` (iproute2) is needed: no iptables or nft,
//! no kernel modules beyond veth and bridge.
//!
//! Everything is named with [`PREFIX`] and removed on drop; a run first removes whatever a
//! killed run left behind (namespaces, links, the processes still inside those namespaces).
//! Runs on one machine take turns through an `flock` on [`LOCK_FILE`], so a clean-up never
//! removes the network of a run in progress and two runs never fight over one subnet.
//!
//! Nothing here touches the host's own interfaces or routes: the bridge's connected route
//! for 10.213.0.0/24 is the only thing the root namespace gains.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

/// Every namespace and link of a partition run starts with this.
pub const PREFIX: &str = "lkpart-";

/// The bridge's address in the root namespace: where the hosts see the contenders.
pub const BRIDGE_ADDR: &str = "10.213.0.1";

/// Where a cut sends a host's frames: a locally administered unicast address nobody on the
/// bridge has.
pub const BLACKHOLE_MAC: &str = "02:00:0a:d5:00:fe";

/// Serialises partition runs on one machine (ASSUMPTION: `/tmp` is shared by every run).
pub const LOCK_FILE: &str = "/tmp/lock-chaos-netns.lock";

/// The private network: the bridge, the hosts (one namespace each) and the links cut now.
/// Dropping it heals nothing and deletes everything (the processes inside must be stopped
/// first; a namespace lives as long as a process in it does).
pub struct Network {
    bridge: String,
    hosts: Vec<String>,
    cut: BTreeSet<(usize, usize)>,
    /// Held for the network's lifetime: the turn of this run.
    _turn: File,
}

impl Network {
    /// Creates the bridge and one namespace per name in `hosts` (host `i` gets address
    /// `10.213.0.(10 + i)`), after removing leftovers of earlier runs. Fails with a message
    /// saying what is missing when this machine cannot do it (not root, no `ip`, no
    /// namespaces).
    pub fn create(hosts: &[&str]) -> std::io::Result<Network> {
        require_capabilities()?;
        let turn = take_turn()?;
        remove_leftovers()?;
        let bridge = format!("{PREFIX}br");
        let net = Network {
            bridge: bridge.clone(),
            hosts: hosts.iter().map(|h| format!("{PREFIX}{h}")).collect(),
            cut: BTreeSet::new(),
            _turn: turn,
        };
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{BRIDGE_ADDR}/24"), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..net.hosts.len() {
            net.add_host(i)?;
        }
        Ok(net)
    }

    fn add_host(&self, i: usize) -> std::io::Result<()> {
        let ns = &self.hosts[i];
        // The host end of the veth pair carries the namespace's name (≤ 15 bytes).
        ip(&["netns", "add", ns])?;
        ip(&[
            "link", "add", ns, "type", "veth", "peer", "name", "eth0", "netns", ns,
        ])?;
        ip(&["link", "set", ns, "master", &self.bridge, "up"])?;
        let cidr = format!("{}/24", self.addr(i));
        ip(&["-n", ns, "addr", "add", &cidr, "dev", "eth0"])?;
        ip(&["-n", ns, "link", "set", "eth0", "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])
    }

    /// The address of host `i`.
    pub fn addr(&self, i: usize) -> String {
        format!("10.213.0.{}", 10 + i)
    }

    /// The namespace of host `i`.
    pub fn namespace(&self, i: usize) -> &str {
        &self.hosts[i]
    }

    /// `program` to be run inside host `i`'s namespace (`ip netns exec`, which execs in
    /// place: the child's pid is the program's).
    pub fn command(&self, i: usize, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.hosts[i], program]);
        cmd
    }

    /// Cuts the link between hosts `a` and `b`, both directions.
    pub fn cut(&mut self, a: usize, b: usize) -> std::io::Result<()> {
        for (from, to) in [(a, b), (b, a)] {
            let to_addr = self.addr(to);
            ip(&[
                "-n",
                &self.hosts[from],
                "neigh",
                "replace",
                &to_addr,
                "lladdr",
                BLACKHOLE_MAC,
                "nud",
                "permanent",
                "dev",
                "eth0",
            ])?;
        }
        self.cut.insert((a.min(b), a.max(b)));
        Ok(())
    }

    /// Cuts host `a` from every host in `others`.
    pub fn cut_off(&mut self, a: usize, others: &[usize]) -> std::io::Result<()> {
        others
            .iter()
            .filter(|&&b| b != a)
            .try_for_each(|&b| self.cut(a, b))
    }

    /// Heals every link cut so far: the poisoned neighbour entries go, and the hosts find
    /// each other by ARP again.
    pub fn heal_all(&mut self) -> std::io::Result<()> {
        for (a, b) in std::mem::take(&mut self.cut) {
            for (from, to) in [(a, b), (b, a)] {
                let to_addr = self.addr(to);
                ip(&[
                    "-n",
                    &self.hosts[from],
                    "neigh",
                    "del",
                    &to_addr,
                    "dev",
                    "eth0",
                ])?;
            }
        }
        Ok(())
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Never panics: a drop may run while a failed test unwinds.
        for ns in &self.hosts {
            let _ = ip(&["link", "del", ns]);
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

/// Root, a working `ip`, and namespaces: else an error that says which is missing. A
/// partition run on a machine without them fails; it does not skip.
fn require_capabilities() -> std::io::Result<()> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(std::io::Error::other(
            "partition runs need root (network namespaces, veth pairs, a bridge); run as root",
        ));
    }
    let probe = Command::new("ip")
        .args(["netns", "list"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match probe {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(std::io::Error::other(format!(
            "`ip netns list` failed ({s}): this machine cannot create network namespaces"
        ))),
        Err(e) => Err(std::io::Error::other(format!(
            "partition runs need `ip` (Debian package iproute2; scripts/setup.sh test installs it): {e}"
        ))),
    }
}

/// Waits for this machine's turn: an exclusive `flock` on [`LOCK_FILE`], released when the
/// file closes (also when the process dies).
fn take_turn() -> std::io::Result<File> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_FILE)?;
    // SAFETY: flock(2) on a descriptor we own for the call's duration.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(file)
}

/// Removes the namespaces and links of [`PREFIX`] a killed run left behind, and stops the
/// processes still inside those namespaces (ours: only partition runs create them). Called
/// holding the turn, so nothing with the prefix belongs to a live run.
fn remove_leftovers() -> std::io::Result<()> {
    let namespaces = output(&["netns", "list"])?;
    for ns in namespaces
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(PREFIX))
    {
        let pids = output(&["netns", "pids", ns]).unwrap_or_default();
        for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            // SAFETY: kill(2) on a process inside a namespace only partition runs create.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        ip(&["netns", "del", ns])?;
    }
    let links = output(&["-o", "link", "show"])?;
    for link in links.lines().filter_map(|l| {
        // `12: lkpart-e0@if2: <...>`
        let name = l.split(": ").nth(1)?;
        Some(name.split('@').next()?.to_owned())
    }) {
        // Deleting one end of a veth pair deletes the other: a later name may be gone.
        if link.starts_with(PREFIX) {
            let _ = ip(&["link", "del", &link]);
        }
    }
    Ok(())
}

/// Runs `ip ARGS`; an error carries its stderr.
fn ip(args: &[&str]) -> std::io::Result<()> {
    output(args).map(drop)
}

/// `ip ARGS`'s stdout; an error carries its stderr.
fn output(args: &[&str]) -> std::io::Result<String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(std::io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
