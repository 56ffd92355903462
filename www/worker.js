// The experiment worker: the dashboard's jobs (live runs, sweeps, the fault lab) run here, in
// a dedicated module Web Worker, off the page's main thread (bench-ui's `worker` module). It
// loads the experiment engine, pkg/engine/bench_engine.js (built by scripts/build-ui.sh from
// the page's own crate). The page starts it with `new Worker("worker.js", { type: "module" })`
// and sends it work once it says it is ready; if it cannot load, it says so and the page
// imports the engine itself.
import init, { run_experiment_worker } from "./pkg/engine/bench_engine.js";

init()
  .then(() => run_experiment_worker())
  .catch((err) => postMessage(JSON.stringify({ kind: "failed", message: String(err) })));
