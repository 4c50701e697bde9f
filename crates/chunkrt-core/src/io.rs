//! Values that cross the control loop's boundaries: observations to the policy,
//! commands to the drives, feedback from them. All fixed-size and `Copy`.

use crate::chunk::{JointVec, MAX_DOF};
use crate::time::MonoTime;

/// What the control loop tells the inference thread about the arm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// Sequence number of the control cycle that captured it.
    pub seq: u64,
    /// When the measurement was taken (the backend's capture time).
    pub t_capture: MonoTime,
    /// Deadline of the control cycle that published it (the tick it belongs to; with
    /// an injected observation delay, a measurement captured earlier).
    pub t_cycle: MonoTime,
    /// Number of joints.
    pub dof: u16,
    /// Measured joint positions.
    pub pos_rad: JointVec,
    /// Measured joint velocities.
    pub vel_rad_s: JointVec,
    /// Measured joint torques (0 where the backend has none).
    pub torque_nm: JointVec,
    /// The last command sent to the drives.
    pub cmd_pos_rad: JointVec,
    /// Its velocity at the command's time (the permission gate's commanded state, from
    /// the last three commanded positions).
    pub cmd_vel_rad_s: JointVec,
    /// The trajectory being played at `t_capture`, without the seam blends toward it
    /// (the newest chunk's own spline; the last command when not playing): see
    /// `Executor::plan_state`.
    pub plan_pos_rad: JointVec,
    /// Its velocity.
    pub plan_vel_rad_s: JointVec,
    /// With `[episodes]`: the episode and phase the arm is in.
    pub episode: Option<crate::phase::EpisodeTag>,
}

impl Default for Observation {
    fn default() -> Self {
        Observation {
            seq: 0,
            t_capture: MonoTime::ZERO,
            t_cycle: MonoTime::ZERO,
            dof: 0,
            pos_rad: [0.0; MAX_DOF],
            vel_rad_s: [0.0; MAX_DOF],
            torque_nm: [0.0; MAX_DOF],
            cmd_pos_rad: [0.0; MAX_DOF],
            cmd_vel_rad_s: [0.0; MAX_DOF],
            plan_pos_rad: [0.0; MAX_DOF],
            plan_vel_rad_s: [0.0; MAX_DOF],
            episode: None,
        }
    }
}

/// What the runtime asks of the drives this cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DriveRequest {
    /// Track `pos_rad` (enable the drives if they are not yet enabled).
    #[default]
    Track,
    /// Quick stop (CiA 402 controlword 0x02): the drives stop on their own ramp.
    QuickStop,
    /// Clear a fault (CiA 402 fault reset, rising edge of bit 7), then enable again.
    FaultReset,
    /// Disable the drives (no torque, brakes engage where fitted).
    Disable,
}

/// A checked command for one cycle: the output of the permission gate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Command {
    /// The time this command is meant for (the cycle's deadline).
    pub t_cmd: MonoTime,
    /// Number of joints.
    pub dof: u16,
    /// Position setpoints.
    pub pos_rad: JointVec,
    /// Velocity feed-forward (the executor's trajectory velocity after the gate).
    pub vel_rad_s: JointVec,
    /// Drive-level request.
    pub request: DriveRequest,
    /// Sequence number of the chunk the command was derived from (0: none).
    pub chunk_seq: u64,
}

impl Default for Command {
    fn default() -> Self {
        Command {
            t_cmd: MonoTime::ZERO,
            dof: 0,
            pos_rad: [0.0; MAX_DOF],
            vel_rad_s: [0.0; MAX_DOF],
            request: DriveRequest::Track,
            chunk_seq: 0,
        }
    }
}

/// Power state of one drive, as CiA 402 names it (simulated drives map onto it too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DriveState {
    /// Not ready / switch-on disabled.
    #[default]
    Disabled,
    /// Ready to switch on or switched on.
    Ready,
    /// Operation enabled: following the setpoint.
    Enabled,
    /// Quick stop active.
    QuickStop,
    /// Fault (reaction active or fault).
    Fault,
    /// The drive does not answer (gone from the bus).
    Missing,
}

/// What the drives report back each cycle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Feedback {
    /// When the measurement was taken.
    pub t_capture: MonoTime,
    /// Number of joints.
    pub dof: u16,
    /// Measured positions.
    pub pos_rad: JointVec,
    /// Measured velocities.
    pub vel_rad_s: JointVec,
    /// Measured torques (0 where unavailable).
    pub torque_nm: JointVec,
    /// Per-joint drive state.
    pub state: [DriveState; MAX_DOF],
    /// Per-joint error code (CiA 402 0x603F; 0 = none).
    pub error_code: [u16; MAX_DOF],
    /// Bus round trip of this exchange in ns (0 where there is no bus, or no frame came
    /// back).
    pub bus_rtt_ns: u64,
    /// Not every joint was measured this cycle. With `Ok`: no frame came back and the
    /// backend rode through it: every other field is the last measurement, held (the
    /// drives hold the last command they got); only the backend's loss policy turns a
    /// lost frame into an error. With an error: at least one joint's fields are not from
    /// this cycle (nothing was decoded, or some drive's inputs were not read).
    pub held: bool,
    /// With Distributed Clocks: when this exchange's frame reached the bus's reference
    /// clock, relative to the instant it is meant to (SYNC0 + the configured shift), in
    /// ns, wrapped into half a SYNC0 period either side; positive is late. The control
    /// loop moves its deadlines by it (phase lock). None without DC or without a reply.
    pub sync_phase_ns: Option<i32>,
    /// Per joint, its drive's digital inputs (CiA 402 0x60FD) where the backend reads
    /// them (0 elsewhere): an enable switch, a stop button.
    pub digital_inputs: [u32; MAX_DOF],
    /// The wrist force/torque sensor's reading where the backend has one (`None`
    /// elsewhere): the wrench the world exerts on the tool.
    pub wrench: Option<Wrench>,
}

/// A wrist force/torque reading: what the world exerts on the tool, in the arm's base
/// frame, newtons and newton-metres (the torque about the sensor's origin).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Wrench {
    /// When the sensor sampled it.
    pub t_capture: MonoTime,
    /// Force, N, base frame.
    pub force_n: [f64; 3],
    /// Torque about the sensor's origin, N m, base frame.
    pub torque_nm: [f64; 3],
}

impl Wrench {
    /// |F|, N; NaN where a component is not finite.
    pub fn force_norm(&self) -> f64 {
        let [x, y, z] = self.force_n;
        (x * x + y * y + z * z).sqrt()
    }
}

impl Default for Feedback {
    fn default() -> Self {
        Feedback {
            t_capture: MonoTime::ZERO,
            dof: 0,
            pos_rad: [0.0; MAX_DOF],
            vel_rad_s: [0.0; MAX_DOF],
            torque_nm: [0.0; MAX_DOF],
            state: [DriveState::Disabled; MAX_DOF],
            error_code: [0; MAX_DOF],
            bus_rtt_ns: 0,
            held: false,
            sync_phase_ns: None,
            digital_inputs: [0; MAX_DOF],
            wrench: None,
        }
    }
}

impl Feedback {
    /// Whether every joint reports `Enabled`.
    pub fn all_enabled(&self) -> bool {
        self.state[..self.dof as usize]
            .iter()
            .all(|s| *s == DriveState::Enabled)
    }
}
