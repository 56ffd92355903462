//! Component tests in headless Chromium (wasm-bindgen-test): mount a component, interact,
//! read the DOM. Run by `scripts/test-ui.sh` (wasm-bindgen-test-runner + chromedriver).
#![cfg(target_arch = "wasm32")]

use std::time::Duration;

use bench_ui::app::App;
use bench_ui::components::chart::SvgChart;
use bench_ui::components::config_form::ConfigForm;
use bench_ui::components::counters::CountersPanel;
use bench_ui::components::plots::{
    ConcurrencyPanel, FairnessPanel, HistogramPanel, ModeWaitsPanel, TimelinePanel,
};
use bench_ui::components::protocol::ProtocolNote;
use bench_ui::model::config::ExperimentConfig;
use bench_ui::model::counters::Counters;
use bench_ui::model::histogram::JitterHistogram;
use bench_ui::model::protocol::Protocol;
use bench_ui::model::record::{Hold, Observed, RunRecord, Sample, Sleep};
use bench_ui::plot::builders::histogram_chart;
use leptos::mount::mount_to;
use leptos::prelude::*;
use leptos::task::tick;
use lock_api::{EventKind, LockMode, WatchEvent};
use lock_wasm::clock::Clock;
use lock_wasm::wasm::JsClock;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;
use web_sys::{HtmlElement, HtmlInputElement, HtmlSelectElement};

wasm_bindgen_test_configure!(run_in_browser);

/// A fresh container per test, so tests do not see each other's DOM.
fn container() -> HtmlElement {
    let document = document();
    let div: HtmlElement = document.create_element("div").unwrap().unchecked_into();
    document.body().unwrap().append_child(&div).unwrap();
    div
}

fn count(root: &HtmlElement, selector: &str) -> u32 {
    root.query_selector_all(selector).unwrap().length()
}

fn find(root: &HtmlElement, selector: &str) -> HtmlElement {
    root.query_selector(selector)
        .unwrap()
        .unwrap_or_else(|| panic!("no {selector}"))
        .unchecked_into()
}

#[wasm_bindgen_test]
async fn histogram_chart_draws_bars_axes_and_legend() {
    let root = container();
    let sleeps: Vec<Sleep> = (0..40)
        .map(|i| Sleep {
            session: 0,
            attempt: 1,
            delay_millis: i * 2,
            ceiling_millis: 80,
        })
        .collect();
    let chart = histogram_chart(&JitterHistogram::build(&sleeps, Some(1)));
    let handle = mount_to(
        root.clone(),
        move || view! { <SvgChart chart=chart.clone() test_id="h"/> },
    );
    tick().await;
    assert_eq!(count(&root, "svg[data-testid=h] rect.bar:not(.swatch)"), 12);
    assert_eq!(count(&root, "svg[data-testid=h] polyline.expect"), 1);
    assert!(count(&root, "svg[data-testid=h] .tick-label") > 4);
    let text = root.text_content().unwrap();
    assert!(text.contains("delay slept (ms)"), "{text}");
    assert!(text.contains("uniform expectation"), "{text}");
    drop(handle);
}

#[wasm_bindgen_test]
async fn protocol_note_warns_only_on_http1_above_six_contenders() {
    let root = container();
    let protocol = RwSignal::new(Protocol::Http1);
    let contenders = RwSignal::new(6u32);
    let handle = mount_to(
        root.clone(),
        move || view! { <ProtocolNote protocol=protocol contenders=contenders/> },
    );
    tick().await;
    assert_eq!(
        find(&root, "[data-testid=protocol] strong").inner_text(),
        "HTTP/1.1"
    );
    assert_eq!(
        count(&root, "[data-testid=protocol-warning]"),
        0,
        "6 fit in 6 connections"
    );
    contenders.set(7);
    tick().await;
    let warning = find(&root, "[data-testid=protocol-warning]").inner_text();
    assert!(warning.contains("7 contenders"), "{warning}");
    assert!(
        warning.contains("LOCK_TLS=self-signed scripts/run.sh"),
        "{warning}"
    );
    protocol.set(Protocol::Http2);
    tick().await;
    assert_eq!(
        find(&root, "[data-testid=protocol] strong").inner_text(),
        "HTTP/2"
    );
    assert_eq!(count(&root, "[data-testid=protocol-warning]"), 0);
    drop(handle);
}

