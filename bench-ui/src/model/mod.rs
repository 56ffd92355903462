//! The dashboard's model: plain data and pure functions, no DOM and no network, so all of
//! it builds and is unit-tested on the host.

pub mod bar;
pub mod concurrency;
pub mod config;
pub mod counters;
pub mod coverage;
pub mod event_bars;
pub mod export;
pub mod fairness;
pub mod histogram;
pub mod lab_form;
pub mod lab_record;
pub mod lab_scenario;
pub mod lab_simulated;
pub mod mode_waits;
pub mod protocol;
pub mod record;
pub mod server_clock;
pub mod sweep;
pub mod timeline;
