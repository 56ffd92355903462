//! The messages between the page and the experiment engine (`crate::worker`), as JSON text:
//! the page sends a [`Command`], the engine answers with [`WorkerMessage`]s. The same text
//! goes through a worker's `postMessage` or, when no worker starts, through the engine
//! module loaded into the page: the page's own wasm never runs an experiment. Plain data,
//! host-tested.

use serde::{Deserialize, Serialize};

use crate::model::config::ExperimentConfig;
use crate::model::lab_form::LabForm;
use crate::model::lab_record::{FaultMark, LabRecord};
use crate::model::lab_simulated::SimulatedOutcome;
use crate::model::protocol::Protocol;
use crate::model::record::RunRecord;
use crate::model::sweep::{SweepConfig, SweepResult};

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Job {
    /// One experiment.
    Run(ExperimentConfig),
    /// A sweep: in the SDK's simulation first (reported as `simulated`), then against the
    /// live server.
    Sweep(SweepConfig),
    /// A fault-lab run against the live server, and in the simulation.
    Lab(LabJob),
}

/// A fault-lab run: the form, and the operator's admin token for its revokes.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabJob {
    /// Scenario and settings.
    pub form: LabForm,
    /// R1's bearer token ("" = none). In this message only, like [`Start::token`].
    pub admin_token: String,
}

/// Never prints the admin token.
impl std::fmt::Debug for LabJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabJob")
            .field("form", &self.form)
            .finish_non_exhaustive()
    }
}

/// A fault injected by hand into a contender of the lab run in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Injection {
    /// 0 = fenced ledger, 1 = unfenced.
    pub side: usize,
    /// 0 = A, 1 = B.
    pub contender: usize,
    /// Which fault (not `kind`: that names the command).
    pub fault: FaultMark,
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
    /// Injects a fault into the lab run in progress (ignored by other jobs).
    Inject(Injection),
}

/// Where a job stands, for the page to adopt into its signals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The run in progress (a run's, or a sweep's current point).
    pub record: Option<RunRecord>,
    /// The sweep so far.
    pub sweep: Option<SweepResult>,
    /// The sweep's simulation so far.
    pub simulated: Option<SweepResult>,
    /// The lab run so far.
    pub lab: Option<LabRecord>,
    /// The lab's simulated outcome.
    pub lab_simulated: Option<SimulatedOutcome>,
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
    /// The worker could not load (posted by `www/worker.js`); the page loads the engine
    /// itself.
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
        let inject = Command::Inject(Injection {
            side: 1,
            contender: 0,
            fault: FaultMark::Pause,
        });
        for command in [Command::Start(start()), Command::Cancel, inject] {
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
    fn debug_output_hides_the_tokens() {
        assert!(!format!("{:?}", Command::Start(start())).contains("secret-token"));
        let lab = Command::Start(Start {
            job: Job::Lab(LabJob {
                form: LabForm::default(),
                admin_token: "admin-secret".into(),
            }),
            ..start()
        });
        let shown = format!("{lab:?}");
        assert!(
            !shown.contains("secret-token") && !shown.contains("admin-secret"),
            "{shown}"
        );
        assert_eq!(
            serde_json::from_str::<Command>(&lab.to_json()).unwrap(),
            lab
        );
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
            done: true,
            ..Report::default()
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
