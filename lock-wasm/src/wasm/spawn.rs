//! [`LocalSpawner`]: the [`Spawner`] seam over `wasm_bindgen_futures::spawn_local`.

use crate::spawn::{BoxFuture, Spawner};

/// Runs background tasks (the heartbeat loop) on the JS event loop. The spawner itself marks
/// nothing: the heartbeat task waits on the background clock its session gives it
/// (`crate::clock::BackgroundClock`), whose timers are unref'd in Node, so an open session
/// never keeps a Node process alive by itself and a closed one leaves nothing behind that
/// does.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalSpawner;

impl Spawner for LocalSpawner {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        wasm_bindgen_futures::spawn_local(task);
    }
}
