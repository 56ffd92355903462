// A job that locks a key and writes the document of that name through the fenced service;
// the test drives it (../scenario/worker.mjs). The service at SERVICE_URL.
import * as sdk from "lock-wasm";
import { runWorker } from "../scenario/worker.mjs";
import { fencedPut } from "./client.mjs";

const documents = `${process.env.SERVICE_URL}/documents/`;
await runWorker(sdk, (handle, value) =>
  fencedPut(documents + encodeURIComponent(handle.key), handle.key, handle.fencingToken, value),
);