#[wasm_bindgen_test]
async fn counters_panel_shows_values_and_raises_alarms() {
    let root = container();
    let counters = RwSignal::new(Counters {
        grants: 5,
        ..Default::default()
    });
    let handle = mount_to(
        root.clone(),
        move || view! { <CountersPanel counters=counters/> },
    );
    tick().await;
    assert_eq!(
        find(&root, "[data-testid=counter-grants] .value").inner_text(),
        "5"
    );
    assert_eq!(count(&root, ".counter.alarm"), 0);
    counters.update(|c| c.fenced_out = 2);
    tick().await;
    assert_eq!(
        find(&root, "[data-testid=counter-fenced-out-writes] .value").inner_text(),
        "2"
    );
    assert_eq!(count(&root, ".counter.alarm"), 1);
    drop(handle);
}

#[wasm_bindgen_test]
async fn config_form_writes_typed_values_into_the_signal() {
    let root = container();
    let config = RwSignal::new(ExperimentConfig::default());
    let handle = mount_to(root.clone(), move || view! { <ConfigForm config=config/> });
    tick().await;
    let input: HtmlInputElement = find(&root, "[data-testid=field-sessions]").unchecked_into();
    assert_eq!(input.value(), "20");
    input.set_value("7");
    input
        .dispatch_event(&web_sys::Event::new("input").unwrap())
        .unwrap();
    tick().await;
    assert_eq!(config.get_untracked().sessions, 7);
    // Garbage leaves the field's value alone.
    input.set_value("seven");
    input
        .dispatch_event(&web_sys::Event::new("input").unwrap())
        .unwrap();
    tick().await;
    assert_eq!(config.get_untracked().sessions, 7);
    drop(handle);
}

fn type_into(root: &HtmlElement, test_id: &str, value: &str) {
    let input: HtmlInputElement = find(root, &format!("[data-testid={test_id}]")).unchecked_into();
    input.set_value(value);
    input
        .dispatch_event(&web_sys::Event::new("input").unwrap())
        .unwrap();
}

#[wasm_bindgen_test]
async fn config_form_sets_the_share_of_readers_and_the_semaphore() {
    let root = container();
    let config = RwSignal::new(ExperimentConfig::default());
    let handle = mount_to(root.clone(), move || view! { <ConfigForm config=config/> });
    tick().await;
    let mix = || find(&root, "[data-testid=modes-mix]").inner_text();
    assert!(mix().contains("All contenders are writers"), "{}", mix());
    type_into(&root, "field-readerPercent", "80");
    type_into(&root, "field-semaphoreLimit", "3");
    tick().await;
    let c = config.get_untracked();
    assert_eq!((c.reader_percent, c.semaphore_limit), (80, Some(3)));
    assert!(
        mix().contains("16 of 20 contenders are readers (a semaphore of 3 permits per key)"),
        "{}",
        mix()
    );
    // Emptied, the field means no limit: the readers of a read-write lock.
    type_into(&root, "field-semaphoreLimit", "");
    tick().await;
    assert_eq!(config.get_untracked().semaphore_limit, None);
    assert!(mix().contains("read-write lock"), "{}", mix());
    drop(handle);
}

/// Clicks Run against a port where nothing listens and waits for the error to show in
/// place (polling on real time with a generous bound; the request fails at once). Without a
/// worker script beside the test page, this is also the fallback to the page's thread.
#[wasm_bindgen_test]
async fn a_dead_server_is_reported_in_place_without_a_panic() {
    let root = container();
    let handle = mount_to(
        root.clone(),
        || view! { <App base_url="http://127.0.0.1:9"/> },
    );
    tick().await;
    assert_eq!(count(&root, "[data-testid=error]"), 0);
    find(&root, "[data-testid=run]").click();
    let mut shown = String::new();
    for _ in 0..200 {
        JsClock.sleep(Duration::from_millis(50)).await;
        if count(&root, "[data-testid=error]") > 0
            && find(&root, "[data-testid=status]")
                .get_attribute("data-state")
                .as_deref()
                == Some("idle")
        {
            shown = find(&root, "[data-testid=error]").inner_text();
            break;
        }
    }
    assert!(
        shown.contains("cannot reach the lock server"),
        "error shown: {shown:?}"
    );
    assert_eq!(
        find(&root, "[data-testid=counter-errors] .value").inner_text(),
        "40",
        "every planned acquisition (20 sessions × 2 rounds) failed"
    );
    // The test page has no www/worker.js beside it, so no experiment worker starts and the
    // run falls back to the page's own thread, with the same outcome.
    assert_eq!(
        find(&root, "[data-testid=status]")
            .get_attribute("data-host")
            .as_deref(),
        Some("page")
    );
    drop(handle);
}

