//! The page's side of the experiment engine: [`run_job`] starts an engine for the job, sends
//! it, hands the engine's reports to the page and forwards the page's later commands
//! (Cancel, a fault injected by hand). The engine runs in a dedicated worker; when none can
//! start (no module workers in this browser, no `worker.js` beside the page) the page
//! imports the engine module ([`ENGINE_MODULE`]) and runs it on its own thread. Either way
//! the page's own wasm holds no experiment code: that is what keeps its first load small.

use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::future::{pending, select};
use futures::StreamExt;
use leptos::prelude::{LocalStorage, SetValue, StoredValue, WithValue};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{ErrorEvent, Event, MessageEvent, Worker, WorkerOptions, WorkerType};

use crate::runner::messages::{Command, Report, Start, WorkerMessage};

/// The worker script, relative to the page: `www/worker.js`, beside `index.html`.
pub const WORKER_SCRIPT: &str = "worker.js";

/// The engine's module, relative to the page (built by `scripts/build-ui.sh`).
pub const ENGINE_MODULE: &str = "pkg/engine/bench_engine.js";

#[wasm_bindgen(inline_js = r#"
export function load_engine(url, onMessage) {
  return import(new URL(url, document.baseURI).href).then(async (engine) => {
    await engine.default();
    return engine.run_engine_on_page(onMessage);
  });
}
"#)]
extern "C" {
    /// Imports and starts the engine module on the page; resolves to its port.
    fn load_engine(url: &str, on_message: &js_sys::Function) -> js_sys::Promise;

    /// The engine module's `EnginePort`, as the page reaches it.
    type PagePort;

    /// Hands the engine one command's JSON text.
    #[wasm_bindgen(method)]
    fn post(this: &PagePort, text: &str);

    /// Releases the port's hold on the engine.
    #[wasm_bindgen(method)]
    fn free(this: &PagePort);
}

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

/// The page's way to the job it started last (Cancel, the lab's faults). `Copy`, like the
/// signals the page's actions hold.
#[derive(Clone, Copy)]
pub struct JobCommands(StoredValue<Option<UnboundedSender<Command>>, LocalStorage>);

impl Default for JobCommands {
    fn default() -> Self {
        JobCommands(StoredValue::new_local(None))
    }
}

impl JobCommands {
    /// The receiving end for the next job: what is sent from now on goes to it.
    pub fn next_job(self) -> UnboundedReceiver<Command> {
        let (sender, commands) = unbounded();
        self.0.set_value(Some(sender));
        commands
    }

    /// Sends `command` to the job (nothing once it has ended, or before the first).
    pub fn send(self, command: Command) {
        self.0.with_value(|sender| {
            if let Some(sender) = sender {
                let _ = sender.unbounded_send(command);
            }
        });
    }
}

/// Runs `start` in a fresh engine (in a worker, else on the page), tells `on_host` where,
/// forwards `commands` to it, then hands `apply` every report up to the last. A fresh
/// worker per job: whatever a job leaves behind (timers, a stuck request) ends with it.
pub async fn run_job(
    start: Start,
    commands: UnboundedReceiver<Command>,
    on_host: impl FnOnce(Host),
    apply: &dyn Fn(Report),
) {
    let link = match EngineLink::in_worker().await {
        Ok(link) => Ok(link),
        Err(why) => {
            web_sys::console::warn_1(
                &format!("bench-ui: experiments run on the page's thread (no worker: {why})")
                    .into(),
            );
            EngineLink::on_page().await
        }
    };
    match link {
        Ok(link) => {
            on_host(link.host());
            link.run(start, commands, apply).await;
        }
        Err(why) => apply(Report::failed(format!(
            "the experiment engine did not load: {why}"
        ))),
    }
}

/// Where the engine listens.
enum Endpoint {
    Worker(Worker),
    /// The engine module, imported into the page.
    #[cfg(not(feature = "engine"))]
    Imported(PagePort),
    /// The engine linked into this module: a build with both features (the component
    /// tests', whose page has no engine module beside it).
    #[cfg(feature = "engine")]
    Linked(std::rc::Rc<super::entry::Engine>),
}

/// A started engine: its endpoint and what it says. A worker is terminated when dropped.
struct EngineLink {
    endpoint: Endpoint,
    incoming: UnboundedReceiver<WorkerMessage>,
    _on_message: Closure<dyn FnMut(JsValue)>,
    _on_error: Option<Closure<dyn FnMut(Event)>>,
}

