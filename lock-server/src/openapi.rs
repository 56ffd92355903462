//! The OpenAPI 3.0 description of every route, written by hand in this one place. A unit
//! test checks that its paths and methods are exactly `routes::table()`.

use serde_json::{json, Value};

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

fn id_param() -> Value {
    json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } })
}

fn schemas() -> Value {
    let int = json!({ "type": "integer", "format": "int64", "minimum": 0 });
    json!({
        "Error": { "type": "object", "required": ["code", "message"], "properties": {
            "code": { "type": "string", "enum": ["LOCK_CONTENDED","CONTENTION_EXCEEDED","NOT_LEADER","VALIDATION_FAILED","SESSION_NOT_FOUND","LOCK_LOST","FENCED_OUT","PAYLOAD_TOO_LARGE","UNAUTHORIZED","FORBIDDEN","NOT_FOUND","METHOD_NOT_ALLOWED","INTERNAL"] },
            "message": { "type": "string" }, "field": { "type": "string" }, "leader": { "type": "string" },
            "retryAfterMillis": int, "highestToken": int } },
        "OpenSessionRequest": { "type": "object", "additionalProperties": false, "properties": {
            "ttlMillis": { "type": "integer", "minimum": 100, "maximum": 300000 }, "owner": { "type": "string", "maxLength": 128 } } },
        "SessionOpened": { "type": "object", "properties": { "sessionId": { "type": "string" }, "ttlMillis": int, "heartbeatMillis": int } },
        "HeartbeatResponse": { "type": "object", "properties": { "ttlMillis": int, "locks": { "type": "array", "items": {
            "type": "object", "properties": { "key": { "type": "string" }, "fencingToken": int } } } } },
        "SessionStatus": { "type": "object", "properties": { "sessionId": { "type": "string" }, "remainingMillis": int, "locks": { "type": "array", "items": {
            "type": "object", "properties": { "key": { "type": "string" }, "fencingToken": int, "remainingMillis": int } } } } },
        "AcquireRequest": { "type": "object", "additionalProperties": false, "required": ["sessionId"], "properties": {
            "sessionId": { "type": "string" }, "ttlMillis": { "type": "integer", "minimum": 100, "maximum": 300000 },
            "waitMillis": { "type": "integer", "minimum": 0, "maximum": 30000 } } },
        "LockGrant": { "type": "object", "properties": { "key": { "type": "string" }, "sessionId": { "type": "string" }, "fencingToken": int, "ttlMillis": int } },
        "ReleaseRequest": { "type": "object", "additionalProperties": false, "required": ["fencingToken"], "properties": {
            "fencingToken": int, "sessionId": { "type": "string" } } },
        "LockState": { "type": "object", "properties": { "key": { "type": "string" }, "waiterCount": int, "holder": {
            "nullable": true, "type": "object", "properties": { "sessionId": { "type": "string" }, "fencingToken": int, "remainingMillis": int } } } },
        "RevokeRequest": { "type": "object", "additionalProperties": false, "required": ["reason"], "properties": { "reason": { "type": "string" } } },
        "LockOutcome": { "type": "object", "properties": { "key": { "type": "string" }, "revokedToken": { "type": "integer", "nullable": true }, "reason": { "type": "string" } } },
        "LedgerAppend": { "type": "object", "additionalProperties": false, "required": ["fencingToken", "entry"], "properties": {
            "fencingToken": int, "entry": { "type": "string", "maxLength": 1024 } } },
        "LedgerEntries": { "type": "object", "properties": { "key": { "type": "string" }, "highestToken": { "type": "integer", "nullable": true },
            "entries": { "type": "array", "items": { "type": "object", "properties": { "fencingToken": int, "entry": { "type": "string" } } } } } }
    })
}

