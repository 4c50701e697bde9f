//! The fixed-size records the real-time threads push. All `Copy`, no heap.

use chunkrt_core::{
    BackendError, Constraint, Intervention, JointVec, ModeEvent, MonoTime, RejectReason,
};

/// One control cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CycleRecord {
    /// Cycle number (0-based, counts cycles that ran).
    pub cycle: u64,
    /// The absolute deadline the thread slept for.
    pub t_deadline: MonoTime,
    /// When it woke.
    pub t_wake: MonoTime,
    /// When the command was handed to the backend.
    pub t_cmd: MonoTime,
    /// When the backend's exchange returned (its feedback back).
    pub t_fb: MonoTime,
    /// When the cycle's work ended.
    pub t_done: MonoTime,
    /// Deadlines skipped before this cycle because the loop was late (never ran).
    pub missed: u32,
    /// Executor mode (`Mode as u8`).
    pub mode: u8,
    /// Gate constraints that acted this cycle (bit mask).
    pub gate_mask: u32,
    /// Sequence number of the playing chunk (0: none).
    pub chunk_seq: u64,
    /// Age of the playing chunk (now - t_obs), 0 when none.
    pub chunk_age_ns: u64,
    /// Publish -> first use, set on the first cycle that plays a chunk.
    pub handoff_ns: u64,
    /// Observation capture -> first command derived from it leaving for the drives.
    pub e2e_ns: u64,
    /// Bus round trip (0 without a bus).
    pub bus_rtt_ns: u64,
    /// With DC: the frame's phase error against SYNC0 + shift (`Feedback::sync_phase_ns`).
    pub sync_phase_ns: Option<i32>,
    /// Whether the backend exchange failed this cycle.
    /// The backend lost this cycle's frame and rode through it: the feedback is the last
    /// measurement, held (`Feedback::held`).
    pub fb_held: bool,
    pub backend_error: bool,
    /// Largest |command - measured position| over the joints (tracking error).
    pub track_err_rad: f64,
    /// Number of joints in the position vectors below.
    pub dof: u16,
    /// The executor's proposal (before the gate), per joint: the base's plus the
    /// residual's correction, after the action filter.
    pub setpoint_pos_rad: JointVec,
    /// With a residual policy (`residual` true): the base's own setpoint, per joint.
    pub base_pos_rad: JointVec,
    /// With a residual policy: the correction the residual gate let through (added to
    /// the base's setpoint), per joint.
    pub residual_rad: JointVec,
    /// A residual policy was configured (its parts above are filled in).
    pub residual: bool,
    /// Per joint, the constraints that acted on it this cycle (`gate_mask` is their
    /// union): which gate blocked which joint, for the learner's record.
    pub gate_joint_mask: [u32; chunkrt_core::MAX_DOF],
    /// With `[episodes]`: the episode and phase the command was made in.
    pub episode: Option<chunkrt_core::EpisodeTag>,
    /// The command after the gate, as handed to the backend, per joint.
    pub cmd_pos_rad: JointVec,
    /// The measured positions returned by this cycle's exchange, per joint.
    pub fb_pos_rad: JointVec,
    /// The torques the drives report (0x6077; 0 where a backend has none), per joint.
    pub fb_torque_nm: JointVec,
    /// Each drive's state as the backend last reported it.
    pub drive_state: [chunkrt_core::DriveState; chunkrt_core::MAX_DOF],
    /// The thermal monitor's I²t load per joint (1: the drive's rating); NaN without
    /// `[limits.thermal]`.
    pub thermal_load: JointVec,
    /// The wrist force/torque sensor's reading returned by this cycle's exchange (none:
    /// the backend measures no force).
    pub wrench: Option<chunkrt_core::Wrench>,
}

/// How an inference call ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InferStatus {
    /// A chunk was published.
    #[default]
    Published,
    /// The policy returned an error; nothing was published.
    Failed,
    /// A chunk was computed and deliberately dropped (fault injection).
    Dropped,
    /// No chunk: the observation's camera image was older than `camera.max_age_ms`
    /// (or no frame had arrived).
    StaleImage,
    /// A chunk was computed and refused before publishing: a setpoint lay outside its
    /// joint's bounds (`InferRecord::out_of_bounds` says where).
    OutOfBounds,
}

/// Where a chunk refused at ingestion left its joint's bounds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OutOfBounds {
    /// Setpoint index.
    pub row: u16,
    /// Joint index.
    pub joint: u16,
    /// The setpoint (rad).
    pub value_rad: f64,
    /// The joint's lower bound (rad).
    pub lo_rad: f64,
    /// The joint's upper bound (rad).
    pub hi_rad: f64,
}

