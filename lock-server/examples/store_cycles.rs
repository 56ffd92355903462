//! N uncontended L4 (`waitMillis` 0) + L6 cycles straight against the SQLite store, one at a
//! time, without HTTP: what the store's hot path costs, counted in instructions so that the
//! figure does not depend on the machine's load. Usage (docs/BENCHMARKS.md):
//! `valgrind --tool=callgrind target/release/examples/store_cycles N` for two values of N;
//! the difference of the totals over the difference of N is the cost of one cycle.

use lock_server::store::sqlite::{SqliteOptions, SqliteStore};
use lock_server::store::{AcquireCall, Acquired, NewSession, Store};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cycles: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("usage: store_cycles N");
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&SqliteOptions {
        data_dir: dir.path().to_path_buf(),
        boot_id_path: "/proc/sys/kernel/random/boot_id".into(),
        unclean_holdback_millis: 0,
        feed_limits: Default::default(),
    })
    .expect("open the store");
    let session = store
        .open_session(NewSession::with_ttl(300_000))
        .await
        .expect("L1")
        .session_id;
    for _ in 0..cycles {
        let call = AcquireCall {
            value: None,
            hold: lock_api::HoldKind::Exclusive,
            key: "k",
            session_id: &session,
            client: None,
            ttl_millis: 10_000,
            queue: None,
        };
        let Acquired::Granted(granted) = store.acquire(call).await.expect("L4") else {
            panic!("the only session was refused its own key");
        };
        store
            .release("k", granted.grant.fencing_token)
            .await
            .expect("L6");
    }
    store.close().await.expect("close");
}
