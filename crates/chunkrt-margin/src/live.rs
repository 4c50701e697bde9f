//! Phase margin of the runtime's own loop: observation -> inference thread (the
//! real policy) -> chunk buffer -> executor and spline -> permission gate ->
//! backend -> observation, run by the real [`Runtime`](chunkrt_rt::Runtime) on its real
//! threads and clock, against whatever backend the config names (the simulated
//! arm, EtherCAT through ecsim in-process or over a wire, a real arm).
//!
//! The probe is `[inject.probe]`: a multisine added to one joint's setpoint before
//! the gate while the policy plays ([`chunkrt_rt::inject::ControlInjection::probe`]).
//! The recording keeps, per cycle, the executor's setpoint `U` (the loop's own
//! output) and the command that left the gate `C = U + d`, so
//! `L(jw) = -U(w) / C(w)` at every probe frequency (DFTs over a whole number of
//! periods of each), whatever lies inside the loop. Delays go in at the real
//! injection points of `[inject]`.
//!
//! After the probe the loop runs free; its envelope decides stability
//! ([`envelope_verdict`](crate::envelope_verdict)): no margin is reported for a loop
//! that is not shown to be stable, nor for one that lost authority (a fallback)
//! while it was measured.
//!
//! `setup` says what is measured, `measure` runs the runtime and reads its
//! recording back, `analyse` turns the recorded cycles into a [`LiveRow`] (`row`).

mod analyse;
mod measure;
mod row;
mod setup;

pub use measure::{measure, measure_with, PAIRED_ATTEMPTS, REFERENCE_DIR};
pub use row::{Consequences, FilterCost, LivePoint, LiveRow, LiveStatus};
pub use setup::{default_freqs, LiveSetup};
