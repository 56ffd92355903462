// A small document service whose writes are fenced (fence.mjs), on node:http with the
// documents in memory:
//   PUT /documents/{name}  body: the value; Fencing-Token and Fencing-Key headers
//                          → 204, 400 VALIDATION_FAILED, 409 FENCED_OUT, 413
//   GET /documents/{name}  → 200 {value, fencingToken} or 404
import { createServer } from "node:http";
import { FenceHeaderError, checkFence, readFence } from "./fence.mjs";

const MAX_BODY_BYTES = 64 * 1024;

export function createService() {
  const fences = new Map(); // lock key → highest fencing token accepted
  const documents = new Map(); // name → { value, fencingToken }
  const handle = async (req, res) => {
    const name = documentName(req.url);
    if (name === undefined) return reply(res, 404, { code: "NOT_FOUND", message: "no such route" });
    if (req.method === "GET") {
      const doc = documents.get(name);
      return doc ? reply(res, 200, doc) : reply(res, 404, { code: "NOT_FOUND", message: "no such document" });
    }
    if (req.method !== "PUT") return reply(res, 405, { code: "METHOD_NOT_ALLOWED", message: "GET or PUT" });
    let fence;
    try {
      fence = readFence(req.headers);
    } catch (err) {
      if (err instanceof FenceHeaderError) return reply(res, 400, err.body);
      throw err;
    }
    const value = await readBody(req);
    if (value === undefined) return reply(res, 413, { code: "PAYLOAD_TOO_LARGE", message: `over ${MAX_BODY_BYTES} bytes` });
    // From the check to the write, no await: nothing else can run in between.
    const refused = checkFence(fences, fence.key, fence.token);
    if (refused) return reply(res, 409, refused);
    documents.set(name, { value, fencingToken: fence.token });
    return reply(res, 204);
  };
  // A failed request (say, a client that hung up mid-body) must not take the service down.
  return createServer((req, res) => handle(req, res).catch(() => res.destroy()));
}

function documentName(url) {
  const match = /^\/documents\/([^/?]+)$/.exec(url);
  if (!match) return undefined;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return undefined;
  }
}

async function readBody(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function reply(res, status, body) {
  if (body === undefined) return res.writeHead(status).end();
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}
