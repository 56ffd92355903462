//! `ConfigForm` and `SweepForm`: the experiment's knobs. Every field writes straight into
//! the config signal; validation happens when Run is pressed (so a half-typed number is not
//! an error yet).

use leptos::prelude::*;

use lock_lab::strategy::Strategy;

use crate::model::config::ExperimentConfig;
use crate::model::sweep::SweepConfig;
use lock_api::limits::SHARED_LIMIT_MAX;

/// A labelled number input bound to one field. Unparsable input leaves the field as it was.
pub(crate) fn number_field<T: Send + Sync + 'static>(
    name: &'static str,
    label: &'static str,
    unit: &'static str,
    signal: RwSignal<T>,
    get: fn(&T) -> u64,
    set: fn(&mut T, u64),
) -> impl IntoView {
    view! {
        <label class="field">
            <span>{label}</span>
            <input
                type="number"
                min="0"
                name=name
                data-testid=format!("field-{name}")
                prop:value=move || signal.with(get).to_string()
                on:input=move |ev| {
                    if let Ok(v) = event_target_value(&ev).trim().parse::<u64>() {
                        signal.update(|c| set(c, v));
                    }
                }
            />
            <span class="unit">{unit}</span>
        </label>
    }
}

fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// A form: a fieldset with its legend, named `test_id` for tests.
fn form(test_id: &'static str, legend: &'static str, fields: impl IntoView) -> impl IntoView {
    view! {
        <fieldset class="form" data-testid=test_id>
            <legend>{legend}</legend>
            {fields}
        </fieldset>
    }
}

/// The single-run form.
#[component]
pub fn ConfigForm(
    /// The configuration being edited.
    config: RwSignal<ExperimentConfig>,
) -> impl IntoView {
    let fields = view! {
        {workload_fields(config)}
        {policy_fields(config)}
        {number_field("seed", "seed", "", config, |c| c.seed, |c, v| c.seed = v)}
        {number_field("sampleMillis", "L7 sampling", "ms", config, |c| c.sample_millis, |c, v| c.sample_millis = v)}
        {strategy_field(config)}
        {mode_fields(config)}
    };
    form("config-form", "Experiment", fields)
}

/// The mix of modes: the share of readers, the semaphore's permits, and what they mean.
fn mode_fields(config: RwSignal<ExperimentConfig>) -> impl IntoView {
    let mix = move || {
        config.with(|c| {
            let kind = match c.semaphore_limit {
                Some(limit) => format!("a semaphore of {limit} permits per key"),
                None => "a read-write lock: any number of readers at once".to_string(),
            };
            match c.readers() {
                0 => "All contenders are writers (exclusive holds).".to_string(),
                readers => format!(
                    "{readers} of {} contenders are readers ({kind}); the rest are writers.",
                    c.sessions
                ),
            }
        })
    };
    view! {
        {number_field("readerPercent", "readers", "% (0–100)", config, |c| c.reader_percent.into(), |c, v| c.reader_percent = clamp_u32(v))}
        {optional_field("semaphoreLimit", "semaphore permits", "empty = none", config)}
        <p class="note" data-testid="modes-note">
            "Readers take shared holds: many at once, never beside a writer, and a reader that \
             asks after a waiting writer waits for it. Writers hold alone. With semaphore \
             permits, the shared holds are a counting semaphore: at most that many readers of a \
             key at once. Readers need full jitter or the server queue (the SDK's acquire). "
            <span data-testid="modes-mix">{mix}</span>
        </p>
    }
}

/// The semaphore's permits: a number, or empty for none. Anything else leaves the field as
/// it was; 0 is kept, and refused by the form's check, rather than read as "none".
fn optional_field(
    name: &'static str,
    label: &'static str,
    unit: &'static str,
    config: RwSignal<ExperimentConfig>,
) -> impl IntoView {
    view! {
        <label class="field">
            <span>{label}</span>
            <input
                type="number"
                min="1"
                max=SHARED_LIMIT_MAX
                name=name
                placeholder="none"
                data-testid=format!("field-{name}")
                prop:value=move || config.with(|c| c.semaphore_limit.map(|l| l.to_string()).unwrap_or_default())
                on:input=move |ev| {
                    let text = event_target_value(&ev);
                    let text = text.trim();
                    if text.is_empty() {
                        config.update(|c| c.semaphore_limit = None);
                    } else if let Ok(v) = text.parse::<u64>() {
                        config.update(|c| c.semaphore_limit = Some(clamp_u32(v)));
                    }
                }
            />
            <span class="unit">{unit}</span>
        </label>
    }
}