#[wasm_bindgen_test]
async fn an_invalid_form_is_refused_before_any_request() {
    let root = container();
    let handle = mount_to(
        root.clone(),
        || view! { <App base_url="http://127.0.0.1:9"/> },
    );
    tick().await;
    let input: HtmlInputElement = find(&root, "[data-testid=field-sessions]").unchecked_into();
    input.set_value("500");
    input
        .dispatch_event(&web_sys::Event::new("input").unwrap())
        .unwrap();
    tick().await;
    find(&root, "[data-testid=run]").click();
    tick().await;
    let error = find(&root, "[data-testid=error]").inner_text();
    assert!(error.contains("sessions"), "{error}");
    assert_eq!(
        find(&root, "[data-testid=status]")
            .get_attribute("data-state")
            .as_deref(),
        Some("idle")
    );
    drop(handle);
}

fn sleep(attempt: u32, delay: u64, ceiling: u64) -> Sleep {
    Sleep {
        session: 0,
        attempt,
        delay_millis: delay,
        ceiling_millis: ceiling,
    }
}

#[wasm_bindgen_test]
async fn histogram_panel_filters_by_the_chosen_attempt() {
    let root = container();
    let record = RwSignal::new(Some(RunRecord {
        sleeps: vec![sleep(0, 5, 10), sleep(0, 7, 10), sleep(2, 30, 40)],
        ..Default::default()
    }));
    let handle = mount_to(
        root.clone(),
        move || view! { <HistogramPanel record=record/> },
    );
    tick().await;
    // SVG elements have no innerText: read textContent.
    let title = || {
        find(&root, "svg[data-testid=histogram] .title")
            .text_content()
            .unwrap_or_default()
    };
    assert!(title().contains("all attempts, n = 3"), "{}", title());
    // The selector offers "all" and the attempts present.
    assert_eq!(count(&root, "[data-testid=attempt-select] option"), 3);
    let select: HtmlSelectElement = find(&root, "[data-testid=attempt-select]").unchecked_into();
    select.set_value("2");
    select
        .dispatch_event(&web_sys::Event::new("change").unwrap())
        .unwrap();
    tick().await;
    assert!(title().contains("attempt 2, n = 1"), "{}", title());
    drop(handle);
}

#[wasm_bindgen_test]
async fn timeline_panel_draws_an_overlap_in_red() {
    let root = container();
    let sample = |at, holder: &str, token| Sample {
        at,
        key: "k".into(),
        mode: Some(LockMode::Exclusive),
        holders: vec![(holder.into(), token)],
        limit: None,
        waiter_count: 0,
    };
    let mut clean = RunRecord::default();
    clean.config.sessions = 2;
    // Lanes come from the client's own grants: token 1 went to contender 0, 2 to 1.
    let hold = |session, fencing_token| Hold {
        session,
        key: "k".into(),
        fencing_token,
        mode: LockMode::Exclusive,
        limit: None,
        attempts: 1,
        asked_at: 0.0,
        granted_at: 0.0,
        released_at: None,
        ledger_accepted: true,
    };
    clean.holds = vec![hold(0, 1), hold(1, 2)];
    clean.samples = vec![sample(10.0, "a", 1), sample(20.0, "b", 2)];
    let record = RwSignal::new(Some(clean.clone()));
    let handle = mount_to(
        root.clone(),
        move || view! { <TimelinePanel record=record/> },
    );
    tick().await;
    let overlaps = || {
        find(&root, "[data-testid=timeline-verdict]")
            .get_attribute("data-overlaps")
            .unwrap_or_default()
    };
    assert_eq!(
        count(&root, "svg[data-testid=timeline] rect.hold:not(.swatch)"),
        2
    );
    assert_eq!(overlaps(), "0");
    assert_eq!(
        count(&root, "svg[data-testid=timeline] rect.overlap:not(.swatch)"),
        0
    );
    // Token 1 seen again after token 2: two holders at once, drawn in red.
    clean.samples.push(sample(30.0, "a", 1));
    record.set(Some(clean));
    tick().await;
    assert_eq!(overlaps(), "1");
    assert_eq!(
        count(&root, "svg[data-testid=timeline] rect.overlap:not(.swatch)"),
        1
    );
    drop(handle);
}

