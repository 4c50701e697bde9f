//! chunkrt-margin: how much delay a loop can take, measured.
//!
//! A tool built on the runtime, not part of it: nothing here runs on the control
//! thread. `reference` closes a host-side servo on one simulated joint in simulated
//! time and measures its phase margin against the hand model of docs/margin.md
//! (`model`); `live` measures the runtime's own loop, run by the real
//! [`Runtime`](chunkrt_rt::Runtime) with an `[inject.probe]` on any backend, from its
//! recording; `verdict` judges stability from the free response after the probe, so
//! no margin is given to a loop that is not shown stable.

pub mod live;
mod model;
mod reference;
pub mod verdict;

pub use model::{model_loop, model_margins, Complex, ModelMargins};
pub use reference::*;
pub use verdict::{envelope_verdict, Stability, Verdict};

#[cfg(test)]
mod tests;
