//! The messages between the page and the experiment worker (`crate::worker`), as JSON text
//! through `postMessage`: the page sends a [`Command`], the worker answers with
//! [`WorkerMessage`]s. The same [`Report`]s reach the page directly when a run falls back to
//! the page's own thread. Plain data, host-tested.

use serde::{Deserialize, Serialize};

use crate::model::config::ExperimentConfig;
use crate::model::protocol::Protocol;
use crate::model::record::RunRecord;
use crate::model::sweep::{SweepConfig, SweepResult};

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Job {
    /// One experiment.
    Run(ExperimentConfig),
    /// A sweep against the live server (its simulation stays on the page).
    Sweep(SweepConfig),
}

/// A job and everything the worker needs to reach the server.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Start {
    /// What to run.
    pub job: Job,
    /// The run's id (part of its keys).
    pub run_id: String,
    /// The server field ("" = the origin that served the page).
    pub base_url: String,
    /// The bearer token field ("" = none). It travels in this message only: a worker
    /// message stays in the browser's memory, never in a URL or storage.
    pub token: String,
}

/// Never prints the token.
impl std::fmt::Debug for Start {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Start")
            .field("job", &self.job)
            .field("run_id", &self.run_id)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// Page → worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Command {
    /// Runs a job; one at a time (the page disables Run and Sweep while one runs).
    Start(Start),
    /// Cancels the job running, if any.
    Cancel,
}

/// Where a job stands, for the page to adopt into its signals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The run in progress (a run's, or a sweep's current point).
    pub record: Option<RunRecord>,
    /// The sweep so far.
    pub sweep: Option<SweepResult>,
    /// The protocol of the latest API requests timed since the last report, if any.
    pub protocol: Option<Protocol>,
    /// An error for the banner (the job's setup failed, or the sweep stopped early).
    pub error: Option<String>,
    /// The last report of the job.
    pub done: bool,
}

impl Report {
    /// The last report of a job that could not start.
    pub fn failed(error: impl Into<String>) -> Report {
        Report {
            error: Some(error.into()),
            done: true,
            ..Report::default()
        }
    }
}

/// Worker → page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum WorkerMessage {
    /// The worker's wasm is loaded and it listens for commands.
    Ready,
    /// Progress of the job running (boxed: a record is large, the other messages small).
    Report(Box<Report>),
    /// The worker could not load (posted by `www/worker.js`); the page runs the job itself.
    Failed {
        /// What went wrong.
        message: String,
    },
}

impl WorkerMessage {
    /// The message as sent.
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Command {
    /// The command as sent.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::record::OpenSession;

    fn start() -> Start {
        Start {
            job: Job::Sweep(SweepConfig::default()),
            run_id: "r1".into(),
            base_url: String::new(),
            token: "secret-token".into(),
        }
    }

    #[test]
    fn commands_round_trip() {
        for command in [Command::Start(start()), Command::Cancel] {
            let back: Command = serde_json::from_str(&command.to_json()).unwrap();
            assert_eq!(back, command);
        }
        let run = Command::Start(Start {
            job: Job::Run(ExperimentConfig::default()),
            ..start()
        });
        assert_eq!(
            serde_json::from_str::<Command>(&run.to_json()).unwrap(),
            run
        );
    }

    #[test]
    fn debug_output_hides_the_token() {
        assert!(!format!("{:?}", Command::Start(start())).contains("secret-token"));
    }

    #[test]
    fn reports_round_trip_without_session_ids() {
        let mut record = RunRecord::new("r1", ExperimentConfig::default());
        record.counters.grants = 3;
        record.sessions = vec![OpenSession {
            id: "s-secret".into(),
            holder_id: "h1".into(),
        }];
        let message = WorkerMessage::Report(Box::new(Report {
            record: Some(record.clone()),
            sweep: Some(SweepResult::default()),
            protocol: Some(Protocol::Http2),
            error: None,
            done: true,
        }));
        let json = message.to_json();
        // Session ids are their owners' credentials: they stay in the worker.
        assert!(!json.contains("s-secret"), "{json}");
        record.sessions.clear();
        let WorkerMessage::Report(back) = serde_json::from_str(&json).unwrap() else {
            panic!("not a report: {json}");
        };
        assert_eq!(back.record, Some(record));
        assert_eq!(back.protocol, Some(Protocol::Http2));
        assert!(back.done);
    }

    #[test]
    fn the_worker_scripts_failure_message_parses() {
        // What www/worker.js posts when its wasm does not load.
        let text = r#"{"kind":"failed","message":"TypeError: boom"}"#;
        assert_eq!(
            serde_json::from_str::<WorkerMessage>(text).unwrap(),
            WorkerMessage::Failed {
                message: "TypeError: boom".into()
            }
        );
        assert_eq!(
            serde_json::from_str::<WorkerMessage>(&WorkerMessage::Ready.to_json()).unwrap(),
            WorkerMessage::Ready
        );
    }
}
