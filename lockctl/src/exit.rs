//! The exit statuses of `lockctl`: stable, so scripts and cron lines can branch on them
//! (`lockctl exec … || echo busy`). The table is written here once; `lockctl --help` prints
//! [`table`] and a unit test checks the README's copy against it.
//!
//! A command that ran passes its own status through, so lockctl's own statuses sit in a
//! block that common commands do not use: below `timeout(1)`'s 124–127 (a job run under
//! `timeout` keeps its meaning), above the sysexits range (64–78), and far from the
//! 128 + signal statuses of a shell. 126 and 127 keep the meaning every shell and `env(1)`
//! give them.

use lock_wasm::LockError;

/// Not granted within the wait (`--wait-ms`, `--no-wait`): someone else holds the key.
pub const NOT_GRANTED: u8 = 112;
/// The lock was lost while the command ran; the command was stopped.
pub const LOST: u8 = 113;
/// A usage error: unknown flag, bad value, unreadable `--ca-cert`, a malformed token.
pub const USAGE: u8 = 114;
/// The server was unreachable, or refused (unknown token, forbidden key, bad request,
/// unavailable): nothing ran.
pub const REFUSED: u8 = 115;
/// The command was found but could not be started (not executable).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub const NOT_FOUND: u8 = 127;

/// Every status as `(status, meaning)`, in the order `--help` and the README list them.
pub const TABLE: [(&str, &str); 7] = [
    (
        "0–255",
        "exec: the command ran and exited with this status (killed by signal N: 128+N)",
    ),
    (
        "112",
        "exec: not granted within the wait (--wait-ms, --no-wait)",
    ),
    (
        "113",
        "exec: the lock was lost while the command ran (it was sent SIGTERM, then SIGKILL)",
    ),
    (
        "114",
        "usage error (bad flag or value, unreadable CA file, malformed token)",
    ),
    (
        "115",
        "server unreachable or refused (unknown token, forbidden key, unavailable)",
    ),
    ("126", "exec: the command could not be started"),
    ("127", "exec: the command was not found"),
];

/// The table as `--help` shows it.
pub fn table() -> String {
    let mut text = String::from("Exit status:\n");
    for (status, meaning) in TABLE {
        text.push_str(&format!("  {status:<7} {meaning}\n"));
    }
    text
}

/// Why lockctl ends with one of its own statuses, and the one line it prints to stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub status: u8,
    pub message: String,
}

impl Failure {
    /// A [`USAGE`] failure.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            status: USAGE,
            message: message.into(),
        }
    }

    /// A [`REFUSED`] failure with words for the common causes, so a wrong token or an
    /// unreachable server reads as such, not as an SDK error name. `url` is the server's.
    pub fn refused(doing: &str, url: &str, error: &LockError) -> Failure {
        let why = match error {
            LockError::Unauthorized { message } => {
                format!("the server refused the token (LOCK_TOKEN, --token): {message}")
            }
            LockError::Forbidden { message } => {
                format!("the token does not allow this (forbidden): {message}")
            }
            LockError::Network(message) => format!("cannot reach {url}: {message}"),
            LockError::Timeout(after) => format!("no answer from {url} within {after:?}"),
            LockError::NotLeader { .. } => format!("{url} is unavailable (503), try again"),
            LockError::StoreUnavailable { reason, .. } => {
                format!("{url} cannot write to its store now ({reason}), try again")
            }
            other => other.to_string(),
        };
        Failure {
            status: REFUSED,
            message: format!("{doing}: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's statuses are the constants callers exit with.
    #[test]
    fn the_table_lists_every_constant() {
        let listed: Vec<&str> = TABLE.iter().map(|(status, _)| *status).collect();
        for status in [NOT_GRANTED, LOST, USAGE, REFUSED, CANNOT_EXECUTE, NOT_FOUND] {
            assert!(listed.contains(&status.to_string().as_str()), "{status}");
        }
    }

    /// The README's "Exit status" table of lockctl is this one, row for row.
    #[test]
    fn the_readme_table_is_this_table() {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("| exit status | meaning |")
            .expect("README has lockctl's exit status table");
        let rows: Vec<(String, String)> = readme[start..]
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .map(|line| {
                let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
                (cells[0].trim_matches('`').to_owned(), cells[1].to_owned())
            })
            .collect();
        let expected: Vec<(String, String)> = TABLE
            .iter()
            .map(|(s, m)| (s.to_string(), m.to_string()))
            .collect();
        assert_eq!(rows, expected);
    }

    #[test]
    fn a_wrong_token_says_so() {
        let error = LockError::Unauthorized {
            message: "unknown token".into(),
        };
        let failure = Failure::refused("opening a session", "http://x", &error);
        assert_eq!(failure.status, REFUSED);
        assert!(failure.message.contains("refused the token"), "{failure:?}");
    }
}
