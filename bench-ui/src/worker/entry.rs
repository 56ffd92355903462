//! Inside the experiment worker: listens for [`Command`]s on the
//! `DedicatedWorkerGlobalScope`, runs each started job with `runner::browser` and posts its
//! [`Report`]s back as [`WorkerMessage`]s.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use crate::runner::browser::{browser_env, execute};
use crate::runner::messages::{Command, Report, Start, WorkerMessage};
use crate::runner::CancelFlag;

fn scope() -> DedicatedWorkerGlobalScope {
    js_sys::global().unchecked_into()
}

fn post(message: &WorkerMessage) {
    if let Err(e) = scope().post_message(&JsValue::from_str(&message.to_json())) {
        web_sys::console::error_2(&"bench-ui worker: cannot post".into(), &e);
    }
}

/// Starts listening and tells the page it is ready. Called once, by `www/worker.js`.
pub fn listen() {
    // The job running, to cancel.
    let cancel = Rc::new(RefCell::new(CancelFlag::default()));
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let text = event.data().as_string().unwrap_or_default();
        match serde_json::from_str::<Command>(&text) {
            Ok(Command::Start(start)) => {
                let flag = CancelFlag::default();
                *cancel.borrow_mut() = flag.clone();
                wasm_bindgen_futures::spawn_local(serve(start, flag));
            }
            Ok(Command::Cancel) => cancel.borrow().cancel(),
            Err(e) => {
                web_sys::console::error_1(&format!("bench-ui worker: not a command ({e})").into())
            }
        }
    });
    scope().set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The handler lives as long as the worker.
    on_message.forget();
    post(&WorkerMessage::Ready);
}

/// Runs one job, reporting as it goes.
async fn serve(start: Start, cancel: CancelFlag) {
    let report = |r: Report| post(&WorkerMessage::Report(Box::new(r)));
    match browser_env(&start.base_url, &start.token) {
        Ok(env) => execute(&env, start.job, &start.run_id, &cancel, &report).await,
        Err(e) => report(Report::failed(e)),
    }
}
