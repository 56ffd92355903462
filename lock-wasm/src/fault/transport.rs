//! [`FaultIntercept`]: the contender's transport under its faults, an [`Intercept`] in front
//! of the real one (the seam the simulation's injection and the test kit's partitions use).
//! A call passes the faults twice: when it leaves (a paused process sends it when it wakes;
//! a partitioned or crashed one cannot send it) and when its answer comes back (a paused
//! process reads it when it wakes; an answer meeting a partition or a crash is lost).

use std::sync::Arc;

use super::{cut_off, InForce, Shared};
use crate::error::TransportError;
use crate::transport::{Answer, Intercept, Outgoing};

/// The intercept [`super::FaultSwitch::transport`] puts in front of a transport.
pub(super) struct FaultIntercept(pub(super) Arc<Shared>);

impl FaultIntercept {
    /// Waits out any pause, then fails if a partition or a crash is in force (a hanging
    /// partition fails when it heals).
    async fn pass(&self) -> Result<(), TransportError> {
        let shared = &self.0;
        loop {
            let now = shared.clock.now();
            match shared.at(now) {
                InForce::Nothing => return Ok(()),
                InForce::Crashed => return Err(cut_off("the contender crashed")),
                InForce::Paused(end) => shared.clock.sleep(end.saturating_sub(now)).await,
                InForce::Partitioned(heal, hang) => {
                    if hang {
                        shared.clock.sleep(heal.saturating_sub(now)).await;
                    }
                    return Err(cut_off("the contender is partitioned from the server"));
                }
            }
        }
    }
}

impl Intercept for FaultIntercept {
    async fn around<'a>(&'a self, call: Outgoing<'a>) -> Answer {
        self.pass().await?;
        let answer = call.send().await;
        self.pass().await?;
        answer
    }
}
