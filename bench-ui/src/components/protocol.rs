//! `ProtocolNote`: the HTTP version the dashboard's requests travel over (Resource Timing's
//! `nextHopProtocol`: the page's own until the job's host, the experiment worker, reports
//! its requests'), and on HTTP/1.1 with more than 6 contenders a warning that the figures
//! are distorted and how to run over HTTP/2.

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Performance, PerformanceResourceTiming};

use crate::model::protocol::{distortion_warning, Protocol};

fn performance() -> Option<Performance> {
    web_sys::window()?.performance()
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
