//! `ServerFields`: where the dashboard's requests go and the bearer token they carry.

use leptos::prelude::*;

/// The server and token inputs, each bound both ways to its signal: the field shows the
/// signal and every keystroke writes it.
#[component]
pub fn ServerFields(
    /// The server's base URL; empty for the origin that served the page.
    base: RwSignal<String>,
    /// The bearer token of an auth-file client; empty for none. The caller keeps it in
    /// memory only (never the URL, web storage or a cookie), so it is gone with the page.
    token: RwSignal<String>,
) -> impl IntoView {
    view! {
        <label class="field wide">
            <span>"server"</span>
            <input type="text" data-testid="field-base-url" placeholder="same origin (the server that served this page)"
                prop:value=move || base.get()
                on:input=move |ev| base.set(event_target_value(&ev))/>
        </label>
        <label class="field wide">
            <span>"token"</span>
            <input type="password" data-testid="field-token" autocomplete="off"
                placeholder="none (a server without an auth file); kept in this page only"
                prop:value=move || token.get()
                on:input=move |ev| token.set(event_target_value(&ev))/>
        </label>
    }
}
