//! `CountersPanel`: the live counters of the run in progress (or the last one).

use leptos::prelude::*;

use crate::model::counters::Counters;

/// One tile per counter; fenced-out writes and lost locks turn red when non-zero.
#[component]
pub fn CountersPanel(
    /// The counters to show.
    #[prop(into)]
    counters: Signal<Counters>,
) -> impl IntoView {
    move || {
        let c = counters.get();
        c.entries()
            .into_iter()
            .map(|(label, value)| {
                let alarm = matches!(label, "fenced-out writes" | "lost locks") && value > 0;
                let id = label.replace(' ', "-");
                view! {
                    <div class="counter" class:alarm=alarm data-testid=format!("counter-{id}")>
                        <span class="value">{value}</span>
                        <span class="label">{label}</span>
                    </div>
                }
            })
            .collect_view()
    }
}
