//! 50 sessions hammering one key: at most one holder at any instant, checked through the
//! demo ledger (every holder's append is accepted, accepted tokens strictly increase, a stale
//! token is refused).

use lock_api::LockGrant;
use lock_e2e::{ServerOptions, TestServer};

const SESSIONS: usize = 50;
const GRANTS_EACH: usize = 8;
const KEY: &str = "payouts/merchant-42";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_on_one_key_never_overlap() {
    let server = TestServer::start(ServerOptions::new());
    let mut tasks = Vec::new();
    for n in 0..SESSIONS {
        let api = server.api();
        tasks.push(tokio::spawn(async move {
            let s = api.open_session(60_000).await;
            let mut tokens = Vec::new();
            while tokens.len() < GRANTS_EACH {
                let reply = api
                    .acquire(KEY, &s.session_id, Some(5_000), Some(2_000))
                    .await;
                match reply.status {
                    200 => {}
                    409 | 429 => continue,
                    _ => panic!("unexpected acquire answer: {reply:?}"),
                }
                let grant: LockGrant = reply.parse();
                let entry = format!("s{n}-{}", tokens.len());
                let appended = api.ledger_append(KEY, grant.fencing_token, &entry).await;
                assert_eq!(appended.status, 204, "holder fenced out: {appended:?}");
                tokens.push(grant.fencing_token);
                let released = api.release(KEY, grant.fencing_token, None).await;
                assert_eq!(released.status, 204, "{released:?}");
                // The old token is dead now: once a later holder wrote, it is fenced.
            }
            tokens
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_eq!(all.len(), SESSIONS * GRANTS_EACH);
    let api = server.api();
    let ledger = api.ledger_read(KEY).await;
    assert_eq!(ledger.entries.len(), SESSIONS * GRANTS_EACH);
    for pair in ledger.entries.windows(2) {
        assert!(
            pair[0].fencing_token < pair[1].fencing_token,
            "two holders overlapped: {pair:?}"
        );
    }
    // Every token was distinct, and a stale one is refused.
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), SESSIONS * GRANTS_EACH, "a token was reused");
    let stale = api.ledger_append(KEY, all[0], "stale").await;
    let body = stale.assert_error(409, "FENCED_OUT");
    assert_eq!(body.highest_token, ledger.highest_token);
}
