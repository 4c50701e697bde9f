//! The MuJoCo arm as a `Backend`: one CSP drive per joint (`chunkrt_sim::Drive`, the
//! same drive model as the simulated arm's) on the physics of the whole arm, stepped at
//! the model's timestep over the real time between exchanges.

use chunkrt_core::{
    Backend, BackendError, Command, DriveRequest, DriveState, Feedback, JointVec, MonoTime, MAX_DOF,
};
use chunkrt_sim::{
    check_command, Drive, DriveTuning, StepClock, INTEGRAL_CORNER_RATIO, REST_VEL_RAD_S,
};

use crate::params::{MujocoError, MujocoParams, MAX_LOOP_GAIN_PER_STEP, VELOCITY_LOOP_RATIO};
use crate::plant::Plant;
use crate::sense::{Brakes, DelayLine, Encoder, Setpoint};

/// Longest simulated time `shutdown` lets the quick stop run before disabling.
const SHUTDOWN_STOP_NS: u64 = 10_000_000_000;

/// A 7-joint (or any hinge-jointed) arm simulated by MuJoCo, driven by CSP drives.
pub struct MujocoArm {
    params: MujocoParams,
    plant: Plant,
    drives: [Drive; MAX_DOF],
    encoder: Encoder,
    delay: DelayLine,
    brakes: Brakes,
    torque_nm: JointVec,
    /// Physics clock: a whole number of steps after the time it was set.
    clock: StepClock,
    align_next: bool,
    errors_left: u32,
    injected: BackendError,
}

