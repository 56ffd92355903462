//! `ErrorBanner`: server and validation errors shown in place, above the plots.

use leptos::prelude::*;

/// Shows `message` when there is one; nothing otherwise.
#[component]
pub fn ErrorBanner(
    /// The error, if any.
    #[prop(into)]
    message: Signal<Option<String>>,
) -> impl IntoView {
    move || {
        message.get().map(|m| {
            view! { <div class="error" role="alert" data-testid="error">{m}</div> }
        })
    }
}
