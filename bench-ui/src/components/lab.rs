//! `FaultLab`: the fault lab's panel. A scenario picker (each scenario with its
//! explanation), the settings a user tunes, an admin-token field for the revokes (kept in
//! this component only: never in the URL, an export or a log), Run; then per side (fenced |
//! unfenced ledger) the counters, the contenders with a control per fault to inject by hand
//! while the run goes on, the ledger read back with its stale entries marked, the simulated
//! outcome beside the live one, and the lab timeline. The form round-trips through the
//! page's URL (`model::lab_form`): a link restores it. The run itself goes to the experiment
//! engine (`crate::worker`), as the dashboard's other jobs do, and so do the faults injected
//! by hand.

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::model::lab_form::LabForm;
use crate::model::lab_record::{FaultMark, LabRecord, LabSide};
use crate::model::lab_scenario::LabScenario;
use crate::model::lab_simulated::SimulatedOutcome;
use crate::plot::lab_timeline::lab_timeline_chart;
use crate::runner::browser::new_run_id;
use crate::runner::messages::{Command, Injection, Job, LabJob, Report, Start};
use crate::worker::client::{run_job, JobCommands};

use super::chart::SvgChart;
use super::config_form::number_field;
use super::export::download;

/// The lab's state on the page.
#[derive(Clone, Copy)]
struct Lab {
    form: RwSignal<LabForm>,
    admin_token: RwSignal<String>,
    record: RwSignal<Option<LabRecord>>,
    simulated: RwSignal<Option<SimulatedOutcome>>,
    running: RwSignal<bool>,
    error: RwSignal<Option<String>>,
    // Where the faults injected by hand go.
    commands: JobCommands,
}

/// The page's URL query (`location.search`).
fn page_query() -> String {
    web_sys::window()
        .and_then(|w| w.location().search().ok())
        .unwrap_or_default()
}

/// Puts the form into the page's URL, replacing the history entry (no reload).
fn write_query(form: &LabForm) {
    let url = format!("?{}", form.to_query());
    if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
        let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url));
    }
}

impl Lab {
    fn new() -> Self {
        let form = LabForm::from_query(&page_query()).unwrap_or_default();
        Lab {
            form: RwSignal::new(form),
            admin_token: RwSignal::new(String::new()),
            record: RwSignal::new(None),
            simulated: RwSignal::new(None),
            running: RwSignal::new(false),
            error: RwSignal::new(None),
            commands: JobCommands::default(),
        }
    }

    /// Runs the form against the server at `base` with the client `token`, and in the
    /// simulation.
    fn run(self, base: String, token: String) {
        let form = self.form.get_untracked();
        self.error.set(None);
        if let Err(e) = form.validate() {
            return self
                .error
                .set(Some(format!("Fix the lab's form first — {e}")));
        }
        let job = LabJob {
            form,
            admin_token: self.admin_token.get_untracked(),
        };
        let start = Start {
            job: Job::Lab(job),
            run_id: new_run_id(),
            base_url: base,
            token,
        };
        let commands = self.commands.next_job();
        self.record.set(None);
        self.simulated.set(None);
        self.running.set(true);
        spawn_local(async move {
            let adopt = move |report: Report| {
                if let Some(r) = report.lab {
                    self.record.set(Some(r));
                }
                if let Some(o) = report.lab_simulated {
                    self.simulated.set(Some(o));
                }
                if let Some(e) = report.error {
                    self.error.set(Some(e));
                }
            };
            run_job(start, commands, |_| {}, &adopt).await;
            self.running.set(false);
        });
    }

    /// Injects `kind` into a contender of the run in progress.
    fn inject(self, side: usize, contender: usize, kind: FaultMark) {
        self.commands.send(Command::Inject(Injection {
            side,
            contender,
            fault: kind,
        }));
    }
}