/// What the contenders do: how many, on how many keys, how often, how long.
fn workload_fields(config: RwSignal<ExperimentConfig>) -> impl IntoView {
    view! {
        {number_field("sessions", "sessions", "1–200", config, |c| c.sessions.into(), |c, v| c.sessions = clamp_u32(v))}
        {number_field("keys", "keys", "1–sessions", config, |c| c.keys.into(), |c, v| c.keys = clamp_u32(v))}
        {number_field("rounds", "acquisitions each", "", config, |c| c.rounds.into(), |c, v| c.rounds = clamp_u32(v))}
        {number_field("holdMillis", "hold", "ms", config, |c| c.hold_millis, |c, v| c.hold_millis = v)}
        {number_field("ttlMillis", "TTL", "ms", config, |c| c.ttl_millis, |c, v| c.ttl_millis = v)}
    }
}

/// The acquire policy: backoff window, budget, attempts, and the server queue's wait.
fn policy_fields(config: RwSignal<ExperimentConfig>) -> impl IntoView {
    view! {
        {number_field("baseMillis", "backoff base", "ms", config, |c| c.policy.base_millis, |c, v| c.policy.base_millis = v)}
        {number_field("capMillis", "backoff cap", "ms", config, |c| c.policy.cap_millis, |c, v| c.policy.cap_millis = v)}
        {number_field("budgetMillis", "budget", "ms", config, |c| c.policy.budget_millis, |c, v| c.policy.budget_millis = v)}
        {number_field("maxAttempts", "max attempts", "", config, |c| c.policy.max_attempts.into(), |c, v| c.policy.max_attempts = clamp_u32(v))}
        {number_field("waitMillis", "queue wait", "ms (server queue)", config, |c| c.policy.wait_millis, |c, v| c.policy.wait_millis = v)}
    }
}

/// The strategy under test.
fn strategy_field(config: RwSignal<ExperimentConfig>) -> impl IntoView {
    view! {
        <label class="field">
            <span>"strategy"</span>
            <select
                data-testid="field-strategy"
                on:change=move |ev| {
                    if let Some(s) = Strategy::from_id(&event_target_value(&ev)) {
                        config.update(|c| c.strategy = s);
                    }
                }
            >
                {Strategy::ALL
                    .into_iter()
                    .map(|s| {
                        view! {
                            <option value=s.id() selected=move || config.with(|c| c.strategy == s)>
                                {s.label()}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
        </label>
    }
}

/// The sweep form: the range of N, the hold time, the acquire policy (the same for every
/// strategy) and the seed (strategies: all five).
#[component]
pub fn SweepForm(
    /// The sweep being edited.
    sweep: RwSignal<SweepConfig>,
) -> impl IntoView {
    let fields = view! {
        {number_field("from", "N from", "", sweep, |c| c.from.into(), |c, v| c.from = clamp_u32(v))}
        {number_field("to", "N to", "≤ 200", sweep, |c| c.to.into(), |c, v| c.to = clamp_u32(v))}
        {number_field("step", "step", "", sweep, |c| c.step.into(), |c, v| c.step = clamp_u32(v))}
        {number_field("sweepHold", "hold", "ms", sweep, |c| c.hold_millis, |c, v| c.hold_millis = v)}
        {number_field("sweepBase", "backoff base", "ms", sweep, |c| c.policy.base_millis, |c, v| c.policy.base_millis = v)}
        {number_field("sweepCap", "backoff cap", "ms", sweep, |c| c.policy.cap_millis, |c, v| c.policy.cap_millis = v)}
        {number_field("sweepBudget", "budget", "ms", sweep, |c| c.policy.budget_millis, |c, v| c.policy.budget_millis = v)}
        {number_field("sweepSeed", "seed", "", sweep, |c| c.seed, |c, v| c.seed = v)}
    };
    form(
        "sweep-form",
        "Sweep (Brooker's experiment, live and simulated)",
        fields,
    )
}