/// The document served at `/openapi.json`.
pub fn document() -> Value {
    let bad = err("VALIDATION_FAILED");
    let no_session = err("SESSION_NOT_FOUND");
    json!({
        "openapi": "3.0.3",
        "info": { "title": "lock-server", "version": env!("CARGO_PKG_VERSION"),
                  "description": "Fencing-token lock service (contract C3). Every error body is `Error`." },
        "paths": {
            "/v1/sessions": { "post": { "operationId": "openSession", "summary": "L1 open session",
                "requestBody": { "required": false, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/OpenSessionRequest" } } } },
                "responses": { "201": ok("SessionOpened"), "400": bad, "413": err("PAYLOAD_TOO_LARGE; the connection (HTTP/1.1) or the stream (HTTP/2) is closed") } } },
            "/v1/sessions/{id}/heartbeat": { "post": { "operationId": "heartbeat", "summary": "L2 heartbeat: renews the session and every lock it holds",
                "parameters": [id_param()], "responses": { "200": ok("HeartbeatResponse"), "404": no_session } } },
            "/v1/sessions/{id}": {
                "delete": { "operationId": "closeSession", "summary": "L3 close session, releasing its locks",
                    "parameters": [id_param()], "responses": { "204": { "description": "closed" }, "404": no_session } },
                "get": { "operationId": "sessionStatus", "summary": "L5 session status",
                    "parameters": [id_param()], "responses": { "200": ok("SessionStatus"), "404": no_session } } },
            "/v1/locks/{key}/acquire": { "post": { "operationId": "acquire", "summary": "L4 acquire (idempotent per session: the holder gets the same grant, renewed from now; bounded server-side wait)",
                "parameters": [key_param()], "requestBody": body("AcquireRequest"),
                "responses": { "200": ok("LockGrant"), "400": bad, "404": no_session, "409": err("LOCK_CONTENDED"),
                    "413": err("PAYLOAD_TOO_LARGE; the connection (HTTP/1.1) or the stream (HTTP/2) is closed"), "429": err("CONTENTION_EXCEEDED"), "503": err("NOT_LEADER") } } },
            "/v1/locks/{key}/release": { "post": { "operationId": "release", "summary": "L6 release: compare-and-delete on (key, fencingToken)",
                "parameters": [key_param()], "requestBody": body("ReleaseRequest"),
                "responses": { "204": { "description": "released" }, "400": bad, "409": err("LOCK_LOST (benign)") } } },
            "/v1/locks/{key}": { "get": { "operationId": "lockState", "summary": "L7 advisory read",
                "parameters": [key_param()], "responses": { "200": ok("LockState"), "400": bad } } },
            "/v1/admin/locks/{key}/revoke": { "post": { "operationId": "revoke", "summary": "R1 force revoke (Authorization: Bearer <admin token>)",
                "parameters": [key_param()], "requestBody": body("RevokeRequest"),
                "responses": { "200": ok("LockOutcome"), "400": bad, "401": err("UNAUTHORIZED"), "403": err("FORBIDDEN") } } },
            "/v1/demo/ledger/{key}": {
                "post": { "operationId": "ledgerAppend", "summary": "Demo fenced resource: append if fencingToken ≥ highest seen",
                    "parameters": [key_param()], "requestBody": body("LedgerAppend"),
                    "responses": { "204": { "description": "accepted" }, "400": bad, "409": err("FENCED_OUT") } },
                "get": { "operationId": "ledgerRead", "summary": "Demo ledger entries in order",
                    "parameters": [key_param()], "responses": { "200": ok("LedgerEntries"), "400": bad } } },
            "/healthz": { "get": { "operationId": "healthz", "summary": "Liveness",
                "responses": { "200": { "description": "serving" } } } },
            "/metrics": { "get": { "operationId": "metrics", "summary": "Prometheus metrics",
                "responses": { "200": { "description": "text exposition format", "content": { "text/plain": { "schema": { "type": "string" } } } } } } },
            "/openapi.json": { "get": { "operationId": "openapi", "summary": "This document",
                "responses": { "200": { "description": "OpenAPI 3.0 document" } } } }
        },
        "components": {
            "schemas": schemas(),
            "securitySchemes": { "adminBearer": { "type": "http", "scheme": "bearer" } }
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
        let routed: BTreeSet<_> = crate::routes::table()
            .into_iter()
            .map(|r| (r.method.to_string(), r.path.to_string()))
            .collect();
        assert_eq!(described, routed);
    }
}
