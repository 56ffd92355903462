//! `lockctl watch KEY`: L8's event stream of a key, one line per event (or the server's JSON
//! with `--json`), following the stream across reconnects: after a dropped connection or a
//! server restart it asks again with `Last-Event-ID`, so the server sends what followed the
//! last event printed, or a `reset` when it no longer has it. Refusals (401, 403, 400) end it
//! with [`exit::REFUSED`]; `--count N` ends it after N events; SIGINT/SIGTERM end it with 0.

use std::time::Duration;

use lock_api::{EventKind, WatchEvent};
use lock_wasm::{LockError, TransportError};

use crate::endpoint::Endpoint;
use crate::exit::Failure;
use crate::signals::Signals;
use crate::sse;

/// First pause before reconnecting; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(5);
/// A stream that sends nothing, not even the server's 15 s keep-alive, for this long is
/// taken as dead and reopened.
const SILENCE: Duration = Duration::from_secs(45);

/// What `lockctl watch` was asked.
pub struct Watch {
    pub key: String,
    pub json: bool,
    pub after: Option<String>,
    pub count: Option<u64>,
}

/// Why one connection's stream ended.
enum Ended {
    /// `--count` events printed.
    Done,
    /// The connection dropped, the server closed the stream or went silent: reconnect.
    Dropped(String),
}

/// Follows the key's events until `--count`, a signal or a refusal.
pub async fn run(endpoint: &Endpoint, watch: &Watch) -> Result<u8, Failure> {
    let http = endpoint.http()?;
    let mut signals = Signals::catch().map_err(|e| Failure::usage(format!("signals: {e}")))?;
    let mut last_id = watch.after.clone();
    let mut printed = 0u64;
    let mut pause = FIRST_PAUSE;
    loop {
        let stream = follow(&http, endpoint, watch, &mut last_id, &mut printed);
        let ended = tokio::select! {
            ended = stream => ended?,
            _ = signals.next() => return Ok(0),
        };
        match ended {
            Ended::Done => return Ok(0),
            Ended::Dropped(why) => {
                eprintln!(
                    "lockctl: watch of {} interrupted ({why}); reconnecting",
                    watch.key
                );
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = signals.next() => return Ok(0),
                }
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}

/// One connection: opens the stream after `last_id` and prints its events until it ends.
async fn follow(
    http: &reqwest::Client,
    endpoint: &Endpoint,
    watch: &Watch,
    last_id: &mut Option<String>,
    printed: &mut u64,
) -> Result<Ended, Failure> {
    let url = format!("{}{}", endpoint.url(), lock_api::paths::events(&watch.key));
    let mut request = http.get(url).header("accept", "text/event-stream");
    if let Some(id) = last_id.as_deref() {
        request = request.header("last-event-id", id);
    }
    if let Some(token) = endpoint.token() {
        request = request.bearer_auth(token);
    }
    let mut response = match request.send().await {
        Ok(response) => response,
        Err(e) => return Ok(Ended::Dropped(e.to_string())),
    };
    let status = response.status().as_u16();
    if status != 200 {
        let text = response.text().await.unwrap_or_default();
        let error =
            LockError::from_transport(TransportError::from_status(status, &text), &watch.key);
        if error.retryable() {
            return Ok(Ended::Dropped(error.to_string()));
        }
        return Err(Failure::refused(
            &format!("watching {}", watch.key),
            endpoint.url(),
            &error,
        ));
    }
    let mut parser = sse::Parser::default();
    loop {
        let chunk = match tokio::time::timeout(SILENCE, response.chunk()).await {
            Err(_) => return Ok(Ended::Dropped("the stream went silent".into())),
            Ok(Err(e)) => return Ok(Ended::Dropped(e.to_string())),
            Ok(Ok(None)) => return Ok(Ended::Dropped("the server ended the stream".into())),
            Ok(Ok(Some(chunk))) => chunk,
        };
        for record in parser.push(&chunk) {
            let Ok(event) = serde_json::from_str::<WatchEvent>(&record.data) else {
                continue;
            };
            println!("{}", line(&event, watch.json));
            *last_id = Some(event.id);
            *printed += 1;
            if watch.count.is_some_and(|count| *printed >= count) {
                return Ok(Ended::Done);
            }
        }
    }
}

/// An event as one line: the server's JSON, or words.
fn line(event: &WatchEvent, json: bool) -> String {
    if json {
        return serde_json::to_string(event).expect("an event serialises");
    }
    let mut text = event.kind.as_str().to_owned();
    if event.kind.is_state() {
        let holders = event.state.as_ref().map_or(0, |s| s.holders.len());
        text.push_str(&format!(" ({holders} holder(s))"));
    }
    if let Some(token) = event.fencing_token {
        text.push_str(&format!(" token {token}"));
    }
    if let Some(holder) = &event.holder_id {
        text.push_str(&format!(" holder {holder}"));
    }
    if let Some(owner) = &event.owner {
        text.push_str(&format!(" owner {owner}"));
    }
    if let Some(value) = &event.value {
        text.push_str(&format!(" value {value:?}"));
    }
    if event.kind == EventKind::Waiters || event.waiter_count > 0 {
        text.push_str(&format!(" waiting {}", event.waiter_count));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_reads_as_one_line_of_words() {
        let event = WatchEvent {
            id: "e.1.0".into(),
            kind: EventKind::HandedOff,
            key: "k".into(),
            at_millis: 1,
            fencing_token: Some(9),
            holder_id: Some("abc".into()),
            owner: Some("job@host".into()),
            mode: None,
            limit: None,
            value: Some("10.0.0.7".into()),
            waiter_count: 2,
            state: None,
        };
        assert_eq!(
            line(&event, false),
            "handedOff token 9 holder abc owner job@host value \"10.0.0.7\" waiting 2"
        );
        assert!(line(&event, true).starts_with("{\"id\":\"e.1.0\""));
    }
}
