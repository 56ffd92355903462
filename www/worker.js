// The experiment worker: the dashboard's live runs and sweeps run here, in a dedicated module
// Web Worker, off the page's main thread (bench-ui's `worker` module). It loads the page's
// own pkg/ (built by scripts/build-ui.sh): no second wasm build. The page starts it with
// `new Worker("worker.js", { type: "module" })` and sends it work once it says it is ready;
// if it cannot load, it says so and the page runs the work itself.
import init, { run_experiment_worker } from "./pkg/bench_ui.js";

init()
  .then(() => run_experiment_worker())
  .catch((err) => postMessage(JSON.stringify({ kind: "failed", message: String(err) })));
