//! etcd as production runs it, for the tests: one member serving clients over `https://`
//! with client-certificate auth (`--client-cert-auth`, the [`TestPki`] CA), and etcd auth on:
//! `root`, a user `app` whose role may read and write [`PREFIX`] only, and a user `outsider`
//! whose role may touch another prefix only. Plus a bounded run of a lock-server that is
//! expected to exit at start, with its whole output.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::etcd::EtcdCluster;
use crate::launcher::server_binary;
use crate::tls::TestPki;

/// The prefix `app` may read and write.
pub const PREFIX: &str = "/secure/";
/// The user with a read-write role on [`PREFIX`].
pub const APP_USER: &str = "app";
/// The user with a role on another prefix only.
pub const OUTSIDER_USER: &str = "outsider";

/// How long a lock-server that should refuse to start may take to exit (generous: debug
/// build, 2 cores; the start-up check itself is bounded by `--etcd-timeout-ms`).
const EXIT_BOUND: Duration = Duration::from_secs(30);

/// A TLS + auth etcd member and the files a replica needs to reach it.
pub struct SecureEtcd {
    pub etcd: EtcdCluster,
    pub pki: TestPki,
    /// `app`'s password (the tests check it never appears in a server's output).
    pub app_password: String,
    /// `outsider`'s password.
    pub outsider_password: String,
    dir: tempfile::TempDir,
}

impl SecureEtcd {
    /// Starts the member with TLS, creates the users and roles, and enables auth.
    pub fn start() -> SecureEtcd {
        let pki = TestPki::new();
        let path = |p: &Path| p.display().to_string();
        let (cert, key, ca) = (path(&pki.cert), path(&pki.key), path(&pki.ca));
        let member_tls = [
            "--cert-file",
            &cert,
            "--key-file",
            &key,
            "--trusted-ca-file",
            &ca,
            "--client-cert-auth",
        ];
        let etcdctl_tls = vec![
            format!("--cacert={ca}"),
            format!("--cert={}", path(&pki.client_cert)),
            format!("--key={}", path(&pki.client_key)),
        ];
        let mut etcd = EtcdCluster::start_secured(1, &member_tls, "https", etcdctl_tls.clone());
        let suffix = std::process::id();
        let root_password = format!("root-pw-{suffix}");
        let app_password = format!("app-pw-{suffix}-never-logged");
        let outsider_password = format!("outsider-pw-{suffix}");
        let other_prefix = "/elsewhere/";
        for args in [
            vec!["user", "add", &format!("root:{root_password}")],
            vec!["user", "grant-role", "root", "root"],
            vec!["role", "add", "locks"],
            vec![
                "role",
                "grant-permission",
                "locks",
                "readwrite",
                PREFIX,
                "--prefix=true",
            ],
            vec!["user", "add", &format!("{APP_USER}:{app_password}")],
            vec!["user", "grant-role", APP_USER, "locks"],
            vec!["role", "add", "elsewhere"],
            vec![
                "role",
                "grant-permission",
                "elsewhere",
                "readwrite",
                other_prefix,
                "--prefix=true",
            ],
            vec![
                "user",
                "add",
                &format!("{OUTSIDER_USER}:{outsider_password}"),
            ],
            vec!["user", "grant-role", OUTSIDER_USER, "elsewhere"],
            vec!["auth", "enable"],
        ] {
            let result = etcd.etcdctl(&args);
            // etcd 3.4 creates the root role with the root user; granting it again fails.
            if args[..2] != ["user", "grant-role"] || args[2] != "root" {
                result.unwrap_or_else(|e| panic!("etcdctl {args:?}: {e}"));
            }
        }
        let mut root_args = etcdctl_tls;
        root_args.push(format!("--user=root:{root_password}"));
        etcd.set_etcdctl_args(root_args);
        let dir = tempfile::Builder::new()
            .prefix("lock-e2e-etcd-secure-")
            .tempdir()
            .expect("temp dir");
        SecureEtcd {
            etcd,
            pki,
            app_password,
            outsider_password,
            dir,
        }
    }

    /// A password file holding `password`, with Unix permissions `mode`.
    pub fn password_file(&self, name: &str, password: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("{password}\n")).expect("write password file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .expect("chmod password file");
        path
    }

    /// The flags of a replica on this member: `--backend etcd` over `https://`, the prefix,
    /// the CA (when `with_ca`), the client certificate, and `user` with `password_file`.
    pub fn server_args(&self, user: &str, password_file: &Path, with_ca: bool) -> Vec<String> {
        let mut args: Vec<String> = [
            "--backend",
            "etcd",
            "--etcd-prefix",
            PREFIX,
            "--etcd-timeout-ms",
            "2000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push("--etcd-endpoints".into());
        args.push(self.etcd.endpoints_arg());
        if with_ca {
            args.push("--etcd-ca-file".into());
            args.push(self.pki.ca.display().to_string());
        }
        args.push("--etcd-cert-file".into());
        args.push(self.pki.client_cert.display().to_string());
        args.push("--etcd-key-file".into());
        args.push(self.pki.client_key.display().to_string());
        args.push("--etcd-user".into());
        args.push(user.into());
        args.push("--etcd-password-file".into());
        args.push(password_file.display().to_string());
        args
    }
}

/// What a lock-server that ended by itself said.
pub struct Exited {
    pub status: ExitStatus,
    /// stdout and stderr, stdout first.
    pub output: String,
}

impl Exited {
    /// The `fatal` log line, if there is one.
    pub fn fatal_line(&self) -> Option<&str> {
        self.output
            .lines()
            .find(|line| line.contains(r#""event":"fatal""#))
    }
}

/// Runs lock-server with `args` (on 127.0.0.1:0 and a temp data dir) until it exits by
/// itself; panics when it is still running after [`EXIT_BOUND`] (it started when it should
/// not have).
pub fn run_until_exit(args: &[String]) -> Exited {
    let dir = tempfile::Builder::new()
        .prefix("lock-e2e-exit-")
        .tempdir()
        .expect("temp dir");
    let out = dir.path().join("stdout");
    let err = dir.path().join("stderr");
    let mut child = Command::new(server_binary())
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn lock-server");
    let deadline = Instant::now() + EXIT_BOUND;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait lock-server") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "lock-server still running after {EXIT_BOUND:?}; output:\n{}",
                std::fs::read_to_string(&out).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = std::fs::read_to_string(&out).unwrap_or_default()
        + &std::fs::read_to_string(&err).unwrap_or_default();
    Exited { status, output }
}