#[wasm_bindgen_test]
async fn the_timeline_names_the_stream_as_its_source_and_counts_what_sampling_missed() {
    let root = container();
    let t0 = 1_700_000_000_000;
    let event = |at: f64, kind: EventKind, token: u64| Observed {
        at,
        event: WatchEvent {
            id: format!("{at}"),
            kind,
            key: "k".into(),
            at_millis: t0 + at as u64,
            fencing_token: Some(token),
            holder_id: Some(format!("h{token}")),
            owner: None,
            mode: Some(LockMode::Exclusive),
            limit: None,
            value: None,
            waiter_count: 0,
            state: None,
        },
    };
    let mut run = RunRecord::default();
    run.config.sessions = 1;
    run.holds = vec![Hold {
        session: 0,
        key: "k".into(),
        fencing_token: 1,
        mode: LockMode::Exclusive,
        limit: None,
        attempts: 1,
        asked_at: 0.0,
        granted_at: 11.0,
        released_at: Some(20.0),
        ledger_accepted: true,
    }];
    // The stream saw holds 1 and 2; the one L7 sample came between them and saw neither.
    run.events = vec![
        event(10.0, EventKind::Granted, 1),
        event(20.0, EventKind::Released, 1),
        event(22.0, EventKind::Granted, 2),
        event(25.0, EventKind::Released, 2),
    ];
    run.samples = vec![Sample {
        at: 21.0,
        key: "k".into(),
        mode: None,
        holders: vec![],
        limit: None,
        waiter_count: 0,
    }];
    run.counters.missed_by_sampling = Some(2);
    let record = RwSignal::new(Some(run.clone()));
    let counters = RwSignal::new(run.counters);
    let handle = mount_to(root.clone(), move || {
        view! { <TimelinePanel record=record/> <CountersPanel counters=counters/> }
    });
    tick().await;
    let verdict = find(&root, "[data-testid=timeline-verdict]");
    let data = |name: &str| verdict.get_attribute(name).unwrap_or_default();
    assert_eq!(data("data-source"), "stream");
    assert_eq!(data("data-holds"), "2");
    assert_eq!(data("data-missed-by-sampling"), "2");
    assert_eq!(data("data-grants-unseen"), "0");
    assert_eq!(data("data-overlaps"), "0");
    assert!(verdict.inner_text().contains("L8 event stream"));
    assert_eq!(
        find(&root, "[data-testid=counter-missed-by-sampling] .value").inner_text(),
        "2"
    );
    // Without the stream (an older server's 404), the samples draw it and say why.
    run.stream_error = Some("no L8 here (404)".into());
    record.set(Some(run));
    tick().await;
    let verdict = find(&root, "[data-testid=timeline-verdict]");
    assert_eq!(verdict.get_attribute("data-source").unwrap(), "samples");
    assert_eq!(verdict.get_attribute("data-missed-by-sampling"), None);
    assert!(verdict.inner_text().contains("no L8 here (404)"));
    drop(handle);
}

