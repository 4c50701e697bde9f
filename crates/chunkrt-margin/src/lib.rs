//! chunkrt-margin: how much delay a loop can take, measured.
//!
//! A tool built on the runtime, not part of it: nothing here runs on the control
//! thread. `reference` closes a host-side servo on one simulated joint (`setup`) in
//! simulated time and measures its phase margin, beside the hand model of
//! docs/margin.md (`model`); `live` measures the runtime's own loop, run by the real
//! [`Runtime`](chunkrt_rt::Runtime) with an `[inject.probe]` on any backend, from its
//! recording; `verdict` judges stability from the free response after the probe, so
//! no margin is given to a loop that is not shown stable.

mod complex;
mod error;
pub mod live;
mod model;
mod reference;
mod setup;
pub mod verdict;

pub use complex::{lag_deg, unwrap_deg, Complex};
pub use error::MarginError;
pub use model::{model_loop, model_margins, ModelMargins};
pub use reference::*;
pub use setup::{MarginSetup, ServoGains};
pub use verdict::{envelope_verdict, Stability, Verdict};

#[cfg(test)]
mod tests;
