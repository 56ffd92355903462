//! JS option objects → SDK settings. Values cross the boundary through [`super::wire`]
//! (serde-wasm-bindgen's rules, without serde); a wrong type, an unknown field or an out-of-range value becomes VALIDATION_FAILED with the
//! field's path in the JS spelling (`ttlMs`, `policy.maxAttempts`, `defaults.policy.waitMs`).

use std::time::Duration;

use lock_api::limits::{validate_hold, validate_ttl, DEFAULT_LOCK_TTL_MILLIS};
use lock_api::{HoldKind, LockMode};
use wasm_bindgen::{JsCast, JsValue};

use crate::config::ClientConfig;
use crate::error::LockError;
use crate::policy::{AcquirePolicy, PolicySettings};

use super::wire::FromJs;

/// `new LockClient({ baseUrl, token, defaults })`.
#[derive(Clone)]
pub struct ClientOptions {
    /// Where lock-server listens (absent for the test kit's clients, which take none).
    pub base_url: Option<String>,
    /// Bearer token of a client of the server's auth file.
    pub token: Option<String>,
    /// Per-client defaults.
    pub defaults: DefaultOptions,
}

/// `defaults` of [`ClientOptions`].
#[derive(Debug, Clone, Default)]
pub struct DefaultOptions {
    /// Lock TTL when `acquire` names none.
    pub ttl_ms: Option<u64>,
    /// Policy fields when `acquire` names none.
    pub policy: Option<PolicyOptions>,
    /// Timeout of each HTTP request.
    pub request_timeout_ms: Option<u64>,
}

/// `policy` of acquire options and defaults; absent fields inherit.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyOptions {
    /// Whole-acquire budget.
    pub total_budget_ms: Option<u64>,
    /// First backoff window.
    pub base_backoff_ms: Option<u64>,
    /// Largest backoff window.
    pub max_backoff_ms: Option<u64>,
    /// Attempt cap.
    pub max_attempts: Option<u32>,
    /// Server-side wait per attempt.
    pub wait_ms: Option<u64>,
}

/// `client.openSession({ ttlMs, owner })`.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// Session TTL; the server's default when absent.
    pub ttl_ms: Option<u64>,
    /// Label for logs and the dashboard.
    pub owner: Option<String>,
}

/// `session.acquire(key, { ttlMs, policy, mode, limit })` (the JS layer keeps `signal`
/// apart).
#[derive(Debug, Clone, Default)]
pub struct AcquireOptions {
    /// Lock TTL.
    pub ttl_ms: Option<u64>,
    /// Policy overrides.
    pub policy: Option<PolicyOptions>,
    /// The hold asked for, from `mode` and `limit` (exclusive when both are absent).
    pub hold: HoldKind,
}

/// `session.campaign(election, { value, ttlMs })` (the JS layer keeps `signal` apart).
#[derive(Debug, Clone, Default)]
pub struct CampaignOptions {
    /// The value to lead with.
    pub value: Option<String>,
    /// The hold's TTL.
    pub ttl_ms: Option<u64>,
}

impl CampaignOptions {
    /// Reads `session.campaign(election, options)`.
    pub fn parse(value: JsValue) -> Result<Self, LockError> {
        let Some(mut f) = Fields::new(value, "")? else {
            return Ok(Self::default());
        };
        let options = CampaignOptions {
            value: f.get("value")?,
            ttl_ms: f.get("ttlMs")?,
        };
        f.finish()?;
        Ok(options)
    }
}

/// Reads one options object field by field. Each field is read on its own, so a type error names exactly that field; fields the SDK
/// does not know are refused (a typo must not silently fall back to a default).
struct Fields {
    object: JsValue,
    path: String,
    known: Vec<&'static str>,
}

impl Fields {
    /// `None` for `undefined`/`null` (all defaults); an error for non-objects.
    fn new(value: JsValue, path: &str) -> Result<Option<Fields>, LockError> {
        if value.is_undefined() || value.is_null() {
            return Ok(None);
        }
        if !value.is_object() || js_sys::Array::is_array(&value) {
            return Err(invalid(path_or(path, "options"), "must be an object"));
        }
        Ok(Some(Fields {
            object: value,
            path: path.to_owned(),
            known: Vec::new(),
        }))
    }

    fn path(&self, name: &str) -> String {
        join(&self.path, name)
    }

    fn raw(&mut self, name: &'static str) -> Option<JsValue> {
        self.known.push(name);
        let value = js_sys::Reflect::get(&self.object, &JsValue::from_str(name)).ok()?;
        (!value.is_undefined() && !value.is_null()).then_some(value)
    }