/// A run of one writer (token 1) then two readers at once (tokens 2 and 3) under a limit of
/// 2, as L7 sampled it.
fn mixed_run(limit: u32) -> RunRecord {
    let hold = |session: u32, mode, asked, granted| Hold {
        session,
        key: "k".into(),
        fencing_token: u64::from(session) + 1,
        mode,
        limit: (mode == LockMode::Shared).then_some(limit),
        attempts: 1,
        asked_at: asked,
        granted_at: granted,
        released_at: None,
        ledger_accepted: true,
    };
    let sample = |at, mode, holders: &[u64]| Sample {
        at,
        key: "k".into(),
        mode: Some(mode),
        holders: holders.iter().map(|t| (format!("h{t}"), *t)).collect(),
        limit: (mode == LockMode::Shared).then_some(limit),
        waiter_count: 0,
    };
    let mut run = RunRecord::default();
    run.config.sessions = 3;
    run.config.reader_percent = 67;
    run.config.semaphore_limit = Some(limit);
    run.holds = vec![
        hold(0, LockMode::Exclusive, 0.0, 0.0),
        hold(1, LockMode::Shared, 0.0, 30.0),
        hold(2, LockMode::Shared, 0.0, 30.0),
    ];
    run.samples = vec![
        sample(10.0, LockMode::Exclusive, &[1]),
        sample(40.0, LockMode::Shared, &[2, 3]),
        sample(50.0, LockMode::Shared, &[2, 3]),
    ];
    run
}

#[wasm_bindgen_test]
async fn shared_holds_stack_in_their_colour_and_only_a_breach_is_red() {
    let root = container();
    let record = RwSignal::new(Some(mixed_run(2)));
    let handle = mount_to(
        root.clone(),
        move || view! { <TimelinePanel record=record/> <ConcurrencyPanel record=record/> },
    );
    tick().await;
    let verdict = find(&root, "[data-testid=timeline-verdict]");
    let attribute = |name: &str| verdict.get_attribute(name).unwrap_or_default();
    assert_eq!(
        count(
            &root,
            "svg[data-testid=timeline] rect.hold.shared:not(.swatch)"
        ),
        2
    );
    assert_eq!(
        count(
            &root,
            "svg[data-testid=timeline] rect.hold:not(.shared):not(.swatch)"
        ),
        1
    );
    assert_eq!(
        attribute("data-overlaps"),
        "0",
        "two readers within 2 permits"
    );
    assert_eq!(attribute("data-peak-shared"), "2");
    assert_eq!(
        count(&root, "svg[data-testid=concurrency] polyline.conc-limit"),
        1
    );
    let concurrency = find(&root, "[data-testid=concurrency-verdict]");
    assert_eq!(
        concurrency.get_attribute("data-peak-shared").as_deref(),
        Some("2")
    );
    // The same readers under a limit of 1: one hold too many, in red.
    record.set(Some(mixed_run(1)));
    tick().await;
    assert_eq!(attribute("data-overlaps"), "1");
    assert_eq!(
        count(&root, "svg[data-testid=timeline] rect.overlap:not(.swatch)"),
        1
    );
    drop(handle);
}

#[wasm_bindgen_test]
async fn mode_waits_panel_puts_the_writers_beside_the_readers() {
    let root = container();
    let record = RwSignal::new(Some(mixed_run(2)));
    let handle = mount_to(
        root.clone(),
        move || view! { <ModeWaitsPanel record=record/> },
    );
    tick().await;
    let panel = find(&root, "[data-testid=mode-waits]");
    let attribute = |name: &str| panel.get_attribute(name).unwrap_or_default();
    assert_eq!(
        (attribute("data-writers"), attribute("data-readers")),
        ("1".into(), "2".into())
    );
    assert_eq!(attribute("data-reader-p50"), "30.0");
    assert_eq!(attribute("data-writer-p50"), "0.0");
    let text = panel.inner_text();
    assert!(text.contains("readers (shared): 2 grants"), "{text}");
    assert!(
        count(
            &root,
            "svg[data-testid=mode-waits-chart] rect.wait-readers:not(.swatch)"
        ) > 0
    );
    drop(handle);
}

