//! `lockctl status KEY`: the advisory read (L7) of a key, as text for people or as the
//! server's JSON (`--json`); and the words `exec` uses to name a key's holder when it was
//! not granted.

use lock_api::{Holder, LockMode, LockState};
use lock_wasm::config::DEFAULT_REQUEST_TIMEOUT;
use lock_wasm::TransportExt;

use crate::endpoint::Endpoint;
use crate::exit::Failure;

/// L7 of `key`.
pub async fn read(endpoint: &Endpoint, key: &str) -> Result<LockState, Failure> {
    let transport = endpoint.transport()?;
    transport
        .read_lock(key, DEFAULT_REQUEST_TIMEOUT)
        .await
        .map_err(|e| {
            let error = lock_wasm::LockError::from_transport(e, key);
            Failure::refused(&format!("reading {key}"), endpoint.url(), &error)
        })
}

/// `lockctl status`: prints the key's state; exit status 0 whether it is held or free.
pub async fn run(endpoint: &Endpoint, key: &str, json: bool) -> Result<(), Failure> {
    let state = read(endpoint, key).await?;
    if json {
        println!(
            "{}",
            serde_json::to_string(&state).expect("an L7 answer serialises")
        );
    } else {
        print!("{}", describe(&state));
    }
    Ok(())
}

/// The state as a few aligned lines.
pub fn describe(state: &LockState) -> String {
    let mut text = format!("key      {}\n", state.key);
    let held = match (state.mode, state.limit) {
        _ if state.holders.is_empty() && state.holder.is_none() => "free".to_owned(),
        (Some(LockMode::Shared), Some(limit)) => format!("held shared, limit {limit}"),
        (Some(LockMode::Shared), None) => "held shared".to_owned(),
        _ => "held exclusive".to_owned(),
    };
    text.push_str(&format!("state    {held}\n"));
    for holder in holders(state) {
        text.push_str(&format!("holder   {}\n", holder_words(holder)));
    }
    text.push_str(&format!("waiting  {}\n", state.waiter_count));
    text
}

/// Who holds the key, in one line for `exec`'s not-granted message.
pub fn holders_line(state: &LockState) -> String {
    let all: Vec<String> = holders(state).map(holder_words).collect();
    match all.len() {
        0 => "no holder now".to_owned(),
        _ => format!("held by {}", all.join(", ")),
    }
}

/// Every holder: `holders`, or the exclusive `holder` of a server that lists only that.
fn holders(state: &LockState) -> impl Iterator<Item = &Holder> {
    let exclusive_only = state
        .holders
        .is_empty()
        .then_some(())
        .and(state.holder.as_ref());
    state.holders.iter().chain(exclusive_only)
}

fn holder_words(holder: &Holder) -> String {
    let owner = holder.owner.as_deref().unwrap_or("(no owner label)");
    format!(
        "{owner} (holder {}, token {}, {} ms left)",
        holder.holder_id, holder.fencing_token, holder.remaining_millis
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(token: u64) -> Holder {
        Holder {
            value: None,
            holder_id: format!("h{token}"),
            owner: Some(format!("job{token}")),
            fencing_token: token,
            remaining_millis: 900,
        }
    }

    fn state(mode: Option<LockMode>, holders: Vec<Holder>, limit: Option<u32>) -> LockState {
        LockState {
            key: "k".into(),
            mode,
            holder: (mode == Some(LockMode::Exclusive)).then(|| holders[0].clone()),
            holders,
            limit,
            waiter_count: 2,
        }
    }

    #[test]
    fn a_free_key() {
        let free = state(None, vec![], None);
        assert_eq!(describe(&free), "key      k\nstate    free\nwaiting  2\n");
        assert_eq!(holders_line(&free), "no holder now");
    }

    #[test]
    fn an_exclusive_holder_is_named_once() {
        let held = state(Some(LockMode::Exclusive), vec![holder(7)], None);
        assert_eq!(
            describe(&held),
            "key      k\nstate    held exclusive\n\
             holder   job7 (holder h7, token 7, 900 ms left)\nwaiting  2\n"
        );
        assert_eq!(
            holders_line(&held),
            "held by job7 (holder h7, token 7, 900 ms left)"
        );
    }

    #[test]
    fn shared_holders_are_listed_with_the_limit() {
        let held = state(Some(LockMode::Shared), vec![holder(3), holder(4)], Some(5));
        let text = describe(&held);
        assert!(text.contains("state    held shared, limit 5\n"), "{text}");
        assert_eq!(text.matches("holder   ").count(), 2, "{text}");
    }

    #[test]
    fn an_older_answer_without_holders_still_names_the_holder() {
        let mut held = state(Some(LockMode::Exclusive), vec![holder(7)], None);
        held.holders.clear();
        assert!(holders_line(&held).contains("job7"));
    }
}