impl MujocoArm {
    /// Loads the model (its digest checked), tunes one drive per joint, and puts the
    /// arm at rest at `params.initial_pos_rad`, drives disabled.
    pub fn new(params: MujocoParams) -> Result<MujocoArm, MujocoError> {
        params.validate()?;
        let plant = Plant::load(&params)?;
        let kv = params.velocity_loop_rad_s();
        if kv * plant.dt_s > MAX_LOOP_GAIN_PER_STEP {
            return Err(MujocoError::Param {
                field: "bandwidth_hz",
                joint: None,
                why: format!(
                    "{} Hz: the velocity loop ({kv:.0} rad/s) is too fast for the model's \
                     {} us timestep (at most {MAX_LOOP_GAIN_PER_STEP} rad per step)",
                    params.bandwidth_hz,
                    plant.step_ns as f64 * 1e-3
                ),
            });
        }
        let tunings = tunings(&params, &plant)?;
        let mut drives = [Drive::new(tunings[0], 0.0); MAX_DOF];
        let mut encoder = Encoder::new(
            params.encoder_counts_per_rev,
            params.velocity_filter_hz,
            plant.dt_s,
        );
        for j in 0..params.joints {
            drives[j] = Drive::new(tunings[j], params.initial_pos_rad[j]);
            encoder.reset(j, plant.joint(j).0);
        }
        let delay = DelayLine::new(params.transport_delay_ns / plant.step_ns * plant.step_ns);
        let brakes = Brakes::new(
            params.brakes,
            &tunings.map(|t| t.inertia_kg_m2),
            &tunings.map(|t| t.max_torque_nm),
        );
        let clock = StepClock::new(plant.step_ns);
        Ok(MujocoArm {
            params,
            plant,
            drives,
            encoder,
            delay,
            brakes,
            torque_nm: [0.0; MAX_DOF],
            clock,
            align_next: false,
            errors_left: 0,
            injected: BackendError::Injected,
        })
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &MujocoParams {
        &self.params
    }

    /// The SHA-256 of the model file it loaded (hex).
    pub fn model_sha256(&self) -> &str {
        &self.plant.sha256
    }

    /// The physics step (the drives' loop period) in ns.
    pub fn step_ns(&self) -> u64 {
        self.plant.step_ns
    }

    /// The transport delay in force (rounded down to whole steps).
    pub fn transport_delay_ns(&self) -> u64 {
        self.delay.delay_ns()
    }

    /// Each drive's tuning.
    pub fn drive_tuning(&self, j: usize) -> Option<&DriveTuning> {
        (j < self.params.joints).then(|| self.drives[j].tuning())
    }

    /// The physics clock.
    pub fn sim_time(&self) -> MonoTime {
        self.clock.time()
    }

    /// Sets the physics clock to `now` without stepping.
    pub fn set_clock(&mut self, now: MonoTime) {
        self.clock.set(now);
    }

    /// Joint `j` as the physics holds it (exact position, velocity), the torque its
    /// drive applies and the gravity + Coriolis torque on it (MuJoCo's `qfrc_bias`);
    /// `None` past the last joint.
    pub fn joint(&self, j: usize) -> Option<JointTruth> {
        (j < self.params.joints).then(|| {
            let (pos_rad, vel_rad_s) = self.plant.joint(j);
            JointTruth {
                pos_rad,
                vel_rad_s,
                torque_nm: self.drives[j].torque_nm(),
                bias_torque_nm: self.plant.bias_torque(j),
            }
        })
    }

    /// Steps the physics in whole steps from its clock up to `now` (the remainder is
    /// carried) under the drives' loops. Returns the steps taken. Never allocates.
    pub fn advance_to(&mut self, now: MonoTime) -> u64 {
        let (t0, steps) = self.clock.advance(now);
        for k in 0..steps {
            self.step_once(t0 + k * self.plant.step_ns);
        }
        steps
    }

    /// One physics step starting at `t_ns`: due setpoints latched, each drive's loop
    /// run on the encoder's reading, the torques applied, the encoder read again.
    fn step_once(&mut self, t_ns: u64) {
        let n = self.params.joints;
        let dt_s = self.plant.dt_s;
        while let Some(sp) = self.delay.pop_due(t_ns) {
            self.latch(&sp);
        }
        for j in 0..n {
            let drive = &mut self.drives[j];
            let powered = matches!(drive.state(), DriveState::Enabled | DriveState::QuickStop);
            let (q, v) = self.plant.joint(j);
            self.torque_nm[j] = drive.step(
                t_ns,
                dt_s,
                self.encoder.pos_rad[j],
                self.encoder.vel_rad_s[j],
            ) + self.brakes.torque(j, !powered, q, v);
        }
        self.plant.step(&self.torque_nm);
        for j in 0..n {
            let (q, v) = self.plant.joint(j);
            self.encoder.read(j, q, v, dt_s);
        }
    }

    /// Enables drive `j` holding its measured position, its integral pre-loaded with the
    /// load its brake held (before the first step, at rest: the static load there), as a
    /// drive takes the load from its brake before releasing it.
    fn enable_holding(&mut self, j: usize, t_ns: u64) {
        let static_load = match self.brakes.held(j) {
            Some(held) => held,
            None if self.plant.joint(j).1 == 0.0 => self.plant.bias_torque(j),
            None => 0.0,
        };
        self.drives[j].enable_holding(self.encoder.pos_rad[j], t_ns);
        self.drives[j].preload(static_load);
    }

    fn latch(&mut self, sp: &Setpoint) {
        for j in 0..self.params.joints {
            if self.drives[j].state() == DriveState::Enabled {
                self.drives[j].latch(sp.pos_rad[j], sp.vel_rad_s[j], sp.t_due_ns);
            }
        }
    }

    /// Makes the next `cycles` exchanges fail with `error` (a lost frame): the drives
    /// keep the previous command and `fb` is left untouched.
    pub fn inject_error_for(&mut self, cycles: u32, error: BackendError) {
        self.errors_left = cycles;
        self.injected = error;
    }

    /// Puts the drive of joint `j` into fault with `code` (torque off at once).
    pub fn inject_drive_fault(&mut self, j: usize, code: u16) -> Result<(), MujocoError> {
        if j >= self.params.joints {
            return Err(MujocoError::NoSuchJoint {
                joint: j,
                joints: self.params.joints,
            });
        }
        self.drives[j].fault(code);
        Ok(())
    }

    /// The measurement as the drives report it (encoder position, estimated velocity,
    /// the torque they apply), stamped `t_capture`.
    pub fn fill_feedback(&self, t_capture: MonoTime, fb: &mut Feedback) {
        fb.t_capture = t_capture;
        fb.dof = self.params.joints as u16;
        fb.bus_rtt_ns = 0;
        for j in 0..MAX_DOF {
            let live = j < self.params.joints;
            fb.pos_rad[j] = if live { self.encoder.pos_rad[j] } else { 0.0 };
            fb.vel_rad_s[j] = if live { self.encoder.vel_rad_s[j] } else { 0.0 };
            fb.torque_nm[j] = if live {
                self.drives[j].torque_nm()
            } else {
                0.0
            };
            fb.state[j] = if live {
                self.drives[j].state()
            } else {
                DriveState::Disabled
            };
            fb.error_code[j] = if live { self.drives[j].error_code() } else { 0 };
        }
    }

    /// Hands `cmd` to the drives at `now`, validated first (an invalid command changes
    /// nothing). A setpoint reaches the loops after the transport delay; requests
    /// (enable, quick stop, disable, fault reset) act at once.
    pub fn apply(&mut self, now: MonoTime, cmd: &Command) -> Result<(), BackendError> {
        check_command(cmd, self.params.joints)?;
        let t_ns = now.as_ns();
        let mut track = false;
        for j in 0..self.params.joints {
            let (pos, vel) = (self.encoder.pos_rad[j], self.encoder.vel_rad_s[j]);
            match (cmd.request, self.drives[j].state()) {
                (DriveRequest::Track | DriveRequest::FaultReset, DriveState::Enabled) => {
                    track = true
                }
                (DriveRequest::Track, DriveState::Fault) => {}
                (DriveRequest::FaultReset, DriveState::Fault) => {
                    self.drives[j].reset_fault();
                    self.enable_holding(j, t_ns);
                }
                (DriveRequest::Track | DriveRequest::FaultReset, _) => self.enable_holding(j, t_ns),
                (DriveRequest::QuickStop, _) => self.drives[j].quick_stop(pos, vel),
                (DriveRequest::Disable, _) => self.drives[j].disable(),
            }
        }
        if !track {
            self.delay.clear();
        } else if let Some(early) = self.delay.push(t_ns, &cmd.pos_rad, &cmd.vel_rad_s) {
            self.latch(&early);
        }
        if self.delay.delay_ns() == 0 {
            while let Some(sp) = self.delay.pop_due(t_ns) {
                self.latch(&sp);
            }
        }
        Ok(())
    }

    /// Whether every joint is at rest and no drive's quick-stop ramp is still moving.
    pub fn at_rest(&self) -> bool {
        (0..self.params.joints)
            .all(|j| self.plant.joint(j).1.abs() < REST_VEL_RAD_S && self.drives[j].ramp_at_rest())
    }

    fn first_fault(&self) -> Option<BackendError> {
        (0..self.params.joints)
            .find(|&j| self.drives[j].state() == DriveState::Fault)
            .map(|j| BackendError::DriveFault {
                joint: j as u16,
                code: self.drives[j].error_code(),
            })
    }
}

/// Joint `j` as the physics holds it (see [`MujocoArm::joint`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointTruth {
    /// Exact position.
    pub pos_rad: f64,
    /// Exact velocity.
    pub vel_rad_s: f64,
    /// The torque the drive applies.
    pub torque_nm: f64,
    /// Gravity + Coriolis torque on the joint (`qfrc_bias`).
    pub bias_torque_nm: f64,
}

