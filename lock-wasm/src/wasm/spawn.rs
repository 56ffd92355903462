//! [`LocalSpawner`]: the [`Spawner`] seam over `wasm_bindgen_futures::spawn_local`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::spawn::{BoxFuture, Spawner};

use super::timer::as_background;

/// Runs background tasks (the heartbeat loop) on the JS event loop. Timers they create are
/// unref'd in Node, so an open session never keeps a Node process alive by itself and a
/// closed one leaves nothing behind that does.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalSpawner;

impl Spawner for LocalSpawner {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        wasm_bindgen_futures::spawn_local(Background(task));
    }
}

/// Polls its task with the background mark set (wasm32 is single-threaded, so "the task
/// being polled" is exactly what the mark means).
struct Background(BoxFuture<'static, ()>);

impl Future for Background {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        as_background(|| self.0.as_mut().poll(cx))
    }
}
