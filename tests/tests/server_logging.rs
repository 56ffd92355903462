//! Logs that cannot be written never take the service down: with stdout a pipe whose reader
//! stopped, or stdout and stderr on a full file system, every request is still answered,
//! the lost lines are counted in `/metrics`, and one line says so once the sink works again.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lock_e2e::client::Api;
use lock_e2e::launcher::server_binary;

/// Acquire+release cycles: each logs at least two lines at debug, well over a pipe's 64 KiB
/// buffer plus the server's queue of 8,192 lines.
const CYCLES: usize = 6_000;
const PARALLEL: usize = 8;

/// A server process whose output goes where the test says; killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(data_dir: &Path) -> Command {
    let mut command = Command::new(server_binary());
    command
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null());
    command
}

/// The `listening` line's address.
fn addr_of(line: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    (value["event"] == "listening").then(|| value["addr"].as_str().unwrap().to_owned())
}

/// Many acquire+release cycles, each request with its own deadline: a request blocked by
/// the log would fail the test instead of hanging it.
async fn traffic(api: &Api, prefix: &str) {
    let session = api.open_session(60_000).await.session_id;
    let tasks = (0..PARALLEL).map(|lane| {
        let api = api.clone();
        let session = session.clone();
        let key = format!("{prefix}/{lane}");
        tokio::spawn(async move {
            for _ in 0..CYCLES / PARALLEL {
                let grant = tokio::time::timeout(
                    Duration::from_secs(10),
                    api.acquire_ok(&key, &session, 5_000),
                )
                .await
                .expect("an acquire answered while the log cannot be written");
                let released = tokio::time::timeout(
                    Duration::from_secs(10),
                    api.release(&key, grant.fencing_token, Some(&session)),
                )
                .await
                .expect("a release answered while the log cannot be written");
                assert_eq!(released.status, 204, "{released:?}");
            }
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.expect("a traffic lane");
    }
}

async fn dropped_lines(api: &Api) -> u64 {
    let metrics = api.raw("GET", "/metrics", None, &[]).await;
    metrics
        .text
        .lines()
        .find_map(|l| l.strip_prefix("lock_log_lines_dropped_total "))
        .expect("the dropped-lines counter")
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_log_reader_never_blocks_a_request() {
    let data = tempfile::tempdir().unwrap();
    let mut child = command(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn lock-server");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut addr = None;
    while addr.is_none() {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "no listening line");
        addr = addr_of(&line);
    }
    let server = Server {
        child,
        addr: addr.unwrap(),
    };
    let api = Api::new(format!("http://{}", server.addr), None);

    // From here nobody reads the pipe.
    traffic(&api, "stalled").await;
    assert_eq!(api.raw("GET", "/healthz", None, &[]).await.status, 200);
    assert!(
        dropped_lines(&api).await > 0,
        "lines were dropped and counted"
    );

    // The reader comes back: what is queued drains, and a line says how many were lost.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let mut line = String::new();
        while out.read_line(&mut line).unwrap_or(0) > 0 {
            text.push_str(&line);
            if line.contains("\"log_lines_dropped\"") {
                return Some(text);
            }
            line.clear();
        }
        None
    });
    // Lines logged after the reader came back carry the note in front of them.
    traffic(&api, "after").await;
    let seen = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    assert!(seen.is_some(), "the drops are reported in the log");
    drop(server);
}

/// A small tmpfs mounted for the test (the suite runs as root), unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap().keep();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mounting a tmpfs needs root (the test suite runs as root)"
        );
        Tmpfs(dir)
    }

    /// Fills the file system: a file grown until the disk is full.
    fn fill(&self) -> PathBuf {
        let filler = self.0.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while std::io::Write::write_all(&mut file, &block).is_ok() {}
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn logs_on_a_full_disk_never_fail_a_request() {
    let disk = Tmpfs::mount("2m");
    let log_path = disk.0.join("server.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let data = tempfile::tempdir().unwrap();
    let child = command(data.path())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn lock-server");
    let mut server = Server {
        child,
        addr: String::new(),
    };
    for _ in 0..500 {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        if let Some(addr) = text.lines().find_map(addr_of) {
            server.addr = addr;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!server.addr.is_empty(), "no listening line");
    let api = Api::new(format!("http://{}", server.addr), None);

    let filler = disk.fill();
    traffic(&api, "full").await;
    assert_eq!(api.raw("GET", "/healthz", None, &[]).await.status, 200);
    assert!(
        dropped_lines(&api).await > 0,
        "lines were dropped and counted"
    );
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server is still running"
    );

    // Space comes back: the next lines are written, the first saying what was lost.
    std::fs::remove_file(filler).unwrap();
    let session = api.open_session(10_000).await.session_id;
    let mut reported = false;
    for _ in 0..200 {
        api.acquire_ok("full/after", &session, 5_000).await;
        let mut text = String::new();
        std::fs::File::open(&log_path)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        if text.contains("\"log_lines_dropped\"") {
            reported = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reported, "the drops are reported once the disk has room");
}