/// One inference call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InferRecord {
    /// Sequence number given to the chunk.
    pub seq: u64,
    /// Capture time of the observation used.
    pub t_obs: MonoTime,
    /// When inference started.
    pub t_begin: MonoTime,
    /// When it ended (publish time when published).
    pub t_end: MonoTime,
    /// Sampler steps run.
    pub steps: u16,
    /// Sampler steps configured.
    pub steps_nominal: u16,
    /// Mean sampler step duration.
    pub step_ns: u64,
    /// Outcome.
    pub status: InferStatus,
    /// The observation was outside the declared operating domain.
    pub out_of_domain: bool,
    /// Candidates drawn for this chunk (0 or 1: no selection).
    pub candidates: u16,
    /// The candidate published (its index among those drawn).
    pub chosen: u16,
    /// Seam cost of the published candidate (fraction of the acceleration limit;
    /// see `chunkrt_rt::select`), 0 when nothing was published before.
    pub seam_cost: f32,
    /// Seam cost the first candidate alone would have had (what no selection gives).
    pub seam_cost_first: f32,
    /// The observation the policy was given (measured, commanded and planned state).
    pub obs: chunkrt_core::Observation,
    /// Capture time of the camera image in the observation (unset: no camera).
    pub t_image: MonoTime,
    /// The camera's frame counter of that image (0: none).
    pub image_seq: u64,
    /// The goal the policy computed toward (its index; `None`: no goal list).
    pub goal: Option<u16>,
    /// A chunk a policy server sampled: the request's round trip (ns; 0: sampled here).
    pub remote_rtt_ns: u64,
    /// The server's own time for it, as it said (ns; 0: not said or sampled here).
    pub server_ns: u64,
    /// Connections to the policy server made again before this chunk.
    pub reconnects: u16,
    /// With `InferStatus::OutOfBounds`: the first setpoint outside its bounds.
    pub out_of_bounds: Option<OutOfBounds>,
}

/// What became of a camera frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CameraStatus {
    /// Handed to the inference thread.
    #[default]
    Published,
    /// Captured and withheld by an injected camera stall.
    Withheld,
    /// The camera failed to deliver (the error is counted; the thread retries).
    Error,
}

/// One camera frame, from the camera thread.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CameraRecord {
    /// The camera's frame counter (a gap: frames the camera dropped).
    pub seq: u64,
    /// Capture time (monotonic).
    pub t_capture: MonoTime,
    /// When the frame was ready for inference (or withheld, or the error seen).
    pub t_ready: MonoTime,
    /// Outcome.
    pub status: CameraStatus,
    /// Synthetic camera: how many targets came before the one shown.
    pub target_index: u64,
    /// Synthetic camera: the target shown, `(u, v)` (NaN: not a synthetic camera).
    pub target_uv: [f32; 2],
}

/// A camera image as the policy is given it (the model's size, RGB8), for the recording.
#[derive(Clone, Copy)]
pub struct ImageRecord {
    /// The camera's frame counter.
    pub seq: u64,
    /// Capture time (monotonic).
    pub t_capture: MonoTime,
    /// When it was ready for inference.
    pub t_ready: MonoTime,
    /// Rows.
    pub height: u16,
    /// Columns.
    pub width: u16,
    /// `height x width x 3` bytes in use, row-major RGB.
    pub rgb: [u8; chunkrt_core::MAX_IMAGE_BYTES],
}

impl ImageRecord {
    /// The pixels in use.
    pub fn pixels(&self) -> &[u8] {
        let n = self.height as usize * self.width as usize * 3;
        &self.rgb[..n.min(self.rgb.len())]
    }
}

impl Default for ImageRecord {
    fn default() -> Self {
        ImageRecord {
            seq: 0,
            t_capture: MonoTime::ZERO,
            t_ready: MonoTime::ZERO,
            height: 0,
            width: 0,
            rgb: [0; chunkrt_core::MAX_IMAGE_BYTES],
        }
    }
}

/// Something that happened on the control thread and belongs in the log.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EventRecord {
    /// The executor changed mode.
    Mode(ModeEvent),
    /// A chunk was rejected at ingestion.
    Reject {
        /// When.
        t: MonoTime,
        /// The chunk.
        seq: u64,
        /// Why.
        reason: RejectReason,
    },
    /// The gate changed a command.
    Gate {
        /// When.
        t: MonoTime,
        /// What it did.
        intervention: Intervention,
    },
    /// The gate has held a joint's command off the proposal for a whole
    /// `executor.gate_saturated_event_ms` (logged once per saturated run).
    GateSaturated {
        /// When.
        t: MonoTime,
        /// Joint index.
        joint: u16,
        /// The binding constraint when the run began.
        constraint: Constraint,
        /// Consecutive cycles so far.
        cycles: u32,
    },
    /// A joint's measured position was further from its command than its
    /// following-error limit (logged once per excursion).
    FollowingError {
        /// When.
        t: MonoTime,
        /// Joint index.
        joint: u16,
        /// |command - measurement| (rad).
        error_rad: f64,
        /// The limit (rad).
        limit_rad: f64,
    },
    /// The backend exchange failed.
    Backend {
        /// When.
        t: MonoTime,
        /// The error.
        error: BackendError,
    },
    /// The contact force tripwire (`[force] tripwire_n`) fired: the policy's authority
    /// is withdrawn until `rearm`.
    ForceTripwire {
        /// When the loop acted on it.
        t: MonoTime,
        /// When the sensor sampled the reading.
        t_capture: MonoTime,
        /// |F| measured (N; NaN: no finite reading).
        force_n: f64,
        /// The tripwire (N).
        limit_n: f64,
    },
    /// An operator marked the running episode intervened (`intervene` on the command
    /// channel).
    OperatorMark {
        /// When.
        t: MonoTime,
        /// Marks since the last cycle.
        count: u32,
        /// The episode marked (none: no episode was running).
        episode: Option<u32>,
    },
    /// An episode ended (`[episodes]`), with its figures; `breach`: the residual's
    /// budget was broken and the residual rolled back.
    Episode(chunkrt_core::EpisodeSummary),
    /// An operator asked the run to stop (SIGINT, SIGTERM, SIGHUP, or the embedding
    /// program's stop flag) before its end: the controlled stop begins.
    OperatorStop {
        /// When.
        t: MonoTime,
        /// Stop signals received so far (0: the stop flag).
        signals: u32,
    },
}
