//! A real nginx (Debian's package, `/usr/sbin/nginx`) in front of lock-server replicas, run
//! from the configuration the load-balancer guide ships (`docs/nginx/lock-server.conf`), so
//! the guide's file is what the tests prove: only the upstream addresses, the listen line
//! (plain HTTP on a loopback port instead of TLS on 443) and the log path are swapped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::etcd::free_port;

/// The guide's configuration file.
pub fn guide_conf() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/nginx/lock-server.conf");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A running nginx; killed on drop.
pub struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Nginx {
    /// nginx with the guide's configuration, balancing over `upstreams` (`host:port`).
    pub fn start(upstreams: &[String]) -> Nginx {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let site = adapt(
            &guide_conf(),
            upstreams,
            port,
            &dir.path().join("access.log"),
        );
        std::fs::write(dir.path().join("lock-server.conf"), site).expect("write site");
        for sub in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            std::fs::create_dir_all(dir.path().join("tmp").join(sub)).expect("temp dirs");
        }
        let d = dir.path().display();
        // The main file a distribution provides, reduced to what a test needs (workers run
        // as root so they can write the temp dir).
        let main = format!(
            "daemon off; user root; worker_processes 1; pid {d}/nginx.pid;\n\
             error_log {d}/error.log info;\n\
             events {{ worker_connections 512; }}\n\
             http {{\n\
               client_body_temp_path {d}/tmp/body; proxy_temp_path {d}/tmp/proxy;\n\
               fastcgi_temp_path {d}/tmp/fastcgi; uwsgi_temp_path {d}/tmp/uwsgi;\n\
               scgi_temp_path {d}/tmp/scgi;\n\
               include {d}/lock-server.conf;\n\
             }}\n"
        );
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, main).expect("write nginx.conf");
        let child = Command::new("/usr/sbin/nginx")
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts (Debian package nginx; scripts/setup.sh test installs it)");
        let nginx = Nginx { child, dir, port };
        nginx.wait_listening();
        nginx
    }

    /// Its base URL.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The access log so far.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default()
    }

    /// The error log so far (for failure messages).
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen on {}:\n{}",
                self.port,
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The guide's site file with the test's upstreams, listen port and access log.
fn adapt(conf: &str, upstreams: &[String], port: u16, access_log: &Path) -> String {
    let mut out = Vec::new();
    let mut servers_written = false;
    for line in conf.lines() {
        let t = line.trim_start();
        if t.starts_with("server 10.0.0.") {
            if !servers_written {
                for u in upstreams {
                    out.push(format!("    server {u} max_fails=1 fail_timeout=2s;"));
                }
                servers_written = true;
            }
        } else if t.starts_with("listen 443") {
            out.push(format!("    listen 127.0.0.1:{port};"));
        } else if t.starts_with("ssl_certificate") || t.starts_with("server_name") {
            continue;
        } else if t.starts_with("access_log") {
            out.push(format!(
                "    access_log {} lock_access;",
                access_log.display()
            ));
        } else {
            out.push(line.to_owned());
        }
    }
    assert!(
        servers_written,
        "the guide's file lists its upstream servers"
    );
    out.join("\n")
}
