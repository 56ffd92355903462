//! Where log lines go: a bounded queue to one writer thread, so a log line never fails or
//! blocks a request.
//!
//! Request workers only hand a finished line to the queue (`try_send`). When the queue is
//! full (the sink is stalled: a pipe whose reader stopped, a slow disk) or the write fails
//! (disk full, a closed pipe, an I/O error), the line is dropped and counted
//! (`lock_log_lines_dropped_total`) — never a panic (the formatting library's own fallback
//! prints to stderr and panics when that fails too) and never a worker waiting for the sink.
//! The first line written after drops says how many were lost (`log_lines_dropped`).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::OnceLock;

use tracing_subscriber::fmt::MakeWriter;

/// Lines the queue holds while the sink is slow (ASSUMPTION: 8,192 lines, about 3 MB of
/// JSON at most; beyond that lines are dropped).
pub const QUEUE_LINES: usize = 8_192;

/// Lines dropped since the start, for `/metrics`.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Lines queued and not yet written (or dropped) by the writer thread.
static PENDING: AtomicU64 = AtomicU64::new(0);

/// Waits until the lines queued so far are written, at most `within`: before the process
/// exits, so its last lines (`stopped`, `fatal`) are not lost with the writer thread. A
/// stalled sink only costs the wait.
pub fn drain(within: std::time::Duration) {
    let deadline = std::time::Instant::now() + within;
    while PENDING.load(Ordering::Acquire) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Log lines dropped since the start (queue full or write failed).
pub fn dropped_total() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The [`MakeWriter`] of the server's log: each event's bytes become one queued line.
#[derive(Clone)]
pub struct Sink {
    lines: SyncSender<Vec<u8>>,
}

/// One event being formatted; queued when the formatter drops it.
pub struct Line {
    bytes: Vec<u8>,
    lines: SyncSender<Vec<u8>>,
}

impl Sink {
    /// Starts the writer thread writing to `out` (stdout for the server).
    pub fn spawn<W: Write + Send + 'static>(out: W) -> std::io::Result<Sink> {
        let (lines, queue) = sync_channel(QUEUE_LINES);
        std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || write_lines(queue, out))?;
        Ok(Sink { lines })
    }

    /// The process's sink on stdout, started on first use.
    pub fn stdout() -> Sink {
        static SINK: OnceLock<Sink> = OnceLock::new();
        SINK.get_or_init(|| Sink::spawn(std::io::stdout()).expect("the log-writer thread"))
            .clone()
    }
}

impl<'a> MakeWriter<'a> for Sink {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line {
            bytes: Vec::with_capacity(256),
            lines: self.lines.clone(),
        }
    }
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.bytes.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.bytes);
        PENDING.fetch_add(1, Ordering::AcqRel);
        match self.lines.try_send(bytes) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                PENDING.fetch_sub(1, Ordering::AcqRel);
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The writer thread: writes each line whole; a failed write drops the line. After drops,
/// the next line that can be written is preceded by one that counts them.
fn write_lines<W: Write>(queue: Receiver<Vec<u8>>, mut out: W) {
    let mut reported = 0;
    for line in queue {
        let dropped = DROPPED.load(Ordering::Relaxed);
        if dropped > reported {
            let note = format!(
                "{{\"level\":\"WARN\",\"event\":\"log_lines_dropped\",\"count\":{},\"total\":{dropped}}}\n",
                dropped - reported
            );
            if write_whole(&mut out, note.as_bytes()) {
                reported = dropped;
            }
        }
        if !write_whole(&mut out, &line) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        PENDING.fetch_sub(1, Ordering::AcqRel);
    }
}

fn write_whole<W: Write>(out: &mut W, bytes: &[u8]) -> bool {
    out.write_all(bytes).and_then(|()| out.flush()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A sink that fails while `failing` is set (keeping what it refused), and keeps what it
    /// was given otherwise.
    #[derive(Clone, Default)]
    struct Flaky {
        failing: Arc<Mutex<bool>>,
        refused: Arc<Mutex<Vec<u8>>>,
        written: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Flaky {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if *self.failing.lock().unwrap() {
                self.refused.lock().unwrap().extend_from_slice(buf);
                return Err(std::io::Error::other("no space left on device"));
            }
            self.written.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn send(sink: &Sink, text: &str) {
        let mut line = sink.make_writer();
        line.write_all(text.as_bytes()).unwrap();
    }

    fn wait_for(flaky: &Flaky, what: &str) -> String {
        for _ in 0..500 {
            let text = String::from_utf8(flaky.written.lock().unwrap().clone()).unwrap();
            if text.contains(what) {
                return text;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("never written: {what}");
    }

    #[test]
    fn a_failing_sink_drops_lines_and_says_so_once_it_works_again() {
        let flaky = Flaky::default();
        let sink = Sink::spawn(flaky.clone()).unwrap();
        send(&sink, "first\n");
        wait_for(&flaky, "first");
        *flaky.failing.lock().unwrap() = true;
        let before = dropped_total();
        send(&sink, "lost\n");
        // Wait until this sink refused the line: the drop counter is global, and the other
        // tests running alongside move it too.
        let tried = || String::from_utf8_lossy(&flaky.refused.lock().unwrap()).contains("lost");
        for _ in 0..500 {
            if tried() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(tried(), "the line was tried");
        assert!(dropped_total() > before, "the failed write is counted");
        *flaky.failing.lock().unwrap() = false;
        send(&sink, "back\n");
        let text = wait_for(&flaky, "back");
        assert!(!text.contains("lost"), "{text}");
        let note = text
            .find("log_lines_dropped")
            .expect("the drops are reported");
        assert!(note < text.find("back").unwrap(), "{text}");
    }

    #[test]
    fn a_full_queue_drops_at_once_instead_of_waiting() {
        // A sink that never takes a line: its thread blocks on the first.
        struct Stalled(std::sync::mpsc::Receiver<()>);
        impl Write for Stalled {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                let _ = self.0.recv();
                Err(std::io::Error::other("stalled"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (_release, stalled) = std::sync::mpsc::channel();
        let sink = Sink::spawn(Stalled(stalled)).unwrap();
        let before = dropped_total();
        // One line in the thread's hands, QUEUE_LINES queued, the rest dropped — and every
        // send returns at once (the test would hang otherwise).
        for _ in 0..QUEUE_LINES + 10 {
            send(&sink, "x\n");
        }
        assert!(
            dropped_total() >= before + 9,
            "lines over the queue are dropped"
        );
    }
}
