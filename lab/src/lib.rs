//! lock-lab: the experiment code that the benchmark (`bench`), the dashboard (`bench-ui`) and
//! the load tests (`lock-chaos`) share, so each experiment concept has one home.
//!
//! Layout:
//! - [`strategy`]: the four backoff strategies compared (one enum, one set of names) and
//!   [`strategy::Delays`], one acquire's delays. Full jitter is the SDK's own
//!   `lock_wasm::Backoff`, called, never copied.
//! - [`comparison`]: the comparison retry loop, which runs the strategies the SDK does not
//!   offer over the SDK's `Transport`, `Clock` and `RngSource` seams.
//! - [`counting`]: a transport that counts the calls through it, by operation.
//! - [`chart`]: chart geometry as data (a [`chart::Chart`] of positioned shapes, scales,
//!   ticks, builders) and [`chart::svg`], its SVG text: the bench's doc figures and the
//!   dashboard's charts are drawn from the same `Chart`.
//! - [`native`] (feature `native`, not on wasm32): an SDK client over a given transport.
//!
//! Invariant: no jitter, equal jitter and decorrelated jitter live here and never enter the
//! SDK (`lock-wasm`); nothing here changes the SDK's full-jitter acquire.
//!
//! ASSUMPTIONS (values chosen here; each is documented where defined): every experiment
//! request times out after 5 s and the comparison loop budgets a 5 ms round trip before a
//! sleep ([`comparison::REQUEST_TIMEOUT`], [`comparison::RTT_ESTIMATE`]).

pub mod chart;
pub mod comparison;
pub mod counting;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod native;
pub mod strategy;