/// A callback that parses the engine's messages into `sender`.
fn message_sink(sender: UnboundedSender<WorkerMessage>) -> Closure<dyn FnMut(JsValue)> {
    Closure::new(move |data: JsValue| {
        // A worker's `MessageEvent` carries the text in `data`; the page's engine the text.
        let text = match data.dyn_ref::<MessageEvent>() {
            Some(event) => event.data().as_string(),
            None => data.as_string(),
        };
        let message = serde_json::from_str(&text.unwrap_or_default()).unwrap_or_else(|e| {
            WorkerMessage::Failed {
                message: format!("unreadable message ({e})"),
            }
        });
        let _ = sender.unbounded_send(message);
    })
}

impl EngineLink {
    /// Starts a worker and waits until it listens; `Err` says why it could not.
    async fn in_worker() -> Result<EngineLink, String> {
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        let worker =
            Worker::new_with_options(WORKER_SCRIPT, &options).map_err(|e| format!("{e:?}"))?;
        let (sender, incoming) = unbounded();
        let on_message = message_sink(sender.clone());
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
        EngineLink {
            endpoint: Endpoint::Worker(worker),
            incoming,
            _on_message: on_message,
            _on_error: Some(on_error),
        }
        .ready()
        .await
    }

    /// Starts the engine on the page: the engine module, imported (or the engine linked in).
    async fn on_page() -> Result<EngineLink, String> {
        let (sender, incoming) = unbounded();
        let on_message = message_sink(sender);
        let callback: &js_sys::Function = on_message.as_ref().unchecked_ref();
        #[cfg(feature = "engine")]
        let endpoint = Endpoint::Linked(super::entry::Engine::on_page(callback.clone()));
        #[cfg(not(feature = "engine"))]
        let endpoint = {
            let port = wasm_bindgen_futures::JsFuture::from(load_engine(ENGINE_MODULE, callback))
                .await
                .map_err(|e| format!("{ENGINE_MODULE}: {e:?}"))?;
            Endpoint::Imported(port.unchecked_into())
        };
        EngineLink {
            endpoint,
            incoming,
            _on_message: on_message,
            _on_error: None,
        }
        .ready()
        .await
    }

    /// Waits for the engine's `Ready`.
    async fn ready(mut self) -> Result<EngineLink, String> {
        match self.incoming.next().await {
            Some(WorkerMessage::Ready) => Ok(self),
            Some(WorkerMessage::Failed { message }) => Err(message),
            other => Err(format!("it said {other:?} before it was ready")),
        }
    }

    fn host(&self) -> Host {
        match self.endpoint {
            Endpoint::Worker(_) => Host::Worker,
            _ => Host::Page,
        }
    }

    fn send(&self, command: &Command) {
        let text = command.to_json();
        match &self.endpoint {
            Endpoint::Worker(worker) => {
                if let Err(e) = worker.post_message(&JsValue::from_str(&text)) {
                    web_sys::console::error_2(
                        &"bench-ui: cannot reach the experiment worker".into(),
                        &e,
                    );
                }
            }
            #[cfg(not(feature = "engine"))]
            Endpoint::Imported(port) => port.post(&text),
            #[cfg(feature = "engine")]
            Endpoint::Linked(engine) => engine.handle(&text),
        }
    }

    /// Runs `start`, handing `apply` every report until the last; forwards `commands`.
    async fn run(
        mut self,
        start: Start,
        mut commands: UnboundedReceiver<Command>,
        apply: &dyn Fn(Report),
    ) {
        let mut incoming = std::mem::replace(&mut self.incoming, unbounded().1);
        self.send(&Command::Start(start));
        let this = &self;
        let forward = async move {
            while let Some(command) = commands.next().await {
                this.send(&command);
            }
            // The page dropped its sender: the job's reports still come.
            pending::<()>().await
        };
        let reports = async {
            while let Some(message) = incoming.next().await {
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
                            "the experiment engine failed: {message}"
                        )));
                    }
                    WorkerMessage::Ready => {}
                }
            }
        };
        select(Box::pin(reports), Box::pin(forward)).await;
    }
}

impl Drop for EngineLink {
    fn drop(&mut self) {
        match &self.endpoint {
            Endpoint::Worker(worker) => {
                worker.set_onmessage(None);
                worker.set_onerror(None);
                worker.terminate();
            }
            #[cfg(not(feature = "engine"))]
            Endpoint::Imported(port) => port.free(),
            #[cfg(feature = "engine")]
            Endpoint::Linked(_) => {}
        }
    }
}
