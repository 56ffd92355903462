//! The OpenAPI 3.0 description of every route, written by hand in this one place, except
//! what a route's access adds (security requirement, 401 and 403 answers), which comes from
//! [`super::table()`] itself, and the error codes, which are `lock_api::ErrorCode`'s own. A
//! unit test checks that its paths and methods are exactly the table's. Nothing in it changes
//! while the server runs, so it is built and serialised once.

use std::sync::OnceLock;

use lock_api::{ErrorCode, Unavailability};
use serde_json::{json, Value};

use crate::auth::guard::Access;

fn error_ref() -> Value {
    json!({ "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } })
}

fn body(schema: &str) -> Value {
    json!({ "required": true, "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } })
}

fn ok(schema: &str) -> Value {
    json!({ "description": "OK", "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } })
}

fn err(description: &str) -> Value {
    let mut e = error_ref();
    e["description"] = json!(description);
    e
}

fn key_param() -> Value {
    json!({ "name": "key", "in": "path", "required": true, "description": "Lock key, 1–256 bytes of printable UTF-8, percent-encoded.", "schema": { "type": "string" } })
}

/// L2, L3 and L5's parameters: the session's public holder id in the path, its session id
/// (the credential) in a header, never in the URL.
fn session_params() -> Value {
    json!([
        { "name": "holderId", "in": "path", "required": true, "schema": { "type": "string" },
          "description": "The session's holderId, as L1 answered it." },
        { "name": "Lock-Session-Id", "in": "header", "required": true, "schema": { "type": "string", "minLength": 1, "maxLength": 256 },
          "description": "The session id. A session id whose holderId is not the path's answers 404 SESSION_NOT_FOUND; no header answers 400 VALIDATION_FAILED." }
    ])
}

/// The `LockMode` schema, by reference.
fn mode() -> Value {
    json!({ "$ref": "#/components/schemas/LockMode" })
}

fn schemas() -> Value {
    let int = json!({ "type": "integer", "format": "int64", "minimum": 0 });
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
    let reasons: Vec<&str> = Unavailability::ALL.iter().map(|r| r.label()).collect();
    json!({
        "Error": { "type": "object", "required": ["code", "message"], "properties": {
            "code": { "type": "string", "enum": codes },
            "message": { "type": "string" }, "field": { "type": "string" }, "leader": { "type": "string" },
            "retryAfterMillis": int, "highestToken": int,
            "limit": { "type": "integer", "minimum": 1, "maximum": 10000, "description": "LIMIT_MISMATCH: the limit in force for the key's shared holds; absent when they have none." },
            "reason": { "type": "string", "enum": reasons, "description": "STORE_UNAVAILABLE: why the store cannot write." } } },
        "Ready": { "type": "object", "required": ["status"], "properties": {
            "status": { "type": "string", "enum": ["ready", "unavailable"] },
            "reason": { "type": "string", "enum": reasons, "description": "unavailable: why the store cannot write" },
            "sinceMillis": { "type": "integer", "format": "int64", "minimum": 0, "description": "unavailable: since when, wall-clock Unix milliseconds" } } },
        "OpenSessionRequest": { "type": "object", "additionalProperties": false, "properties": {
            "ttlMillis": { "type": "integer", "minimum": 100, "maximum": 300000 }, "owner": { "type": "string", "maxLength": 128 } } },
        "SessionOpened": { "type": "object", "properties": { "sessionId": { "type": "string", "description": "The session's credential: never shown to anyone else." },
            "holderId": { "type": "string", "description": "The session's public name (L7, logs): a keyed hash of the id, 32 hex characters." },
            "ttlMillis": int, "heartbeatMillis": int } },
        "LockMode": { "type": "string", "enum": ["exclusive", "shared"], "description": "exclusive: one holder, nobody beside it. shared: beside other shared holders, up to the key's limit (read-write lock readers; semaphore permits)." },
        "HeartbeatRequest": { "type": "object", "properties": {
            "since": { "type": "string", "maxLength": 128, "description": "The `version` of the last L2 answer of this session the client applied. Absent: the answer lists every lock." } } },
        "HeartbeatResponse": { "type": "object", "required": ["ttlMillis"], "description": "Exactly one of three shapes: `locks` (every lock the session holds: no usable `since`), `changes` (what changed after `since`), or neither (nothing changed since `since`).",
            "properties": { "ttlMillis": int,
            "version": { "type": "string", "description": "The session's hold version, opaque; send it back as `since`. Moves with every grant, hand-off, release, revoke and expiry of the session's holds." },
            "locks": { "type": "array", "items": {
            "type": "object", "properties": { "key": { "type": "string" }, "fencingToken": int, "mode": mode() } } },
            "changes": { "type": "array", "description": "One entry per key whose state changed after `since`: its latest state. `gone`: the session holds the key no more (every hold of it with a token up to `fencingToken` is lost). `granted`: the session holds the key with this token (holds of it with lower tokens are lost).", "items": {
            "type": "object", "required": ["key", "fencingToken", "change"], "properties": { "key": { "type": "string" }, "fencingToken": int, "mode": mode(),
                "change": { "type": "string", "enum": ["granted", "gone"] } } } } } },
        "SessionStatus": { "type": "object", "properties": { "sessionId": { "type": "string" }, "remainingMillis": int, "locks": { "type": "array", "items": {
            "type": "object", "properties": { "key": { "type": "string" }, "fencingToken": int, "remainingMillis": int, "mode": mode() } } } } },
        "AcquireRequest": { "type": "object", "additionalProperties": false, "required": ["sessionId"], "properties": {
            "sessionId": { "type": "string" }, "ttlMillis": { "type": "integer", "minimum": 100, "maximum": 300000 },
            "waitMillis": { "type": "integer", "minimum": 0, "maximum": 30000, "description": "How long to wait in the key's FIFO queue; 0: one attempt, never ahead of a queue." },
            "mode": { "allOf": [mode()], "default": "exclusive", "description": "The hold asked for; exclusive when absent." },
            "limit": { "type": "integer", "minimum": 1, "maximum": 10000, "description": "Shared holds only (else 400): most shared holders of the key at once; absent: no limit. Every shared holder of a key agrees on it (else 409 LIMIT_MISMATCH)." },
            "value": { "type": "string", "description": "The hold's value, at most 1024 bytes of UTF-8 (else 400 naming value): shown in L7's holders and L8's grant events; a renewal with a value replaces it, one without keeps it." } } },
        "LockGrant": { "type": "object", "properties": { "key": { "type": "string" }, "sessionId": { "type": "string" }, "fencingToken": int, "ttlMillis": int,
            "waitedMillis": { "type": "integer", "format": "int64", "minimum": 0, "description": "Server-side time from the request's arrival to the start of the answered lease (its wait in the queue): the lease runs ttlMillis from there." },
            "mode": { "type": "string", "enum": ["shared"], "description": "Present for a shared grant only: an exclusive grant has no mode field (as before shared holds)." },
            "limit": { "type": "integer", "minimum": 1, "maximum": 10000, "description": "A shared grant's limit, when the key has one." } } },
        "ReleaseRequest": { "type": "object", "additionalProperties": false, "required": ["fencingToken"], "properties": {
            "fencingToken": int, "sessionId": { "type": "string" } } },
        "Holder": { "type": "object", "description": "Never the holder's session id.", "properties": {
            "holderId": { "type": "string" }, "owner": { "type": "string", "nullable": true }, "fencingToken": int, "remainingMillis": int,
            "value": { "type": "string", "description": "The hold's value (L4 value, L9); absent when it has none." } } },
        "ProclaimRequest": { "type": "object", "additionalProperties": false, "required": ["sessionId", "fencingToken", "value"], "properties": {
            "sessionId": { "type": "string" }, "fencingToken": int, "value": { "type": "string", "description": "At most 1024 bytes of UTF-8." } } },
        "EventKind": { "type": "string", "enum": ["snapshot", "reset", "granted", "handedOff", "released", "expired", "revoked", "proclaimed", "waiters"] },
        "WatchEvent": { "type": "object", "required": ["id", "kind", "key", "atMillis", "waiterCount"], "description": "One L8 event; never a session id.", "properties": {
            "id": { "type": "string", "description": "Opaque: resume after it with ?after= or Last-Event-ID." },
            "kind": { "$ref": "#/components/schemas/EventKind" }, "key": { "type": "string" },
            "atMillis": { "type": "integer", "format": "int64", "description": "Server wall clock (Unix ms) of the commit." },
            "fencingToken": int, "holderId": { "type": "string" }, "owner": { "type": "string" }, "mode": mode(),
            "limit": { "type": "integer", "minimum": 1 }, "value": { "type": "string", "description": "Grants and proclaimed." },
            "waiterCount": { "type": "integer", "format": "int64", "minimum": 0 },
            "state": { "allOf": [{ "$ref": "#/components/schemas/LockState" }], "description": "snapshot and reset: the key at that instant." } } },
        "EventBatch": { "type": "object", "properties": { "events": { "type": "array", "maxItems": 256, "items": { "$ref": "#/components/schemas/WatchEvent" } } } },
        "LockState": { "type": "object", "properties": { "key": { "type": "string" },
            "waiterCount": { "type": "integer", "format": "int64", "minimum": 0, "description": "Live tickets in the key's wait queue, all replicas." },
            "mode": { "allOf": [mode()], "nullable": true, "description": "How the key is held; null when free." },
            "holder": { "allOf": [{ "$ref": "#/components/schemas/Holder" }], "nullable": true, "description": "The exclusive holder; null when the key is free or held shared." },
            "holders": { "type": "array", "items": { "$ref": "#/components/schemas/Holder" }, "description": "Every holder, either mode, in token order." },
            "limit": { "type": "integer", "nullable": true, "description": "The shared holders' limit; null when exclusive, free, or shared without one." } } },
        "RevokeRequest": { "type": "object", "additionalProperties": false, "required": ["reason"], "properties": { "reason": { "type": "string" },
            "fencingToken": { "type": "integer", "format": "int64", "minimum": 0, "description": "Revoke only the hold with this token; absent: every hold of the key." } } },
        "LockOutcome": { "type": "object", "properties": { "key": { "type": "string" },
            "revokedToken": { "type": "integer", "nullable": true, "description": "The lowest revoked token; null when nothing was revoked." },
            "revokedTokens": { "type": "array", "items": int, "description": "Every revoked hold's token, in order; empty when nothing live matched." },
            "reason": { "type": "string" } } },
        "LedgerAppend": { "type": "object", "additionalProperties": false, "required": ["fencingToken", "entry"], "properties": {
            "fencingToken": int, "entry": { "type": "string", "maxLength": 1024 } } },
        "LedgerEntries": { "type": "object", "properties": { "key": { "type": "string" }, "highestToken": { "type": "integer", "nullable": true },
            "entries": { "type": "array", "items": { "type": "object", "properties": { "fencingToken": int, "entry": { "type": "string" },
                "stale": { "type": "boolean", "description": "The unfenced ledger only (absent on the fenced one): the token was lower than the highest the ledger had already accepted for the key." } } } } } },
        "UnfencedAppended": { "type": "object", "required": ["stale"], "properties": {
            "stale": { "type": "boolean", "description": "The token was lower than the highest this ledger had already accepted for the key: a write the fenced ledger refuses with 409 FENCED_OUT, accepted here." } } }
    })
}

/// The optional W3C `traceparent` header every operation takes (C3, C4).
fn traceparent_param() -> Value {
    json!({ "name": "traceparent", "in": "header", "required": false,
            "description": "W3C Trace Context. A valid one puts its trace id into this request's log lines (`traceId`); an invalid one is ignored, never an error.",
            "schema": { "type": "string" } })
}

/// The document served at `/openapi.json`, built on first use.
pub fn document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let mut doc = described();
        add_access(&mut doc);
        add_store_unavailable(&mut doc);
        add_traceparent(&mut doc);
        doc
    })
}

/// [`document`] as JSON text, serialised on first use.
pub fn json_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| document().to_string())
}

/// What each route's access adds to its operation, from the route table, so the document
/// cannot disagree with the guard.
fn add_access(doc: &mut Value) {
    let anyone_or_bearer = json!([{}, { "bearer": [] }]);
    for route in super::table() {
        let op = &mut doc["paths"][route.path][route.method.as_str().to_lowercase()];
        match route.access {
            Access::Public => {}
            Access::Ops => {
                op["security"] = anyone_or_bearer.clone();
                op["responses"]["401"] = err("UNAUTHORIZED: with an auth file and without --public-ops, a client's token or the admin token is required");
            }
            Access::Client => {
                op["security"] = anyone_or_bearer.clone();
                op["responses"]["401"] =
                    err("UNAUTHORIZED: with an auth file, no known client token");
                op["responses"]["403"] = err("FORBIDDEN: the key is outside the client's keyPrefixes, or the token is the admin token (R1 only)");
            }
            Access::Admin => {
                op["security"] = json!([{ "bearer": [] }]);
                op["responses"]["401"] =
                    err("UNAUTHORIZED: no credential (with an auth file: no known token)");
                op["responses"]["403"] = err("FORBIDDEN: neither the admin token nor an admin client whose keyPrefixes cover the key (without an admin token and auth file, always)");
            }
        }
    }
}

/// Every route that calls the store may answer 503 STORE_UNAVAILABLE, from the route table;
/// L4 keeps NOT_LEADER beside it.
fn add_store_unavailable(doc: &mut Value) {
    let store = "STORE_UNAVAILABLE: the store cannot write (reason: disk_full, io_error, read_only, busy, space_exceeded, no_quorum or unreachable; retryAfterMillis and Retry-After); nothing of the request was applied, retry";
    for route in super::table() {
        if route.store.is_none() {
            continue;
        }
        let op = &mut doc["paths"][route.path][route.method.as_str().to_lowercase()];
        let text = match op["responses"]["503"]["description"].as_str() {
            Some(before) => format!("{before}; {store}"),
            None => store.to_owned(),
        };
        op["responses"]["503"] = err(&text);
    }
}

/// Every operation accepts the optional `traceparent` header.
fn add_traceparent(doc: &mut Value) {
    for ops in doc["paths"].as_object_mut().expect("paths").values_mut() {
        for op in ops.as_object_mut().expect("operations").values_mut() {
            let params = op
                .as_object_mut()
                .expect("operation")
                .entry("parameters")
                .or_insert_with(|| json!([]));
            params
                .as_array_mut()
                .expect("parameters")
                .push(json!({ "$ref": "#/components/parameters/traceparent" }));
        }
    }
}

/// The hand-written part of the document.
fn described() -> Value {
    let bad = err("VALIDATION_FAILED");
    let no_session = err("SESSION_NOT_FOUND");
    json!({
        "openapi": "3.0.3",
        "info": { "title": "lock-server", "version": env!("CARGO_PKG_VERSION"),
                  "description": "Fencing-token lock service (contract C3). Every error body is `Error`. Without an auth file `/v1` needs no credential; with one, every `/v1` call carries `Authorization: Bearer <token>` (see C3, Authentication and authorisation)." },
        "paths": {
            "/v1/sessions": { "post": { "operationId": "openSession", "summary": "L1 open session",
                "requestBody": { "required": false, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/OpenSessionRequest" } } } },
                "responses": { "201": ok("SessionOpened"), "400": bad, "413": err("PAYLOAD_TOO_LARGE; the connection (HTTP/1.1) or the stream (HTTP/2) is closed") } } },
            "/v1/sessions/{holderId}/heartbeat": { "post": { "operationId": "heartbeat", "summary": "L2 heartbeat: renews the session and every lock it holds; with `since`, answers only what changed",
                "parameters": session_params(),
                "requestBody": { "required": false, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/HeartbeatRequest" } } } },
                "responses": { "200": ok("HeartbeatResponse"), "400": bad, "404": no_session, "413": err("PAYLOAD_TOO_LARGE; the connection (HTTP/1.1) or the stream (HTTP/2) is closed") } } },
            "/v1/sessions/{holderId}": {
                "delete": { "operationId": "closeSession", "summary": "L3 close session, releasing its locks",
                    "parameters": session_params(), "responses": { "204": { "description": "closed" }, "400": bad, "404": no_session } },
                "get": { "operationId": "sessionStatus", "summary": "L5 session status",
                    "parameters": session_params(), "responses": { "200": ok("SessionStatus"), "400": bad, "404": no_session } } },
            "/v1/locks/{key}/acquire": { "post": { "operationId": "acquire", "summary": "L4 acquire, exclusive or shared (idempotent per session: the holder gets the same grant, renewed from now; with waitMillis > 0, waits in the key's FIFO queue and is handed the lock in turn)",
                "parameters": [key_param()], "requestBody": body("AcquireRequest"),
                "responses": { "200": ok("LockGrant"), "400": bad, "404": no_session, "409": err("LOCK_CONTENDED; LIMIT_MISMATCH (body limit: the limit in force); UPGRADE_NOT_ALLOWED (an exclusive request of a shared holder)"),
                    "413": err("PAYLOAD_TOO_LARGE; the connection (HTTP/1.1) or the stream (HTTP/2) is closed"), "429": err("CONTENTION_EXCEEDED"), "503": err("NOT_LEADER: this replica is shutting down, or holds grants back after an unclean start (retryAfterMillis)") } } },
            "/v1/locks/{key}/release": { "post": { "operationId": "release", "summary": "L6 release: compare-and-delete of the one hold (key, fencingToken)",
                "parameters": [key_param()], "requestBody": body("ReleaseRequest"),
                "responses": { "204": { "description": "released" }, "400": bad, "409": err("LOCK_LOST (benign)") } } },
            "/v1/locks/{key}": { "get": { "operationId": "lockState", "summary": "L7 advisory read",
                "parameters": [key_param()], "responses": { "200": ok("LockState"), "400": bad } } },
            "/v1/locks/{key}/events": { "get": { "operationId": "watch", "summary": "L8 the key's holder changes: SSE (text/event-stream, the default; `: keep-alive` every 15 s) or, for Accept: application/json, a long poll answering EventBatch. First event snapshot; a resume the server cannot serve completely gets reset",
                "parameters": [key_param(),
                    { "name": "after", "in": "query", "required": false, "description": "Resume after this event id (SSE: or the Last-Event-ID header).", "schema": { "type": "string" } },
                    { "name": "waitMillis", "in": "query", "required": false, "description": "Long poll: how long to wait for the first event (default 0).", "schema": { "type": "integer", "minimum": 0, "maximum": 30000 } },
                    { "name": "Last-Event-ID", "in": "header", "required": false, "schema": { "type": "string" } }],
                "responses": { "200": { "description": "SSE stream of WatchEvent records (`id`, `event: <kind>`, `data`), or an EventBatch for Accept: application/json",
                    "content": { "text/event-stream": { "schema": { "type": "string" } }, "application/json": { "schema": { "$ref": "#/components/schemas/EventBatch" } } } },
                    "400": bad, "429": err("CONTENTION_EXCEEDED: too many watchers of the key, or too many event streams on this connection (retryAfterMillis)") } } },
            "/v1/locks/{key}/value": { "post": { "operationId": "proclaim", "summary": "L9 replace the value of the hold (key, fencingToken) of the session; watchers get proclaimed",
                "parameters": [key_param()], "requestBody": body("ProclaimRequest"),
                "responses": { "204": { "description": "replaced" }, "400": bad, "404": err("SESSION_NOT_FOUND"), "409": err("LOCK_LOST: the session does not hold (key, fencingToken) now") } } },
            "/v1/admin/locks/{key}/revoke": { "post": { "operationId": "revoke", "summary": "R1 force revoke of every hold of the key, or of the one with fencingToken (Authorization: Bearer <admin token>)",
                "parameters": [key_param()], "requestBody": body("RevokeRequest"),
                "responses": { "200": ok("LockOutcome"), "400": bad } } },
            "/v1/demo/ledger/{key}": {
                "post": { "operationId": "ledgerAppend", "summary": "Demo fenced resource: append if fencingToken ≥ highest seen",
                    "parameters": [key_param()], "requestBody": body("LedgerAppend"),
                    "responses": { "204": { "description": "accepted" }, "400": bad, "409": err("FENCED_OUT") } },
                "get": { "operationId": "ledgerRead", "summary": "Demo ledger entries in order",
                    "parameters": [key_param()], "responses": { "200": ok("LedgerEntries"), "400": bad } } },
            "/v1/demo/unfenced-ledger/{key}": {
                "post": { "operationId": "unfencedLedgerAppend", "summary": "Demonstration only, never the default (the dashboard's fault lab): the demo ledger without the fence, a ledger of its own. Accepts every valid write; stale when fencingToken is below the highest this ledger has accepted for the key",
                    "parameters": [key_param()], "requestBody": body("LedgerAppend"),
                    "responses": { "200": ok("UnfencedAppended"), "400": bad } },
                "get": { "operationId": "unfencedLedgerRead", "summary": "Unfenced demo ledger entries in order, each with stale",
                    "parameters": [key_param()], "responses": { "200": ok("LedgerEntries"), "400": bad } } },
            "/healthz": { "get": { "operationId": "healthz", "summary": "Liveness: 200 while the process serves HTTP, whatever the store",
                "responses": { "200": { "description": "serving" } } } },
            "/readyz": { "get": { "operationId": "readyz", "summary": "Readiness: whether the store accepts writes (a write probe each second and the requests' own writes)",
                "responses": { "200": { "description": "ready", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Ready" } } } },
                    "503": { "description": "the store cannot write", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Ready" } } } } } } },
            "/metrics": { "get": { "operationId": "metrics", "summary": "Prometheus metrics",
                "responses": { "200": { "description": "text exposition format", "content": { "text/plain": { "schema": { "type": "string" } } } } } } },
            "/openapi.json": { "get": { "operationId": "openapi", "summary": "This document",
                "responses": { "200": { "description": "OpenAPI 3.0 document" } } } }
        },
        "components": {
            "schemas": schemas(),
            "parameters": { "traceparent": traceparent_param() },
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer",
                "description": "An auth-file client's token, or the --admin-token (R1, /metrics, /openapi.json)." } }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    #[test]
    fn document_describes_exactly_the_routes() {
        let doc = super::document();
        let mut described = BTreeSet::new();
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for method in ops.as_object().unwrap().keys() {
                described.insert((method.to_uppercase(), path.clone()));
            }
        }
        let routed: BTreeSet<_> = super::super::table()
            .into_iter()
            .map(|r| (r.method.to_string(), r.path.to_string()))
            .collect();
        assert_eq!(described, routed);
        for ops in doc["paths"].as_object().unwrap().values() {
            for op in ops.as_object().unwrap().values() {
                let params = op["parameters"].as_array().unwrap();
                assert!(params
                    .iter()
                    .any(|p| p["$ref"] == "#/components/parameters/traceparent"));
            }
        }
        assert_eq!(
            doc["components"]["parameters"]["traceparent"]["in"],
            "header"
        );
    }

    #[test]
    fn every_store_route_declares_store_unavailable() {
        let doc = super::document();
        for route in super::super::table() {
            let op = &doc["paths"][route.path][route.method.as_str().to_lowercase()];
            let answer = op["responses"]["503"]["description"].as_str().unwrap_or("");
            assert_eq!(
                answer.contains("STORE_UNAVAILABLE"),
                route.store.is_some(),
                "{} {}",
                route.method,
                route.path
            );
        }
        assert!(doc["paths"]["/readyz"]["get"]["responses"]["503"].is_object());
    }

    #[test]
    fn the_error_codes_are_the_apis_own() {
        let doc = super::document();
        let listed = &doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"];
        let codes: Vec<&str> = lock_api::ErrorCode::ALL
            .iter()
            .map(|c| c.as_str())
            .collect();
        assert_eq!(listed, &serde_json::json!(codes));
        let text: serde_json::Value = serde_json::from_str(super::json_text()).unwrap();
        assert_eq!(&text, doc);
    }

    /// Every field the wire types write (each with every optional field set) is a property
    /// of its schema, so a field added to `lock_api` without the document fails here.
    #[test]
    fn schemas_name_every_wire_field() {
        use lock_api::{
            ChangeKind, ErrorBody, ErrorCode, HeartbeatRequest, HeartbeatResponse, HeldLock,
            HoldChange, Holder, LedgerAppend, LedgerEntries, LedgerEntry, LockGrant, LockMode,
            LockOutcome, LockState, LockStatus, RevokeRequest, UnfencedAppended,
        };
        use serde_json::{json, to_value};
        let holder = Holder {
            value: None,
            holder_id: "h".into(),
            owner: Some("o".into()),
            fencing_token: 1,
            remaining_millis: 1,
        };
        let mut error = ErrorBody::new(ErrorCode::LimitMismatch, "m");
        (error.field, error.leader) = (Some("f".into()), Some("l".into()));
        (error.retry_after_millis, error.highest_token, error.limit) = (Some(1), Some(1), Some(1));
        error.reason = Some("disk_full".into());
        let change = HoldChange {
            key: "k".into(),
            fencing_token: 1,
            mode: LockMode::Shared,
            change: ChangeKind::Gone,
        };
        let beat = HeartbeatResponse {
            ttl_millis: 1,
            version: Some("v".into()),
            locks: Some(Vec::new()),
            changes: Some(vec![change.clone()]),
        };
        let entry = LedgerEntry {
            fencing_token: 1,
            entry: "e".into(),
            stale: Some(true),
        };
        let cases = [
            ("Error", to_value(error).unwrap()),
            (
                "LedgerAppend",
                to_value(LedgerAppend {
                    fencing_token: 1,
                    entry: "e".into(),
                })
                .unwrap(),
            ),
            (
                "LedgerEntries",
                to_value(LedgerEntries {
                    key: "k".into(),
                    highest_token: Some(1),
                    entries: vec![entry.clone()],
                })
                .unwrap(),
            ),
            (
                "UnfencedAppended",
                to_value(UnfencedAppended { stale: true }).unwrap(),
            ),
            ("HeartbeatResponse", to_value(beat).unwrap()),
            (
                "HeartbeatRequest",
                to_value(HeartbeatRequest {
                    since: Some("v".into()),
                })
                .unwrap(),
            ),
            (
                "AcquireRequest",
                json!({"sessionId": "s", "ttlMillis": 1, "waitMillis": 1, "mode": "shared", "limit": 2}),
            ),
            (
                "LockGrant",
                to_value(LockGrant {
                    key: "k".into(),
                    session_id: "s".into(),
                    fencing_token: 1,
                    ttl_millis: 1,
                    waited_millis: 1,
                    mode: LockMode::Shared,
                    limit: Some(2),
                })
                .unwrap(),
            ),
            (
                "LockState",
                to_value(LockState {
                    key: "k".into(),
                    mode: Some(LockMode::Shared),
                    holder: Some(holder.clone()),
                    holders: vec![holder.clone()],
                    limit: Some(2),
                    waiter_count: 1,
                })
                .unwrap(),
            ),
            ("Holder", to_value(holder).unwrap()),
            (
                "RevokeRequest",
                to_value(RevokeRequest {
                    reason: "r".into(),
                    fencing_token: Some(1),
                })
                .unwrap(),
            ),
            (
                "LockOutcome",
                to_value(LockOutcome {
                    key: "k".into(),
                    revoked_token: Some(1),
                    revoked_tokens: vec![1],
                    reason: "r".into(),
                })
                .unwrap(),
            ),
        ];
        let schemas = &super::document()["components"]["schemas"];
        let check = |name: &str, schema: &serde_json::Value, value: &serde_json::Value| {
            for field in value.as_object().unwrap().keys() {
                assert!(
                    schema["properties"].get(field).is_some(),
                    "{name} has no property {field}"
                );
            }
        };
        for (name, value) in &cases {
            check(name, &schemas[name], value);
        }
        let held = HeldLock {
            key: "k".into(),
            fencing_token: 1,
            mode: LockMode::Shared,
        };
        let status = LockStatus {
            key: "k".into(),
            fencing_token: 1,
            remaining_millis: 1,
            mode: LockMode::Shared,
        };
        let locks = |name: &str| &schemas[name]["properties"]["locks"]["items"];
        check(
            "HeartbeatResponse",
            &schemas["HeartbeatResponse"]["properties"]["changes"]["items"],
            &to_value(change).unwrap(),
        );
        check(
            "HeartbeatResponse",
            locks("HeartbeatResponse"),
            &to_value(held).unwrap(),
        );
        check(
            "SessionStatus",
            locks("SessionStatus"),
            &to_value(status).unwrap(),
        );
        check(
            "LedgerEntries",
            &schemas["LedgerEntries"]["properties"]["entries"]["items"],
            &to_value(entry).unwrap(),
        );
    }

    #[test]
    fn guarded_operations_declare_their_refusals() {
        use crate::auth::guard::Access;
        let doc = super::document();
        for route in super::super::table() {
            let op = &doc["paths"][route.path][route.method.as_str().to_lowercase()];
            let declares = |status: &str| op["responses"].get(status).is_some();
            let (unauthorized, forbidden) = match route.access {
                Access::Public => (false, false),
                Access::Ops => (true, false),
                Access::Client | Access::Admin => (true, true),
            };
            assert_eq!(
                declares("401"),
                unauthorized,
                "{} {}",
                route.method,
                route.path
            );
            assert_eq!(
                declares("403"),
                forbidden,
                "{} {}",
                route.method,
                route.path
            );
        }
    }
}
