//! What a policy (ONNX model, scripted planner) must implement.

use crate::chunk::Chunk;
use crate::io::Observation;

/// The shape of the chunks a policy produces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicySpec {
    /// Joints per setpoint (D_a).
    pub dof: usize,
    /// Setpoints per chunk (H).
    pub horizon: usize,
    /// Setpoint period in nanoseconds.
    pub dt_ns: u64,
}

/// What one inference call did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InferInfo {
    /// Sampler steps actually run (0 for analytic policies).
    pub steps: u16,
    /// Sampler steps configured (the anytime sampler may run fewer).
    pub steps_nominal: u16,
    /// Mean duration of one sampler step in ns (0 when not measured).
    pub step_ns: u64,
    /// Whether the observation was outside the policy's declared operating domain.
    pub out_of_domain: bool,
    /// The goal (its index in the policy's goal list) this chunk was computed toward;
    /// `None`: the policy keeps no goal list.
    pub goal: Option<u16>,
    /// A chunk a policy server sampled: its request's round trip, network and server
    /// together (ns; 0: sampled in this process).
    pub remote_rtt_ns: u64,
    /// The server's own time for it, as the server said (ns; 0: not said, or sampled in
    /// this process).
    pub server_ns: u64,
    /// Connections to the policy server made again before this chunk was served.
    pub reconnects: u16,
}

/// A policy error. Inference runs off the real-time path, so errors may carry text.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyError(pub String);

impl core::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolicyError {}

/// Turns an observation into an action chunk.
///
/// `infer` fills `out.pos_rad`, `out.len`, `out.dof`, `out.dt_ns` and `out.sampler_steps`
/// with setpoints for times `t_obs + offset + i * dt` (the runtime stamps `seq`,
/// `t_obs`, `t_start` and `t_publish`). Absolute joint positions in radians.
pub trait Policy: Send {
    /// Shape of the produced chunks.
    fn spec(&self) -> PolicySpec;

    /// Computes one chunk.
    fn infer(&mut self, obs: &Observation, out: &mut Chunk) -> Result<InferInfo, PolicyError>;

    /// The camera image a policy conditioned on images needs, `(height, width)` RGB;
    /// `None` (the default): the policy takes no image.
    fn image_size(&self) -> Option<(usize, usize)> {
        None
    }

    /// The image that belongs to the next [`Policy::infer`] call (the newest frame, given
    /// just before it). Only called when [`Policy::image_size`] says an image is taken.
    fn observe_image(&mut self, _image: &ImageRef<'_>) -> Result<(), PolicyError> {
        Ok(())
    }

    /// A residual policy's base chunk for the next [`Policy::infer`] call (stamped with its
    /// start and setpoint period): the runtime's residual stage gives every residual the
    /// base chunk it is to correct, just before computing the correction. A policy that
    /// does not condition on it (the default) ignores it.
    fn observe_base(&mut self, _base: &Chunk) -> Result<(), PolicyError> {
        Ok(())
    }

    /// An episode begins (`[episodes]`): the policy pursues `goal` alone until the next
    /// one. Default: nothing (a policy without goals).
    fn begin_episode(&mut self, _goal: &crate::JointVec) {}

    /// The goals it pursues in turn (the index a recorded chunk's `goal` names), as
    /// loaded; default: none.
    fn goals(&self) -> &[crate::JointVec] {
        &[]
    }

    /// The regions of joint state its manifest's omission log removes from its declared
    /// domain: the control loop takes its authority in them, every cycle, as it does
    /// outside the domain box. Default: none.
    fn exclusions(&self) -> crate::Exclusions {
        crate::Exclusions::NONE
    }
}

/// Largest camera image chunkrt carries after preprocessing: 128 x 128 RGB8.
pub const MAX_IMAGE_BYTES: usize = 128 * 128 * 3;

/// A camera frame as a policy sees it: RGB8, row-major, `height * width * 3` bytes,
/// already the size the policy asked for.
#[derive(Clone, Copy, Debug)]
pub struct ImageRef<'a> {
    /// The camera's frame counter.
    pub seq: u64,
    /// When it was captured (monotonic).
    pub t_capture: crate::MonoTime,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// The pixels.
    pub rgb: &'a [u8],
}