/// The fault lab.
#[component]
pub fn FaultLab(
    /// The server (the dashboard's server field).
    base: RwSignal<String>,
    /// The client token (the dashboard's token field).
    token: RwSignal<String>,
) -> impl IntoView {
    let lab = Lab::new();
    let form = lab.form;
    Effect::new(move |_| form.with(write_query));
    let on_run = move |_| lab.run(base.get_untracked(), token.get_untracked());
    let state = move || match (lab.running.get(), lab.record.with(Option::is_some)) {
        (true, _) => "running",
        (false, true) => "done",
        (false, false) => "idle",
    };
    let error = move || {
        lab.error.get().or_else(|| {
            lab.record
                .with(|r| r.as_ref().and_then(|r| r.error.clone()))
        })
    };
    let chart = Signal::derive(move || {
        lab.record.with(|r| match r {
            Some(r) => lab_timeline_chart(r),
            None => lab_timeline_chart(&LabRecord::new("", form.get())),
        })
    });
    view! {
        <section class="panel lab" data-testid="lab">
            <h2>"Fault lab"</h2>
            <p class="note">"Inject a fault into contender A of a live run and watch its stale \
                write: the same seeded run twice, its writes to the fenced ledger (refused: \
                fenced out) beside the unfenced one (accepted: corrupted)."</p>
            {scenario_picker(form)}
            <fieldset class="form" data-testid="lab-form">
                <legend>"Settings"</legend>
                {number_field("labLockTtl", "lock TTL", "ms", form, |f| f.lock_ttl_ms, |f, v| f.lock_ttl_ms = v)}
                {number_field("labSessionTtl", "session TTL", "ms", form, |f| f.session_ttl_ms, |f, v| f.session_ttl_ms = v)}
                {number_field("labFault", "fault length", "ms", form, |f| f.fault_ms, |f, v| f.fault_ms = v)}
                {number_field("labSeed", "seed", "", form, |f| f.seed, |f, v| f.seed = v)}
                <label class="field">
                    <input type="checkbox" data-testid="field-labHonours"
                        prop:checked=move || form.with(|f| f.honours_signal)
                        on:change=move |ev| form.update(|f| f.honours_signal = event_target_checked(&ev))/>
                    <span>"worker honours its lost signal (skips its write)"</span>
                </label>
                <label class="field wide">
                    <span>"admin token"</span>
                    <input type="password" data-testid="field-labAdminToken" autocomplete="off"
                        placeholder="for revokes (R1); kept in this page only"
                        prop:value=move || lab.admin_token.get()
                        on:input=move |ev| lab.admin_token.set(event_target_value(&ev))/>
                </label>
            </fieldset>
            <div class="buttons">
                <button data-testid="lab-run" disabled=move || lab.running.get() on:click=on_run>"Run the lab"</button>
                <span data-testid="lab-status" data-state=state>{state}</span>
                {export_buttons(lab.record)}
            </div>
            {move || error().map(|e| view! { <p class="error" data-testid="lab-error">{e}</p> })}
            <div class="lab-sides">
                {(0..2).map(|side| side_view(lab, side)).collect_view()}
                {simulated_view(lab.simulated)}
            </div>
            <SvgChart chart=chart test_id="lab-timeline"/>
        </section>
    }
}

/// The five scenarios as radio buttons, each with its explanation.
fn scenario_picker(form: RwSignal<LabForm>) -> impl IntoView {
    LabScenario::all()
        .into_iter()
        .map(|s| {
            view! {
                <label class="scenario">
                    <input type="radio" name="lab-scenario" value=s.slug()
                        data-testid=format!("lab-scenario-{}", s.slug())
                        prop:checked=move || form.with(|f| f.scenario == s)
                        on:change=move |_| form.set(LabForm { seed: form.get_untracked().seed, ..LabForm::of(s) })/>
                    <b>{s.title()}</b>
                    <span class="note">{s.explanation()}</span>
                </label>
            }
        })
        .collect_view()
}

