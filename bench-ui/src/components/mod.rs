//! The dashboard's components (browser only). Each is small and stateless where it can be:
//! state lives in [`crate::app::App`]'s signals, logic in [`crate::model`] and
//! [`crate::plot`].

pub mod chart;
pub mod config_form;
pub mod counters;
pub mod error_banner;
pub mod export;
pub mod plots;
pub mod progress;
pub mod protocol;