    fn get<T: FromJs + Expected>(&mut self, name: &'static str) -> Result<Option<T>, LockError> {
        match self.raw(name) {
            None => Ok(None),
            // The message names what was expected, a fixed text per type.
            Some(value) => T::from_js(&value)
                .map(Some)
                .ok_or_else(|| invalid(self.path(name), T::EXPECTED)),
        }
    }

    fn nested(&mut self, name: &'static str) -> Result<Option<Fields>, LockError> {
        let path = self.path(name);
        match self.raw(name) {
            None => Ok(None),
            Some(value) => Fields::new(value, &path),
        }
    }

    /// Refuses any field not read above.
    fn finish(self) -> Result<(), LockError> {
        let object: &js_sys::Object = self.object.unchecked_ref();
        for key in js_sys::Object::keys(object).iter() {
            let key = key.as_string().unwrap_or_default();
            if !self.known.contains(&key.as_str()) {
                return Err(invalid(self.path(&key), "unknown option"));
            }
        }
        Ok(())
    }
}

fn invalid(field: String, message: &str) -> LockError {
    LockError::Validation {
        field,
        message: message.to_owned(),
    }
}

fn path_or(path: &str, fallback: &str) -> String {
    if path.is_empty() {
        fallback.to_owned()
    } else {
        path.to_owned()
    }
}

/// What an option of this type must be, for the VALIDATION_FAILED message.
trait Expected {
    const EXPECTED: &'static str;
}

impl Expected for u64 {
    const EXPECTED: &'static str = "must be a non-negative integer";
}

impl Expected for u32 {
    const EXPECTED: &'static str = "must be a non-negative integer below 2^32";
}

impl Expected for String {
    const EXPECTED: &'static str = "must be a string";
}

impl Expected for LockMode {
    const EXPECTED: &'static str = "must be \"shared\" or \"exclusive\"";
}

fn policy_options(fields: Option<Fields>) -> Result<Option<PolicyOptions>, LockError> {
    let Some(mut f) = fields else { return Ok(None) };
    let policy = PolicyOptions {
        total_budget_ms: f.get("totalBudgetMs")?,
        base_backoff_ms: f.get("baseBackoffMs")?,
        max_backoff_ms: f.get("maxBackoffMs")?,
        max_attempts: f.get("maxAttempts")?,
        wait_ms: f.get("waitMs")?,
    };
    f.finish()?;
    Ok(Some(policy))
}

impl ClientOptions {
    /// Reads `new LockClient(options)`; `baseUrl` is required.
    pub fn parse(value: JsValue) -> Result<Self, LockError> {
        let mut f =
            Fields::new(value, "")?.ok_or_else(|| invalid("baseUrl".into(), "is required"))?;
        let base_url = f
            .get::<String>("baseUrl")?
            .ok_or_else(|| invalid("baseUrl".into(), "is required"))?;
        let defaults = Self::defaults(&mut f)?;
        let token = f.get("token")?;
        f.finish()?;
        Ok(ClientOptions {
            base_url: Some(base_url),
            token,
            defaults,
        })
    }

    /// Reads the options of a test kit's client: `{ defaults }`, no `baseUrl`.
    #[cfg(feature = "testkit")]
    pub fn parse_kit(value: JsValue) -> Result<Self, LockError> {
        let defaults = match Fields::new(value, "")? {
            None => DefaultOptions::default(),
            Some(mut f) => {
                let defaults = Self::defaults(&mut f)?;
                f.finish()?;
                defaults
            }
        };
        Ok(ClientOptions {
            base_url: None,
            token: None,
            defaults,
        })
    }

    fn defaults(f: &mut Fields) -> Result<DefaultOptions, LockError> {
        Ok(match f.nested("defaults")? {
            None => DefaultOptions::default(),
            Some(mut d) => {
                let defaults = DefaultOptions {
                    ttl_ms: d.get("ttlMs")?,
                    policy: policy_options(d.nested("policy")?)?,
                    request_timeout_ms: d.get("requestTimeoutMs")?,
                };
                d.finish()?;
                defaults
            }
        })
    }
}

impl SessionOptions {
    /// Reads `client.openSession(options)`.
    pub fn parse(value: JsValue) -> Result<Self, LockError> {
        let Some(mut f) = Fields::new(value, "")? else {
            return Ok(Self::default());
        };
        let options = SessionOptions {
            ttl_ms: f.get("ttlMs")?,
            owner: f.get("owner")?,
        };
        f.finish()?;
        Ok(options)
    }
}

impl AcquireOptions {
    /// Reads `session.acquire(key, options)`.
    pub fn parse(value: JsValue) -> Result<Self, LockError> {
        let Some(mut f) = Fields::new(value, "")? else {
            return Ok(Self::default());
        };
        let ttl_ms = f.get("ttlMs")?;
        let policy = policy_options(f.nested("policy")?)?;
        let mode = f.get::<LockMode>("mode")?;
        let limit = f.get::<u32>("limit")?;
        f.finish()?;
        Ok(AcquireOptions {
            ttl_ms,
            policy,
            hold: hold(mode, limit)?,
        })
    }
}

