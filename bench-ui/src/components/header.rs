//! `PageHeader`: what the dashboard is and what it runs.

use leptos::prelude::*;

/// The page's title and its lede, then `children` (the protocol line).
#[component]
pub fn PageHeader(
    /// What the header says after the lede.
    children: Children,
) -> impl IntoView {
    view! {
        <header>
            <h1>"Lock contention dashboard"</h1>
            <p class="lede">
                "Runs live contention experiments against the lock server through the SDK. "
                "Full jitter is the SDK's own acquire loop, and so is the server queue (each L4 waits in the key's FIFO queue on the server, waitMillis > 0); the other strategies exist only here, for comparison. "
                "A sweep also runs in the SDK's seeded simulation inside this page (no server), drawn beside the live one. "
                "Live, no jitter is never quite in step here: a browser takes tens of milliseconds to send a wave of N requests and read their answers (about 30 and 45 ms for 50 on two cores, where Node takes 2 and 6), which spreads each wave of its retries over several 5 ms backoff windows and narrows full jitter's lead; the simulation keeps the waves together."
            </p>
            {children()}
        </header>
    }
}
