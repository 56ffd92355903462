//! The dashboard's components (browser only), one part of the page each. They are
//! stateless where they can be: the state they show lives in signals that
//! [`crate::app::App`] holds and hands down read-only (a form gets the one it edits); logic
//! lives in [`crate::model`] and [`crate::plot`].

pub mod chart;
pub mod config_form;
pub mod counters;
pub mod error_banner;
pub mod export;
pub mod header;
pub mod job_buttons;
pub mod lab;
pub mod plots;
pub mod progress;
pub mod protocol;
pub mod run_results;
pub mod server_fields;
pub mod status;
