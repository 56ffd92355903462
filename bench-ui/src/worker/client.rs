//! The page's side of the experiment worker: [`run_job`] starts a worker for the job, sends
//! it, hands the worker's reports to the page and forwards Cancel; when no worker can start
//! (no module workers in this browser, no `worker.js` beside the page), the job runs on the
//! page's own thread with the same code (`runner::browser`).

use futures::channel::mpsc::{unbounded, UnboundedReceiver};
use futures::future::{pending, select};
use futures::StreamExt;
use lock_wasm::wasm::JsClock;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{ErrorEvent, Event, MessageEvent, Worker, WorkerOptions, WorkerType};

use crate::runner::browser::execute;
use crate::runner::messages::{Command, Report, Start, WorkerMessage};
use crate::runner::{CancelFlag, Env};

/// The worker script, relative to the page: `www/worker.js`, beside `index.html`.
pub const WORKER_SCRIPT: &str = "worker.js";

/// Where a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// In the experiment worker.
    Worker,
    /// On the page's thread (no worker could start).
    Page,
}

impl Host {
    /// As the page's `data-host` names it.
    pub fn label(self) -> &'static str {
        match self {
            Host::Worker => "worker",
            Host::Page => "page",
        }
    }
}

/// Runs `start` in a fresh experiment worker, or on the page with `env` (the page's seams
/// for the same server and token) when none starts; tells `on_host` where, then hands
/// `apply` every report up to the last. A fresh worker per job: whatever a job leaves
/// behind (timers, a stuck request) ends with it.
pub async fn run_job(
    env: Env,
    start: Start,
    cancel: &CancelFlag,
    on_host: impl FnOnce(Host),
    apply: &dyn Fn(Report),
) {
    match ExperimentWorker::start().await {
        Ok(worker) => {
            on_host(Host::Worker);
            worker.run(start, cancel, apply).await;
        }
        Err(why) => {
            web_sys::console::warn_1(
                &format!("bench-ui: experiments run on the page's thread (no worker: {why})")
                    .into(),
            );
            on_host(Host::Page);
            execute(&env, start.job, &start.run_id, cancel, apply).await;
        }
    }
}

/// A running worker, terminated when dropped.
struct ExperimentWorker {
    worker: Worker,
    incoming: UnboundedReceiver<WorkerMessage>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(Event)>,
}

impl ExperimentWorker {
    /// Starts the worker and waits until it listens; `Err` says why it could not.
    async fn start() -> Result<ExperimentWorker, String> {
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        let worker =
            Worker::new_with_options(WORKER_SCRIPT, &options).map_err(|e| format!("{e:?}"))?;
        let (sender, incoming) = unbounded();
        let on_message = {
            let sender = sender.clone();
            Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
                let text = event.data().as_string().unwrap_or_default();
                let message =
                    serde_json::from_str(&text).unwrap_or_else(|e| WorkerMessage::Failed {
                        message: format!("unreadable message ({e})"),
                    });
                let _ = sender.unbounded_send(message);
            })
        };
        // A script that does not load fires a plain `Event`; an exception in the worker
        // (a panic) an `ErrorEvent` with its message.
        let on_error = Closure::<dyn FnMut(Event)>::new(move |event: Event| {
            let message = event
                .dyn_ref::<ErrorEvent>()
                .map(ErrorEvent::message)
                .unwrap_or_else(|| format!("{WORKER_SCRIPT} did not load"));
            let _ = sender.unbounded_send(WorkerMessage::Failed { message });
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let mut this = ExperimentWorker {
            worker,
            incoming,
            _on_message: on_message,
            _on_error: on_error,
        };
        match this.incoming.next().await {
            Some(WorkerMessage::Ready) => Ok(this),
            Some(WorkerMessage::Failed { message }) => Err(message),
            other => Err(format!("it said {other:?} before it was ready")),
        }
    }

    /// Runs `start`, handing `apply` every report until the last; sends Cancel when
    /// `cancel` is set.
    async fn run(mut self, start: Start, cancel: &CancelFlag, apply: &dyn Fn(Report)) {
        let worker = self.worker.clone();
        send(&worker, &Command::Start(start));
        let reports = async {
            while let Some(message) = self.incoming.next().await {
                match message {
                    WorkerMessage::Report(report) => {
                        let done = report.done;
                        apply(*report);
                        if done {
                            return;
                        }
                    }
                    WorkerMessage::Failed { message } => {
                        return apply(Report::failed(format!(
                            "the experiment worker failed: {message}"
                        )));
                    }
                    WorkerMessage::Ready => {}
                }
            }
        };
        let forward_cancel = async {
            cancel.wait(&JsClock).await;
            send(&worker, &Command::Cancel);
            // The worker winds down and reports `done`.
            pending::<()>().await
        };
        select(Box::pin(reports), Box::pin(forward_cancel)).await;
    }
}

impl Drop for ExperimentWorker {
    fn drop(&mut self) {
        self.worker.set_onmessage(None);
        self.worker.set_onerror(None);
        self.worker.terminate();
    }
}

fn send(worker: &Worker, command: &Command) {
    if let Err(e) = worker.post_message(&JsValue::from_str(&command.to_json())) {
        web_sys::console::error_2(&"bench-ui: cannot reach the experiment worker".into(), &e);
    }
}