/// One side's column: its counters, its contenders with their fault controls, its ledger.
fn side_view(lab: Lab, side: usize) -> impl IntoView {
    let shown = move || {
        lab.record
            .with(|r| r.as_ref().and_then(|r| r.sides.get(side).cloned()))
    };
    let label = if side == 0 { "fenced" } else { "unfenced" };
    let tally = move || shown().map(|s| s.tally()).unwrap_or_default();
    view! {
        <div class="lab-side" data-testid=format!("lab-side-{label}")>
            <h3>{label}" ledger"</h3>
            <div class="counters">
                {counter(label, "fenced-out", "fenced out", Signal::derive(move || tally().fenced_out))}
                {counter(label, "corrupted", "corrupted", Signal::derive(move || tally().corrupted))}
            </div>
            {(0..2).map(|c| contender_row(lab, side, c)).collect_view()}
            <ol class="ledger" data-testid=format!("lab-ledger-{label}")>
                {move || shown().map(ledger_items)}
            </ol>
        </div>
    }
}

/// A counter tile, red when non-zero; its value also in `data-value`.
fn counter(
    side: &'static str,
    id: &'static str,
    label: &'static str,
    value: Signal<u32>,
) -> impl IntoView {
    view! {
        <div class=move || ["counter", "counter alarm"][usize::from(value.get() > 0)]
            data-testid=format!("lab-{id}-{side}") data-value=value>
            <span class="value">{value}</span>
            <span class="label">{label}</span>
        </div>
    }
}

/// A contender's row: its name and token, and a control per fault.
fn contender_row(lab: Lab, side: usize, c: usize) -> impl IntoView {
    let name = if c == 0 { "A" } else { "B" };
    let token = move || {
        lab.record.with(|r| {
            r.as_ref()
                .and_then(|r| r.sides.get(side)?.contenders.get(c)?.token)
                .map(|t| format!(" (token {t})"))
        })
    };
    let idle = move || !lab.running.get();
    let button = move |kind: FaultMark, text: &'static str| {
        view! {
            <button data-testid=format!("lab-inject-{side}-{c}-{}", kind.as_str())
                disabled=idle on:click=move |_| lab.inject(side, c, kind)>{text}</button>
        }
    };
    view! {
        <div class="lab-row">
            <span>{name}{token}</span>
            {button(FaultMark::Pause, "pause")}
            {button(FaultMark::Partition, "partition")}
            {button(FaultMark::Crash, "crash")}
            {button(FaultMark::Revoke, "revoke")}
        </div>
    }
}

/// The ledger's entries as list items, the stale ones marked.
fn ledger_items(side: LabSide) -> impl IntoView {
    side.ledger
        .into_iter()
        .map(|l| {
            let stale = if l.stale { " — STALE" } else { "" };
            view! {
                <li class:stale=l.stale data-token=l.token data-stale=l.stale.to_string()>
                    {format!("token {}: {}{stale}", l.token, l.entry)}
                </li>
            }
        })
        .collect_view()
}

/// The simulation's outcome of the same scenario and settings.
fn simulated_view(simulated: RwSignal<Option<SimulatedOutcome>>) -> impl IntoView {
    view! {
        <div class="lab-side" data-testid="lab-simulated">
            <h3>"simulated"</h3>
            {move || simulated.get().map(|o| o.describe()).unwrap_or_else(|| "—".into())}
        </div>
    }
}

/// The lab's JSON and CSV downloads (never the tokens: the record holds none).
fn export_buttons(record: RwSignal<Option<LabRecord>>) -> impl IntoView {
    use crate::model::export::{lab_csv, lab_json};
    let none = move || record.with(Option::is_none);
    let save = move |ext: &'static str| {
        if let Some(r) = record.get_untracked() {
            let name = format!("bench-lab-{}.{ext}", r.run_id);
            match ext {
                "json" => download(&name, "application/json", &lab_json(&r)),
                _ => download(&name, "text/csv", &lab_csv(&r)),
            }
        }
    };
    view! {
        <div class="export">
            <button data-testid="export-lab-json" disabled=none on:click=move |_| save("json")>"lab JSON"</button>
            <button data-testid="export-lab-csv" disabled=none on:click=move |_| save("csv")>"lab CSV"</button>
        </div>
    }
}
