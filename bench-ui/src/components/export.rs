//! `ExportButtons`: downloads of the last run and sweep as JSON and CSV, made in the browser
//! from a `Blob` (nothing is uploaded anywhere).

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::model::export::{run_csv, run_json, sweep_csv, sweep_json};
use crate::model::record::RunRecord;
use crate::model::sweep::SweepResult;

/// Offers `contents` as a file download. Failures are logged, never panicked on.
pub(crate) fn download(name: &str, mime: &str, contents: &str) {
    let result = (|| -> Result<(), wasm_bindgen::JsValue> {
        let parts = js_sys::Array::of1(&contents.into());
        let options = web_sys::BlobPropertyBag::new();
        options.set_type(mime);
        let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)?;
        let url = web_sys::Url::create_object_url_with_blob(&blob)?;
        let document = web_sys::window()
            .and_then(|w| w.document())
            .ok_or("no document")?;
        let anchor: web_sys::HtmlAnchorElement = document.create_element("a")?.unchecked_into();
        anchor.set_href(&url);
        anchor.set_download(name);
        anchor.click();
        web_sys::Url::revoke_object_url(&url)?;
        Ok(())
    })();
    if let Err(err) = result {
        web_sys::console::error_2(&"bench-ui: export failed".into(), &err);
    }
}

/// Export buttons; disabled while there is nothing to export.
#[component]
pub fn ExportButtons(
    /// The last run.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
    /// The last sweep.
    #[prop(into)]
    sweep: Signal<SweepResult>,
) -> impl IntoView {
    let no_run = move || record.with(Option::is_none);
    let no_sweep = move || sweep.with(|s| s.points.is_empty());
    let run_name = move |ext: &str| {
        record.with(|r| {
            format!(
                "bench-run-{}.{ext}",
                r.as_ref().map(|r| r.run_id.as_str()).unwrap_or("none")
            )
        })
    };
    view! {
        <div class="export">
            <button data-testid="export-run-json" disabled=no_run on:click=move |_| {
                if let Some(r) = record.get_untracked() { download(&run_name("json"), "application/json", &run_json(&r)) }
            }>"run JSON"</button>
            <button data-testid="export-run-csv" disabled=no_run on:click=move |_| {
                if let Some(r) = record.get_untracked() { download(&run_name("csv"), "text/csv", &run_csv(&r)) }
            }>"run CSV"</button>
            <button data-testid="export-sweep-json" disabled=no_sweep on:click=move |_| {
                download("bench-sweep.json", "application/json", &sweep_json(&sweep.get_untracked()))
            }>"sweep JSON"</button>
            <button data-testid="export-sweep-csv" disabled=no_sweep on:click=move |_| {
                download("bench-sweep.csv", "text/csv", &sweep_csv(&sweep.get_untracked()))
            }>"sweep CSV"</button>
        </div>
    }
}
