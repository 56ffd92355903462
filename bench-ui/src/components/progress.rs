//! `ProgressBar`: how far the run is, as finished acquisitions over planned ones.

use leptos::prelude::*;

/// A labelled progress bar for a fraction in `[0, 1]`.
#[component]
pub fn ProgressBar(
    /// Fraction done.
    #[prop(into)]
    fraction: Signal<f64>,
    /// Text next to the bar ("12 / 40 acquisitions").
    #[prop(into)]
    label: Signal<String>,
) -> impl IntoView {
    view! {
        <div class="progress" data-testid="progress">
            <progress max="1" prop:value=move || fraction.get()></progress>
            <span>{move || label.get()}</span>
        </div>
    }
}
