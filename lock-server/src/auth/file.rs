//! The auth file (`--auth-file`): the clients allowed to call `/v1`.
//!
//! ```json
//! {"clients": [
//!   {"name": "billing", "tokenSha256": "<64 hex>", "keyPrefixes": ["billing/"], "admin": false},
//!   {"name": "ops",     "tokenSha256": "<64 hex>", "keyPrefixes": [""],         "admin": true}
//! ]}
//! ```
//!
//! It holds SHA-256 hashes of the tokens only (`lock-server hash-token` prints one), so
//! reading the file does not let anyone call the server. `tokenSha256` is one hash or a list
//! of up to [`MAX_TOKENS_PER_CLIENT`]: while a token is rotated the client lists the old one
//! and the new one, its callers move over at their own pace, and the old one is dropped by a
//! later reload; both are the same client (same sessions, same keys). Every rule is checked on load, and a
//! file that breaks one is refused whole: at start that is fatal, on a SIGHUP reload the
//! clients loaded before stay in force.

use std::path::Path;

use lock_api::limits::{KEY_MAX_BYTES, OWNER_MAX_BYTES};
use serde::Deserialize;

use super::bearer::TokenHash;
use super::Client;

/// Why an auth file was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthFileError {
    #[error("cannot read auth file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("auth file {path}: {message}")]
    Invalid { path: String, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFormat {
    clients: Vec<ClientEntry>,
}

/// The most tokens one client may list (ASSUMPTION: the one in use, the next, and room for a
/// rotation that overlaps another; every extra hash is one more comparison per request).
pub const MAX_TOKENS_PER_CLIENT: usize = 4;

/// `tokenSha256`: one hash, or a list of them (a rotation).
#[derive(Deserialize)]
#[serde(untagged)]
enum Hashes {
    One(String),
    Many(Vec<String>),
}

impl Hashes {
    fn into_vec(self) -> Vec<String> {
        match self {
            Hashes::One(hash) => vec![hash],
            Hashes::Many(hashes) => hashes,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClientEntry {
    name: String,
    token_sha256: Hashes,
    key_prefixes: Vec<String>,
    #[serde(default)]
    admin: bool,
}

/// Reads and checks the file at `path`.
pub fn load(path: &Path) -> Result<Vec<Client>, AuthFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read(path).map_err(|source| AuthFileError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&text).map_err(|message| AuthFileError::Invalid {
        path: shown,
        message,
    })
}

/// Parses and checks an auth file's bytes.
pub fn parse(text: &[u8]) -> Result<Vec<Client>, String> {
    let de = &mut serde_json::Deserializer::from_slice(text);
    let file: FileFormat = serde_path_to_error::deserialize(de)
        .map_err(|e| format!("at `{}`: {}", e.path(), e.inner()))?;
    let mut clients: Vec<Client> = Vec::with_capacity(file.clients.len());
    for entry in file.clients {
        let client = check(entry)?;
        if clients.iter().any(|c| c.name == client.name) {
            return Err(format!("client name {:?} appears twice", client.name));
        }
        // Two clients with one token could not be told apart.
        let taken = |hash: &TokenHash| clients.iter().any(|c| c.tokens_sha256.contains(hash));
        if client.tokens_sha256.iter().any(taken) {
            return Err(format!(
                "client {:?} has a tokenSha256 of another client",
                client.name
            ));
        }
        clients.push(client);
    }
    Ok(clients)
}

fn check(entry: ClientEntry) -> Result<Client, String> {
    let name = entry.name;
    if name.is_empty() || name.len() > OWNER_MAX_BYTES || name.chars().any(char::is_control) {
        return Err(format!(
            "client name {name:?} must be 1 to {OWNER_MAX_BYTES} bytes without control characters"
        ));
    }
    let hashes = entry.token_sha256.into_vec();
    if hashes.is_empty() || hashes.len() > MAX_TOKENS_PER_CLIENT {
        return Err(format!(
            "client {name:?}: tokenSha256 must list 1 to {MAX_TOKENS_PER_CLIENT} hashes"
        ));
    }
    let mut tokens_sha256: Vec<TokenHash> = Vec::with_capacity(hashes.len());
    for hex in &hashes {
        let hash = parse_hash(hex)
            .ok_or_else(|| format!("client {name:?}: tokenSha256 must be 64 hex characters"))?;
        if tokens_sha256.contains(&hash) {
            return Err(format!("client {name:?}: a tokenSha256 is listed twice"));
        }
        tokens_sha256.push(hash);
    }
    for prefix in &entry.key_prefixes {
        if prefix.len() > KEY_MAX_BYTES || prefix.chars().any(char::is_control) {
            return Err(format!(
                "client {name:?}: key prefix {prefix:?} must be at most {KEY_MAX_BYTES} bytes \
                 without control characters"
            ));
        }
    }
    Ok(Client {
        name,
        tokens_sha256,
        key_prefixes: entry.key_prefixes,
        admin: entry.admin,
    })
}

/// 64 hex digits (either case) as 32 bytes.
fn parse_hash(hex: &str) -> Option<TokenHash> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut hash = [0u8; 32];
    for (byte, pair) in hash.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(hash)
}

#[cfg(test)]
mod tests {
    use super::super::bearer::{hash, to_hex};
    use super::*;

    fn file(clients: &str) -> Vec<u8> {
        format!(r#"{{"clients": [{clients}]}}"#).into_bytes()
    }

    fn entry(name: &str, token: &str) -> String {
        format!(
            r#"{{"name": "{name}", "tokenSha256": "{}", "keyPrefixes": ["{name}/"]}}"#,
            to_hex(&hash(token))
        )
    }

    #[test]
    fn a_valid_file_gives_its_clients() {
        let text = file(&format!(
            r#"{}, {{"name": "ops", "tokenSha256": "{}", "keyPrefixes": [""], "admin": true}}"#,
            entry("billing", "t1"),
            to_hex(&hash("t2")).to_uppercase()
        ));
        let clients = parse(&text).unwrap();
        assert_eq!(clients.len(), 2);
        assert_eq!(clients[0].name, "billing");
        assert!(!clients[0].admin && clients[1].admin);
        assert_eq!(clients[1].tokens_sha256, [hash("t2")], "hex in either case");
        assert!(clients[0].may_use("billing/x") && !clients[0].may_use("payouts/x"));
        assert!(clients[1].may_use("anything"));
    }

    #[test]
    fn a_client_in_rotation_lists_its_old_and_new_token() {
        let rotating = format!(
            r#"{{"name": "billing", "tokenSha256": ["{}", "{}"], "keyPrefixes": [""]}}"#,
            to_hex(&hash("old")),
            to_hex(&hash("new"))
        );
        let clients = parse(&file(&rotating)).unwrap();
        assert_eq!(clients[0].tokens_sha256, [hash("old"), hash("new")]);
    }

    #[test]
    fn broken_files_are_refused_with_the_reason() {
        let list = |tokens: &[&str]| {
            let hashes: Vec<String> = tokens
                .iter()
                .map(|t| format!("\"{}\"", to_hex(&hash(t))))
                .collect();
            format!(
                r#"{{"name": "r", "tokenSha256": [{}], "keyPrefixes": []}}"#,
                hashes.join(", ")
            )
        };
        let cases = [
            (b"not json".to_vec(), "at `"),
            (b"{}".to_vec(), "clients"),
            (
                file(&format!("{}, {}", entry("a", "t1"), entry("a", "t2"))),
                "twice",
            ),
            (
                file(&format!("{}, {}", entry("a", "t1"), entry("b", "t1"))),
                "another client",
            ),
            (
                file(r#"{"name": "a", "tokenSha256": "00", "keyPrefixes": []}"#),
                "64 hex",
            ),
            (file(&entry("", "t")), "client name"),
            (
                file(r#"{"name": "a", "tokenSha256": "x", "keyPrefixes": [], "extra": 1}"#),
                "extra",
            ),
            (file(r#"{"name": "a", "tokenSha256": "x"}"#), "keyPrefixes"),
            (file(&list(&[])), "1 to 4 hashes"),
            (file(&list(&["a", "b", "c", "d", "e"])), "1 to 4 hashes"),
            (file(&list(&["a", "a"])), "listed twice"),
            (
                file(&format!("{}, {}", entry("a", "t1"), list(&["t2", "t1"]))),
                "another client",
            ),
            (
                file(r#"{"name": "a", "tokenSha256": ["00"], "keyPrefixes": []}"#),
                "64 hex",
            ),
        ];
        for (text, needle) in cases {
            let err = match parse(&text) {
                Ok(_) => panic!("accepted {}", String::from_utf8_lossy(&text)),
                Err(err) => err,
            };
            assert!(err.contains(needle), "{err:?} should mention {needle:?}");
        }
    }
}