#[wasm_bindgen_test]
async fn fairness_panel_shows_utilisation_waits_and_overtakes() {
    let root = container();
    let hold = |session: u32, asked, granted, released| Hold {
        session,
        key: "k".into(),
        fencing_token: u64::from(session) + 1,
        mode: LockMode::Exclusive,
        limit: None,
        attempts: 1,
        asked_at: asked,
        granted_at: granted,
        released_at: Some(released),
        ledger_accepted: true,
    };
    // Contender 1 asked 100 ms after contender 2 and was served first: one overtake.
    let run = RunRecord {
        holds: vec![
            hold(0, 0.0, 0.0, 40.0),
            hold(1, 110.0, 120.0, 160.0),
            hold(2, 10.0, 160.0, 200.0),
        ],
        completed_millis: Some(200.0),
        ..RunRecord::default()
    };
    let record = RwSignal::new(Some(run));
    let handle = mount_to(
        root.clone(),
        move || view! { <FairnessPanel record=record/> },
    );
    tick().await;
    let panel = find(&root, "[data-testid=fairness]");
    let attribute = |name: &str| panel.get_attribute(name).unwrap_or_default();
    // Held 0–40 and 120–200: 120 of 200 ms.
    assert_eq!(attribute("data-utilisation-client"), "0.6000");
    assert_eq!(attribute("data-overtakes"), "1");
    assert_eq!(
        count(&root, "svg[data-testid=waits] rect.wait-max:not(.swatch)"),
        3
    );
    assert!(
        panel.inner_text().contains("1 grants overtook"),
        "{}",
        panel.inner_text()
    );
    drop(handle);
}

/// Sweep runs the same sweep in the page's simulation beside the live server: with nothing
/// listening, the live sweep fails, and the simulated one still draws every strategy.
#[wasm_bindgen_test]
async fn a_sweep_runs_in_the_simulation_beside_the_live_server() {
    let root = container();
    let handle = mount_to(
        root.clone(),
        || view! { <App base_url="http://127.0.0.1:9"/> },
    );
    tick().await;
    for (field, value) in [("from", "4"), ("to", "8"), ("step", "4")] {
        let input: HtmlInputElement =
            find(&root, &format!("[data-testid=field-{field}]")).unchecked_into();
        input.set_value(value);
        input
            .dispatch_event(&web_sys::Event::new("input").unwrap())
            .unwrap();
    }
    tick().await;
    find(&root, "[data-testid=sweep]").click();
    for _ in 0..600 {
        JsClock.sleep(Duration::from_millis(50)).await;
        if find(&root, "[data-testid=status]")
            .get_attribute("data-state")
            .as_deref()
            == Some("idle")
        {
            break;
        }
    }
    for class in ["s-full", "s-queue", "s-none"] {
        assert_eq!(
            count(
                &root,
                &format!("svg[data-testid=sim-calls-per-grant] polyline.{class}")
            ),
            1,
            "simulated {class}"
        );
    }
    assert_eq!(
        count(&root, "svg[data-testid=sweep-calls-per-grant] polyline"),
        0,
        "nothing reached the live server"
    );
    assert!(count(&root, "[data-testid=error]") > 0);
    drop(handle);
}

#[wasm_bindgen_test]
async fn the_fault_lab_explains_each_scenario_and_keeps_its_form_in_the_url() {
    use bench_ui::components::lab::FaultLab;
    use bench_ui::model::lab_form::LabForm;
    use bench_ui::model::lab_scenario::LabScenario;
    let root = container();
    let base = RwSignal::new(String::new());
    let token = RwSignal::new(String::new());
    let handle = mount_to(
        root.clone(),
        move || view! { <FaultLab base=base token=token/> },
    );
    tick().await;
    assert_eq!(count(&root, "input[type=radio][name=lab-scenario]"), 5);
    let text = root.inner_text();
    for scenario in LabScenario::all() {
        assert!(text.contains(scenario.explanation()), "{scenario:?}");
    }
    // Picking a scenario loads its settings.
    find(&root, "[data-testid=lab-scenario-short-pause]").click();
    tick().await;
    let fault: HtmlInputElement = find(&root, "[data-testid=field-labFault]").unchecked_into();
    let short = LabForm::of(LabScenario::ShortPause);
    assert_eq!(fault.value(), short.fault_ms.to_string());
    // The form, edited, is the page's URL query; the admin token never is.
    type_into(&root, "field-labSeed", "4242");
    type_into(&root, "field-labAdminToken", "admin-secret");
    tick().await;
    let search = web_sys::window().unwrap().location().search().unwrap();
    let restored = LabForm::from_query(&search).expect("the lab's form in the URL");
    assert_eq!(
        restored,
        LabForm {
            seed: 4242,
            ..short
        }
    );
    assert!(!search.contains("admin-secret"), "{search}");
    drop(handle);
}
