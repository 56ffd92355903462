//! The fault lab's form: a scenario and the settings a user tunes, their limits, and their
//! round trip through the page's URL (`?lab=gc-pause&lockTtl=1000&…`), so a link restores
//! the form. Tokens are never part of it: the form holds none.

use lock_api::limits::TTL_MILLIS_MAX;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::config::{check, shortest_ttl_millis, ConfigError};
use super::lab_scenario::{LabScenario, LabSettings};

/// Longest fault the form accepts, ms (ASSUMPTION: a minute; the lab is watched live).
pub const FAULT_MILLIS_MAX: u64 = 60_000;

/// The lab's form: which scenario, with what settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabForm {
    /// The scenario, by its slug in JSON.
    #[serde(with = "slug")]
    pub scenario: LabScenario,
    /// Lock TTL of every grant, ms.
    pub lock_ttl_ms: u64,
    /// Session TTL of both contenders, ms.
    pub session_ttl_ms: u64,
    /// How long the fault lasts (pause, partition) or, for a revoke, how long A goes on
    /// working after it, ms.
    pub fault_ms: u64,
    /// Whether the worker skips its write once its handle is lost.
    pub honours_signal: bool,
    /// Seeds both runs' random draws (and the simulation).
    pub seed: u64,
}

impl Default for LabForm {
    /// The first scenario, gc-pause, with its own defaults.
    fn default() -> Self {
        LabForm::of(LabScenario::GcPause)
    }
}

/// The URL's parameter names, in the order they are written.
const SCENARIO: &str = "lab";
const LOCK_TTL: &str = "lockTtl";
const SESSION_TTL: &str = "sessionTtl";
const FAULT: &str = "fault";
const HONOURS: &str = "honours";
const SEED: &str = "seed";

impl LabForm {
    /// `scenario` with its default settings.
    pub fn of(scenario: LabScenario) -> Self {
        let s = scenario.default_settings();
        LabForm {
            scenario,
            lock_ttl_ms: s.lock_ttl_ms,
            session_ttl_ms: s.session_ttl_ms,
            fault_ms: s.fault_ms,
            honours_signal: s.honours_signal,
            seed: s.seed,
        }
    }

    /// The settings as the simulation and the live run take them.
    pub fn settings(&self) -> LabSettings {
        LabSettings {
            lock_ttl_ms: self.lock_ttl_ms,
            session_ttl_ms: self.session_ttl_ms,
            fault_ms: self.fault_ms,
            honours_signal: self.honours_signal,
            seed: self.seed,
        }
    }

    /// Checks every field; the first problem found, named as the URL names it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let shortest = shortest_ttl_millis();
        check(LOCK_TTL, self.lock_ttl_ms, shortest, TTL_MILLIS_MAX)?;
        check(SESSION_TTL, self.session_ttl_ms, shortest, TTL_MILLIS_MAX)?;
        check(FAULT, self.fault_ms, 1, FAULT_MILLIS_MAX)
    }

    /// The form as a URL query (without the `?`).
    pub fn to_query(&self) -> String {
        format!(
            "{SCENARIO}={}&{LOCK_TTL}={}&{SESSION_TTL}={}&{FAULT}={}&{HONOURS}={}&{SEED}={}",
            self.scenario.slug(),
            self.lock_ttl_ms,
            self.session_ttl_ms,
            self.fault_ms,
            u8::from(self.honours_signal),
            self.seed
        )
    }

    /// The form a URL query (with or without its `?`) stands for; `None` when it names no
    /// known scenario. A setting it lacks, or cannot read, is the scenario's default;
    /// parameters of others are ignored.
    pub fn from_query(query: &str) -> Option<Self> {
        let pairs: Vec<(&str, &str)> = query
            .trim_start_matches(['?', '#'])
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .collect();
        let get = |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let scenario = LabScenario::from_slug(get(SCENARIO)?)?;
        let mut form = LabForm::of(scenario);
        let number = |name: &str, default: u64| {
            get(name)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(default)
        };
        form.lock_ttl_ms = number(LOCK_TTL, form.lock_ttl_ms);
        form.session_ttl_ms = number(SESSION_TTL, form.session_ttl_ms);
        form.fault_ms = number(FAULT, form.fault_ms);
        form.seed = number(SEED, form.seed);
        form.honours_signal = match get(HONOURS) {
            Some("1") => true,
            Some("0") => false,
            _ => form.honours_signal,
        };
        Some(form)
    }
}

/// A scenario in JSON: its slug.
mod slug {
    use super::*;

    pub fn serialize<S: Serializer>(s: &LabScenario, out: S) -> Result<S::Ok, S::Error> {
        out.serialize_str(s.slug())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<LabScenario, D::Error> {
        let text = String::deserialize(input)?;
        LabScenario::from_slug(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown scenario {text:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_and_its_settings_round_trip_through_the_url() {
        for scenario in LabScenario::all() {
            let form = LabForm {
                lock_ttl_ms: 1_234,
                session_ttl_ms: 5_678,
                fault_ms: 910,
                honours_signal: true,
                seed: 77,
                ..LabForm::of(scenario)
            };
            let query = form.to_query();
            assert_eq!(LabForm::from_query(&query), Some(form.clone()), "{query}");
            assert_eq!(LabForm::from_query(&format!("?{query}")), Some(form));
        }
    }

    #[test]
    fn a_url_without_a_known_scenario_restores_nothing_and_missing_settings_are_defaults() {
        assert_eq!(LabForm::from_query(""), None);
        assert_eq!(LabForm::from_query("?lockTtl=900"), None);
        assert_eq!(LabForm::from_query("?lab=meteor&lockTtl=900"), None);
        let form = LabForm::from_query("?other=1&lab=short-pause&fault=abc&seed=9").unwrap();
        assert_eq!(
            form,
            LabForm {
                seed: 9,
                ..LabForm::of(LabScenario::ShortPause)
            }
        );
    }

    #[test]
    fn the_url_holds_settings_only() {
        let query = LabForm::default().to_query();
        for name in query.split('&').map(|p| p.split('=').next().unwrap()) {
            assert!(
                [SCENARIO, LOCK_TTL, SESSION_TTL, FAULT, HONOURS, SEED].contains(&name),
                "{name} in {query}"
            );
        }
    }

    #[test]
    fn defaults_are_valid_and_limits_are_named() {
        for scenario in LabScenario::all() {
            assert_eq!(LabForm::of(scenario).validate(), Ok(()), "{scenario:?}");
        }
        let mut form = LabForm {
            lock_ttl_ms: 50,
            ..LabForm::default()
        };
        assert_eq!(form.validate().unwrap_err().field, LOCK_TTL);
        form.lock_ttl_ms = 1_000;
        form.fault_ms = 0;
        assert_eq!(form.validate().unwrap_err().field, FAULT);
    }

    #[test]
    fn the_form_in_json_names_its_scenario_by_slug() {
        let json = serde_json::to_value(LabForm::default()).unwrap();
        assert_eq!(json["scenario"], "gc-pause");
        let back: LabForm = serde_json::from_value(json).unwrap();
        assert_eq!(back, LabForm::default());
    }
}
