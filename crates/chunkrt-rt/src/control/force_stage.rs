//! The force stage of the control cycle (`[force]`): the contact force tripwire on the
//! wrist sensor's last reading. No allocation, no lock.

use super::ControlLoop;
use chunkrt_core::{ModeChangeReason, MonoTime};
use chunkrt_telemetry::EventRecord;

impl ControlLoop {
    /// Arms the contact force tripwire at `limit_n` (`[force] tripwire_n`; none: off).
    pub fn with_force_tripwire(mut self, limit_n: Option<f64>) -> Self {
        self.force_tripwire_n = limit_n;
        self
    }

    /// Whether the tripwire has fired and no `rearm` has come since.
    pub fn force_tripped(&self) -> bool {
        self.force_tripped
    }

    /// The tripwire on the last measurement, at the start of the cycle that follows it:
    /// |F| above the limit, a reading that is not finite, or a backend that stopped
    /// reporting force, withdraws the policy's authority in this very cycle (the
    /// command made next is the braking stop), logs a `ForceTripwire` event once, and
    /// holds authority off every cycle until `rearm`. A held frame is not a new reading.
    #[inline]
    pub(super) fn check_force(&mut self, wake: MonoTime) {
        let Some(limit_n) = self.force_tripwire_n else {
            return;
        };
        if !self.force_tripped && !self.fb.held {
            let force_n = self.fb.wrench.map_or(f64::NAN, |w| w.force_norm());
            // NaN (no reading, a non-finite component) is over: fail safe.
            let within = force_n.is_finite() && force_n <= limit_n;
            if !within {
                self.force_tripped = true;
                self.events_out.push(EventRecord::ForceTripwire {
                    t: wake,
                    t_capture: self.fb.wrench.map_or(self.fb.t_capture, |w| w.t_capture),
                    force_n,
                    limit_n,
                });
            }
        }
        if self.force_tripped {
            self.executor
                .force_fallback(wake, ModeChangeReason::ForceTripwire);
        }
    }
}
