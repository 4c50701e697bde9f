//! chunkrt-policy: the [`chunkrt_core::Policy`] implementations.
//!
//! - [`ScriptedPolicy`]: an analytic closed-loop planner toward a cyclic list of goal poses
//!   (tests, CI without the model, the phase-margin reference loop).

pub mod goals;
pub mod quintic;
pub mod scripted;

pub use goals::{GoalError, GoalSequence};
pub use scripted::{ScriptedParams, ScriptedParamsError, ScriptedPolicy};