/// The hold `mode` and `limit` ask for, by the shared rules (`validate_hold`): a limit of
/// 1…10,000, with `mode: "shared"` only. The error names `limit`, the JS spelling too.
pub fn hold(mode: Option<LockMode>, limit: Option<u32>) -> Result<HoldKind, LockError> {
    validate_hold(mode, limit).map_err(|message| invalid("limit".into(), &message))
}

/// A nesting mode (`handle.nest({ mode })`): absent is the handle's own.
pub fn nest_mode(value: JsValue) -> Result<Option<LockMode>, LockError> {
    let Some(mut f) = Fields::new(value, "")? else {
        return Ok(None);
    };
    let mode = f.get::<LockMode>("mode")?;
    f.finish()?;
    Ok(mode)
}

fn join(parent: &str, child: &str) -> String {
    match (parent, child) {
        ("" | ".", c) => c.to_owned(),
        (p, "" | ".") => p.to_owned(),
        (p, c) => format!("{p}.{c}"),
    }
}

/// Checks a TTL option in milliseconds against the contract's range.
pub fn ttl(value: Option<u64>, default: Duration, field: &str) -> Result<Duration, LockError> {
    match value {
        None => Ok(default),
        Some(ms) => validate_ttl(ms)
            .map(|()| Duration::from_millis(ms))
            .map_err(|message| LockError::Validation {
                field: field.to_owned(),
                message,
            }),
    }
}

/// Checks a lock TTL option: the contract's range and the renewal rule (see
/// [`crate::renewal`]): a TTL too short for a heartbeat to renew is refused, naming the
/// shortest that works.
pub fn lock_ttl(value: Option<u64>, default: Duration, field: &str) -> Result<Duration, LockError> {
    let Some(ms) = value else {
        return Ok(default);
    };
    let ttl = Duration::from_millis(ms);
    ClientConfig::default().check_lock_ttl(ttl, field)?;
    Ok(ttl)
}

/// The default lock TTL (`lock.default.ttl`).
pub fn default_lock_ttl() -> Duration {
    Duration::from_millis(DEFAULT_LOCK_TTL_MILLIS)
}

impl PolicyOptions {
    /// Overlays these fields on `base`, field by field.
    pub fn over(&self, base: PolicySettings) -> PolicySettings {
        let ms = |v: Option<u64>, d: Duration| v.map(Duration::from_millis).unwrap_or(d);
        PolicySettings {
            total_budget: ms(self.total_budget_ms, base.total_budget),
            base_backoff: ms(self.base_backoff_ms, base.base_backoff),
            max_backoff: ms(self.max_backoff_ms, base.max_backoff),
            max_attempts: self.max_attempts.unwrap_or(base.max_attempts),
            wait_millis: self.wait_ms.unwrap_or(base.wait_millis),
        }
    }
}

/// Validates `settings`; the core names its fields in wire spelling (`totalBudgetMillis`),
/// so a refusal is re-worded with the JS option path.
pub fn policy(settings: PolicySettings, root: &str) -> Result<AcquirePolicy, LockError> {
    AcquirePolicy::new(settings).map_err(|err| match err {
        LockError::Validation { field, message } => {
            let (js, message) = match field.as_str() {
                "totalBudgetMillis" => ("totalBudgetMs", "must be > 0".to_owned()),
                "maxAttempts" => ("maxAttempts", "must be >= 1".to_owned()),
                "baseBackoffMillis" => ("baseBackoffMs", "must be <= maxBackoffMs".to_owned()),
                "waitMillis" => (
                    "waitMs",
                    "must be 0..=30000 and below totalBudgetMs".to_owned(),
                ),
                other => (other, message),
            };
            LockError::Validation {
                field: join(root, js),
                message,
            }
        }
        other => other,
    })
}

/// A positive duration option (timeouts).
pub fn positive(value: Option<u64>, default: Duration, field: &str) -> Result<Duration, LockError> {
    match value {
        None => Ok(default),
        Some(0) => Err(LockError::Validation {
            field: field.to_owned(),
            message: "must be > 0".to_owned(),
        }),
        Some(ms) => Ok(Duration::from_millis(ms)),
    }
}

/// `baseUrl` must be an absolute http(s) URL: `fetch` would resolve a relative one against
/// the page, which is never what a lock client means.
pub fn base_url(url: &str) -> Result<&str, LockError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(url)
    } else {
        Err(LockError::Validation {
            field: "baseUrl".to_owned(),
            message: format!("must be an absolute http(s) URL, got \"{url}\""),
        })
    }
}
