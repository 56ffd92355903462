//! The engine's side: takes the page's [`Command`]s as JSON text, runs each started job with
//! `runner::browser` and posts its [`Report`]s back as [`WorkerMessage`]s. Two hosts: a
//! dedicated worker ([`listen_in_worker`], messages through its global scope), or the page
//! itself when no worker starts ([`Engine::on_page`], messages through a JS callback).

use std::cell::RefCell;
use std::rc::Rc;

use futures::channel::mpsc::{unbounded, UnboundedSender};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use crate::runner::browser::execute;
use crate::runner::messages::{Command, Injection, Report, WorkerMessage};
use crate::runner::CancelFlag;

/// Sends a message to the page.
type Post = Rc<dyn Fn(&WorkerMessage)>;

/// The engine: the job running (to cancel, to inject faults into) and the way to the page.
pub struct Engine {
    post: Post,
    cancel: RefCell<CancelFlag>,
    injections: RefCell<Option<UnboundedSender<Injection>>>,
}

impl Engine {
    /// An engine posting through `post`; it tells the page it is ready.
    fn new(post: Post) -> Rc<Engine> {
        post(&WorkerMessage::Ready);
        Rc::new(Engine {
            post,
            cancel: RefCell::new(CancelFlag::default()),
            injections: RefCell::new(None),
        })
    }

    /// An engine on the page's own thread, posting each message's JSON text to `on_message`.
    pub fn on_page(on_message: js_sys::Function) -> Rc<Engine> {
        Engine::new(Rc::new(move |message: &WorkerMessage| {
            let text = JsValue::from_str(&message.to_json());
            if let Err(e) = on_message.call1(&JsValue::NULL, &text) {
                web_sys::console::error_2(&"bench-ui engine: cannot post".into(), &e);
            }
        }))
    }

    /// Takes one command from the page.
    pub fn handle(&self, text: &str) {
        match serde_json::from_str::<Command>(text) {
            Ok(Command::Start(start)) => {
                let flag = CancelFlag::default();
                *self.cancel.borrow_mut() = flag.clone();
                let (sender, injections) = unbounded();
                *self.injections.borrow_mut() = Some(sender);
                let post = self.post.clone();
                wasm_bindgen_futures::spawn_local(async move {
                    let report = |r: Report| post(&WorkerMessage::Report(Box::new(r)));
                    execute(start, &flag, injections, &report).await
                });
            }
            Ok(Command::Cancel) => self.cancel.borrow().cancel(),
            Ok(Command::Inject(injection)) => {
                if let Some(sender) = self.injections.borrow().as_ref() {
                    // A job that has ended dropped its receiver: nothing to inject into.
                    let _ = sender.unbounded_send(injection);
                }
            }
            Err(e) => {
                web_sys::console::error_1(&format!("bench-ui engine: not a command ({e})").into())
            }
        }
    }
}

/// Listens on the dedicated worker's global scope and tells the page it is ready. Called
/// once, by `www/worker.js`.
pub fn listen_in_worker() {
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let post: Post = {
        let scope = scope.clone();
        Rc::new(move |message: &WorkerMessage| {
            if let Err(e) = scope.post_message(&JsValue::from_str(&message.to_json())) {
                web_sys::console::error_2(&"bench-ui worker: cannot post".into(), &e);
            }
        })
    };
    // `Ready` goes out first: the page's answer is an event, handled once this has returned.
    let engine = Engine::new(post);
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        engine.handle(&event.data().as_string().unwrap_or_default());
    });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The handler lives as long as the worker.
    on_message.forget();
}
