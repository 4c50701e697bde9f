//! chunkrt-core: the pure logic of chunkrt.
//!
//! No I/O, no threads, no clock reads: every function that needs the time takes
//! `now: MonoTime`. This is where chunks, the spline, the executor (splice, seam
//! blend, freshness, fallback ladder) and the permission gate live, together with
//! the `Backend` and `Policy` traits that the other crates implement.

pub mod action_filter;
pub mod backend;
pub mod blend;
pub mod cartesian;
pub mod chunk;
pub mod constraint;
pub mod delay;
mod envelope;
pub mod episodes;
pub mod executor;
pub mod gate;
pub mod io;
pub mod kinematics;
pub mod ladder;
pub mod limits;
pub mod phase;
pub mod policy;
pub mod residual;
pub mod spline;
pub mod stop;
pub mod support;
pub mod thermal;
pub mod time;

pub use action_filter::{ActionFilter, MAX_CUTOFF_HZ};
pub use backend::{Backend, BackendError};
pub use cartesian::{CartesianActed, CartesianFilter, CartesianLimits, Plane, MAX_PLANES};
pub use chunk::{Chunk, JointVec, MAX_DOF, MAX_HORIZON};
pub use delay::{
    stream_seed, DelayLine, DelayLineFull, DelayModel, DelaySampler, DropDecider, SplitMix64,
    INJECT_LINE_CAPACITY,
};
pub use episodes::{
    Breach, Budget, CycleFacts, EpisodePlan, EpisodeSummary, EpisodeTag, Episodes, Outcome, Phase,
};
pub use executor::{
    ChunkInfo, Executor, ExecutorConfig, Mode, ModeChangeReason, ModeEvent, RejectReason, Resume,
    SeamMode, SeamStats, Setpoint,
};
pub use gate::{
    Constraint, Gate, GateMask, Intervention, Saturation, CONSTRAINT_COUNT, PERMISSION_BITS,
    SHAPING_BITS,
};
pub use io::{Command, DriveRequest, DriveState, Feedback, Observation, Wrench};
pub use kinematics::{Chain, ChainError, Iso, Link, ToolJacobian};
pub use ladder::ChunkCounts;
pub use limits::{JointLimit, JointLimits};
pub use policy::{ImageRef, InferInfo, Policy, PolicyError, PolicySpec, MAX_IMAGE_BYTES};
pub use residual::{ActivityRegion, ResidualGate, ResidualLimits};
pub use spline::{ChunkSpline, Pva};
pub use stop::StopProfile;
pub use support::{
    DomainBox, ExcludedRegion, Exclusions, SupportMonitor, SupportVerdict, MAX_EXCLUSIONS,
};
pub use thermal::{cooled, ThermalLimits, ThermalMonitor, ThermalVerdict};
pub use time::{ms_to_ns, MonoTime, NS_PER_MS, NS_PER_S};