/// Each drive's tuning: the velocity loop tuned for the configured inertia (or the
/// model's at the initial pose), the torque limit configured or the model's.
fn tunings(params: &MujocoParams, plant: &Plant) -> Result<[DriveTuning; MAX_DOF], MujocoError> {
    let inertia = params
        .inertia_kg_m2
        .unwrap_or_else(|| plant.inertia_diagonal());
    let model_limits = plant.torque_limits();
    let kv = params.velocity_loop_rad_s();
    let mut out = [DriveTuning::cascade(1.0, kv, VELOCITY_LOOP_RATIO, 1.0); MAX_DOF];
    for j in 0..params.joints {
        let max_torque = match (params.max_torque_nm, model_limits[j]) {
            (Some(v), _) => v[j],
            (None, Some(limit)) if limit > 0.0 => limit,
            _ => {
                return Err(MujocoError::Model {
                    path: params.model_path.clone(),
                    why: format!(
                        "gives joint {j} no torque limit (actuatorfrcrange): set \
                         max_torque_nm"
                    ),
                })
            }
        };
        out[j] = DriveTuning {
            inertia_kg_m2: inertia[j],
            kp_pos: kv / VELOCITY_LOOP_RATIO,
            kv_rad_s: kv,
            ki_rad_s: kv * INTEGRAL_CORNER_RATIO,
            max_torque_nm: max_torque,
            quick_stop_decel_rad_s2: params.quick_stop_decel_rad_s2[j],
            velocity_feedforward: params.velocity_feedforward,
            max_extrapolation_ns: params.max_extrapolation_ns,
        };
    }
    Ok(out)
}

