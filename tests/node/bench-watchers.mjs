// The watchers of the fan-out benchmark (bench-watch.mjs forks a few of these, so that reading
// the streams is spread over processes and does not delay the benchmark's own L6 round trip):
// COUNT SSE watchers of KEY (L8, text/event-stream), each on a connection of its own.
// Reports over the IPC channel, with arrival times as epoch milliseconds
// (performance.timeOrigin + performance.now(), comparable across processes on one machine):
//   {ready: true}                   every stream has its snapshot
//   {granted: token}                every stream has seen the grant of `token`
//   {released: token, at: [...]}    every stream has seen its release; one arrival per stream
import http from "node:http";

const { LOCK_URL, KEY } = process.env;
const COUNT = Number(process.env.COUNT);
const now = () => performance.timeOrigin + performance.now();
const path = `/v1/locks/${encodeURIComponent(KEY)}/events`;
let snapshots = 0;
const granted = new Map(); // token → streams that saw it
const released = new Map(); // token → arrival times

function onEvent(event, at) {
  if (event.kind === "snapshot" && ++snapshots === COUNT) process.send({ ready: true });
  if (event.kind === "granted" || event.kind === "handedOff") {
    const seen = (granted.get(event.fencingToken) ?? 0) + 1;
    granted.set(event.fencingToken, seen);
    if (seen === COUNT) {
      granted.delete(event.fencingToken);
      process.send({ granted: event.fencingToken });
    }
  }
  if (event.kind === "released") {
    const arrivals = released.get(event.fencingToken) ?? [];
    arrivals.push(at);
    released.set(event.fencingToken, arrivals);
    if (arrivals.length === COUNT) {
      released.delete(event.fencingToken);
      process.send({ released: event.fencingToken, at: arrivals });
    }
  }
}

for (let i = 0; i < COUNT; i += 1) {
  const req = http.get(new URL(path, LOCK_URL), { agent: false, headers: { accept: "text/event-stream" } }, (res) => {
    if (res.statusCode !== 200) throw new Error(`L8 ${KEY}: ${res.statusCode}`);
    res.setEncoding("utf8");
    let buffer = "";
    res.on("data", (chunk) => {
      const at = now();
      buffer += chunk;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const record = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = record.split("\n").find((line) => line.startsWith("data:"));
        if (data) onEvent(JSON.parse(data.slice(5)), at); // else a keep-alive comment
      }
    });
  });
  req.on("error", (err) => {
    throw err;
  });
}
// The parent closing the channel ends the watchers.
process.on("disconnect", () => process.exit(0));
