//! `RunResults`: what the last live run showed: its counters, then its plots.

use leptos::prelude::*;

use crate::model::record::RunRecord;

use super::counters::CountersPanel;
use super::plots::{
    ConcurrencyPanel, FairnessPanel, HistogramPanel, ModeWaitsPanel, TimelinePanel,
};

/// The counters of the run and its histogram, timeline, concurrency, waits by mode and
/// fairness panels.
#[component]
pub fn RunResults(
    /// The run shown: the one in progress, or the last one.
    #[prop(into)]
    record: Signal<Option<RunRecord>>,
) -> impl IntoView {
    let counters =
        Signal::derive(move || record.with(|r| r.as_ref().map(|r| r.counters).unwrap_or_default()));
    view! {
        <section class="counters" data-testid="counters">
            <CountersPanel counters=counters/>
        </section>
        <div class="plots">
            <HistogramPanel record=record/>
            <TimelinePanel record=record/>
            <ConcurrencyPanel record=record/>
            <ModeWaitsPanel record=record/>
            <FairnessPanel record=record/>
        </div>
    }
}