impl Backend for MujocoArm {
    fn dof(&self) -> usize {
        self.params.joints
    }

    fn name(&self) -> &'static str {
        "mujoco"
    }

    /// Stepped to each cycle's deadline, as the simulated arm is.
    fn samples_at_deadline(&self) -> bool {
        true
    }

    /// Sets the physics clock to `now` and enables every drive holding its position.
    fn start(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.set_clock(now);
        self.align_next = true;
        for j in 0..self.params.joints {
            if self.drives[j].state() != DriveState::Fault {
                self.enable_holding(j, now.as_ns());
            }
        }
        self.fill_feedback(now, fb);
        match self.first_fault() {
            Some(err) => Err(Box::new(err)),
            None => Ok(()),
        }
    }

    /// Steps the physics up to `now` under the previous command, then hands `cmd` to
    /// the drives and reads the measurement at `now` (see [`MujocoArm::apply`]). Never
    /// allocates.
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError> {
        if std::mem::take(&mut self.align_next) {
            // Until the first exchange the arm rests on its holding brakes: nothing
            // moves, and the drives' loop clock starts with the first exchange, as a
            // drive synchronized to SYNC0 does. So a run does not depend on when it
            // was started before its first deadline.
            self.clock.set(now);
        }
        self.advance_to(now);
        if self.errors_left > 0 {
            self.errors_left -= 1;
            return Err(self.injected);
        }
        let applied = self.apply(now, cmd);
        self.fill_feedback(now, fb);
        applied?;
        match self.first_fault() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Quick-stops every drive, lets the arm come to rest (in simulated time, at most
    /// 10 s past `now`), then disables the drives.
    fn shutdown(&mut self, now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.advance_to(now);
        self.delay.clear();
        for j in 0..self.params.joints {
            let (pos, vel) = (self.encoder.pos_rad[j], self.encoder.vel_rad_s[j]);
            self.drives[j].quick_stop(pos, vel);
        }
        let end = self.clock.time().add_ns(SHUTDOWN_STOP_NS);
        while !self.at_rest() && self.clock.time() < end {
            let next = self.clock.time().add_ns(self.plant.step_ns * 100);
            self.advance_to(next);
        }
        for j in 0..self.params.joints {
            self.drives[j].disable();
        }
        Ok(())
    }
}
