//! `ProtocolNote`: the HTTP version the dashboard's requests travel over (Resource Timing's
//! `nextHopProtocol`), and on HTTP/1.1 with more than 6 contenders a warning that the
//! figures are distorted and how to run over HTTP/2.

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Performance, PerformanceResourceTiming};

use crate::model::protocol::{distortion_warning, Protocol};

fn performance() -> Option<Performance> {
    web_sys::window()?.performance()
}

/// The protocol of the latest API request (`/v1/…`) the browser timed since the last call,
/// if any. Clears the browser's resource-timing buffer: it holds 250 entries and then drops
/// new ones, so without the clearing a long run would only ever show its first requests.
pub fn api_protocol() -> Option<Protocol> {
    let performance = performance()?;
    let latest = performance
        .get_entries_by_type("resource")
        .iter()
        .rev()
        .filter_map(|entry| entry.dyn_into::<PerformanceResourceTiming>().ok())
        .find(|entry| entry.name().contains("/v1/"))
        .map(|entry| Protocol::from_next_hop(&entry.next_hop_protocol()));
    performance.clear_resource_timings();
    latest
}

/// The protocol the page itself was loaded over (the server's, when it served the page).
pub fn page_protocol() -> Protocol {
    performance()
        .and_then(|p| p.get_entries_by_type("navigation").iter().next())
        .and_then(|entry| entry.dyn_into::<PerformanceResourceTiming>().ok())
        .map(|entry| Protocol::from_next_hop(&entry.next_hop_protocol()))
        .unwrap_or_default()
}

/// The protocol line, and the warning when `protocol` distorts `contenders`.
#[component]
pub fn ProtocolNote(
    /// The negotiated protocol.
    #[prop(into)]
    protocol: Signal<Protocol>,
    /// The most contenders the forms would run at once.
    #[prop(into)]
    contenders: Signal<u32>,
) -> impl IntoView {
    view! {
        <p class="note" data-testid="protocol" data-protocol=move || protocol.get().label()>
            "Requests to the server go over "
            <strong>{move || protocol.get().label()}</strong>
            "."
        </p>
        {move || {
            let n = contenders.get();
            protocol.get().distorts(n).then(|| {
                view! {
                    <div class="warning" role="status" data-testid="protocol-warning">
                        {distortion_warning(n)}
                    </div>
                }
            })
        }}
    }
}
