//! The MuJoCo arm as a `Backend`: one CSP drive per joint (`chunkrt_sim::Drive`, the
//! same drive model as the simulated arm's) on the physics of the whole arm, stepped at
//! the model's timestep over the real time between exchanges.

use chunkrt_core::{
    Backend, BackendError, Command, DriveRequest, DriveState, Feedback, JointVec, MonoTime, MAX_DOF,
};
use chunkrt_sim::{
    check_command, Drive, DriveTuning, InjectedErrors, StepClock, INTEGRAL_CORNER_RATIO,
    REST_VEL_RAD_S,
};

use crate::gear::Gears;
use crate::params::{
    MujocoError, MujocoParams, MAX_GEAR_RAD_PER_STEP, MAX_LOOP_GAIN_PER_STEP, VELOCITY_LOOP_RATIO,
};
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
    /// The motor side of each compliant joint's gear.
    gears: Gears,
    /// The torque applied to each link in the last step (the drive's and brake's, or
    /// what the gear transmitted).
    torque_nm: JointVec,
    /// Physics clock: a whole number of steps after the time it was set.
    clock: StepClock,
    align_next: bool,
    /// Injected communication errors still to return, and which.
    injected: InjectedErrors,
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
        check_gears(&params, &plant)?;
        let tunings = tunings(&params, &plant)?;
        let mut drives = [Drive::new(tunings[0], 0.0); MAX_DOF];
        let mut encoder = Encoder::new(
            params.encoder_counts_per_rev,
            params.velocity_filter_hz,
            plant.dt_s,
        );
        let mut gears = Gears::new(&params.gears);
        // A brake sits on the motor shaft: on a compliant joint it holds the motor side.
        let mut braked_inertia = tunings.map(|t| t.inertia_kg_m2);
        for j in 0..params.joints {
            let q = plant.joint(j).0;
            // At rest on its brake, the gear carries the static load.
            gears.reset(j, q, plant.bias_torque(j));
            let motor = if gears.compliant(j) {
                braked_inertia[j] = params.gears[j].motor_inertia_kg_m2;
                gears.motor_pos_rad[j]
            } else {
                q
            };
            drives[j] = Drive::new(tunings[j], motor);
            encoder.reset(j, motor);
        }
        let delay = DelayLine::new(params.transport_delay_ns / plant.step_ns * plant.step_ns);
        let brakes = Brakes::new(
            params.brakes,
            &braked_inertia,
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
            gears,
            torque_nm: [0.0; MAX_DOF],
            clock,
            align_next: false,
            injected: InjectedErrors::default(),
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

    /// The digest over the files the model names (`<include>`s, meshes), loaded with it;
    /// none when it names none.
    pub fn model_files_sha256(&self) -> Option<&str> {
        self.plant.files_sha256.as_deref()
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
                motor_pos_rad: self.shaft(j).0,
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
            let drive_nm = drive.step(
                t_ns,
                dt_s,
                self.encoder.pos_rad[j],
                self.encoder.vel_rad_s[j],
            );
            let (q, v) = self.plant.joint(j);
            self.torque_nm[j] = if self.gears.compliant(j) {
                let (qm, vm) = (self.gears.motor_pos_rad[j], self.gears.motor_vel_rad_s[j]);
                let motor_nm = drive_nm + self.brakes.torque(j, !powered, qm, vm);
                let gear_nm = self.gears.transmitted(j, q, v);
                self.gears.step_motor(j, motor_nm, gear_nm, dt_s);
                gear_nm
            } else {
                drive_nm + self.brakes.torque(j, !powered, q, v)
            };
        }
        self.plant.step(&self.torque_nm);
        for j in 0..n {
            let (q, v) = self.shaft(j);
            self.encoder.read(j, q, v, dt_s);
        }
    }

    /// Where the drive's encoder sits: the motor side of a compliant joint's gear, the
    /// link of a rigid one (position, velocity).
    fn shaft(&self, j: usize) -> (f64, f64) {
        if self.gears.compliant(j) {
            (self.gears.motor_pos_rad[j], self.gears.motor_vel_rad_s[j])
        } else {
            self.plant.joint(j)
        }
    }

    /// Enables drive `j` holding its measured position, its integral pre-loaded with the
    /// load its brake held (before the first step, at rest: the static load there), as a
    /// drive takes the load from its brake before releasing it.
    fn enable_holding(&mut self, j: usize, t_ns: u64) {
        let static_load = match self.brakes.held(j) {
            Some(held) => held,
            None if self.shaft(j).1 == 0.0 => self.plant.bias_torque(j),
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
        self.injected.set(cycles, error);
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
        fb.wrench = self
            .plant
            .wrench()
            .map(|(force_n, torque_nm)| chunkrt_core::Wrench {
                t_capture,
                force_n,
                torque_nm,
            });
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
        self.hand_over(t_ns, track, &cmd.pos_rad, &cmd.vel_rad_s);
        Ok(())
    }

    /// Hands each joint its own request at `now`, as the CiA 402 drives of a chain take
    /// them one by one (`chunkrt ecsim` with this arm behind its drives, where each
    /// drive runs its own state machine): `Track` enables a drive that is not enabled
    /// (holding its measured position; a fault is cleared, since the chain's drive has
    /// been through its fault reset) and hands it the setpoint, `QuickStop` starts its
    /// stop ramp, `Disable` removes its torque. Setpoints pass the transport delay as
    /// `apply`'s do. A wrong count of requests or a non-finite setpoint is refused,
    /// naming the joint, before anything changes. Never allocates.
    pub fn apply_joints(
        &mut self,
        now: MonoTime,
        requests: &[JointRequest],
    ) -> Result<(), BackendError> {
        let n = self.params.joints;
        if requests.len() != n {
            return Err(BackendError::InvalidCommand {
                joint: requests.len().min(n) as u16,
            });
        }
        for (j, r) in requests.iter().enumerate() {
            if let JointRequest::Track { pos_rad, vel_rad_s } = *r {
                if !(pos_rad.is_finite() && vel_rad_s.is_finite()) {
                    return Err(BackendError::InvalidCommand { joint: j as u16 });
                }
            }
        }
        let t_ns = now.as_ns();
        let mut pos_sp = self.encoder.pos_rad;
        let mut vel_sp = [0.0; MAX_DOF];
        let mut track = false;
        for (j, r) in requests.iter().enumerate() {
            let (pos, vel) = (self.encoder.pos_rad[j], self.encoder.vel_rad_s[j]);
            match *r {
                JointRequest::Track { pos_rad, vel_rad_s } => {
                    match self.drives[j].state() {
                        DriveState::Enabled => {}
                        DriveState::Fault => {
                            self.drives[j].reset_fault();
                            self.enable_holding(j, t_ns);
                        }
                        _ => self.enable_holding(j, t_ns),
                    }
                    (pos_sp[j], vel_sp[j]) = (pos_rad, vel_rad_s);
                    track = true;
                }
                JointRequest::QuickStop => self.drives[j].quick_stop(pos, vel),
                JointRequest::Disable => self.drives[j].disable(),
            }
        }
        self.hand_over(t_ns, track, &pos_sp, &vel_sp);
        Ok(())
    }

    /// Setpoints handed over at `t_ns` enter the transport delay (or, without one, are
    /// latched at once by the enabled drives); with no joint tracking, what was still in
    /// flight is dropped.
    fn hand_over(&mut self, t_ns: u64, track: bool, pos_rad: &JointVec, vel_rad_s: &JointVec) {
        if !track {
            self.delay.clear();
        } else if let Some(early) = self.delay.push(t_ns, pos_rad, vel_rad_s) {
            self.latch(&early);
        }
        if self.delay.delay_ns() == 0 {
            while let Some(sp) = self.delay.pop_due(t_ns) {
                self.latch(&sp);
            }
        }
    }

    /// Whether joint `j` is at rest and its drive's quick-stop ramp (if one runs) has
    /// ended; `false` past the last joint.
    pub fn joint_at_rest(&self, j: usize) -> bool {
        j < self.params.joints
            && self.plant.joint(j).1.abs() < REST_VEL_RAD_S
            && self.shaft(j).1.abs() < REST_VEL_RAD_S
            && self.drives[j].ramp_at_rest()
    }

    /// Whether every joint is at rest and no drive's quick-stop ramp is still moving.
    pub fn at_rest(&self) -> bool {
        (0..self.params.joints).all(|j| self.joint_at_rest(j))
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

/// What one joint's drive is asked to do (see [`MujocoArm::apply_joints`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JointRequest {
    /// Operation enabled, tracking `pos_rad` (moving at `vel_rad_s` from the time it is
    /// handed over: the drive's interpolation to the next setpoint).
    Track {
        /// Position setpoint.
        pos_rad: f64,
        /// Velocity (feed-forward and interpolation).
        vel_rad_s: f64,
    },
    /// Quick stop: the drive's own ramp to rest, then holding.
    QuickStop,
    /// Torque off (the holding brake, where there is one, engages).
    Disable,
}

/// Joint `j` as the physics holds it (see [`MujocoArm::joint`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointTruth {
    /// Exact position.
    pub pos_rad: f64,
    /// Exact velocity.
    pub vel_rad_s: f64,
    /// The motor side of its gear (the link's position on a rigid joint).
    pub motor_pos_rad: f64,
    /// The torque the drive applies.
    pub torque_nm: f64,
    /// Gravity + Coriolis torque on the joint (`qfrc_bias`).
    pub bias_torque_nm: f64,
}

/// Each drive's tuning: the velocity loop tuned for the configured inertia (or the
/// model's at the initial pose), the torque limit configured or the model's.
/// Refuses a gear whose twist is too fast for the physics step (its motor side is
/// integrated explicitly against the link), naming the stiffness it would take.
fn check_gears(params: &MujocoParams, plant: &Plant) -> Result<(), MujocoError> {
    let link = plant.inertia_diagonal();
    let joints = params
        .gears
        .iter()
        .zip(link)
        .enumerate()
        .take(params.joints);
    for (j, (g, link_kg_m2)) in joints {
        if g.is_rigid() {
            continue;
        }
        let w = g.natural_rad_s(link_kg_m2);
        let damping_per_step = g.damping_nm_s_rad * plant.dt_s / g.motor_inertia_kg_m2;
        if w * plant.dt_s > MAX_GEAR_RAD_PER_STEP || damping_per_step > 1.0 {
            let k_max = (MAX_GEAR_RAD_PER_STEP / plant.dt_s).powi(2)
                / (1.0 / g.motor_inertia_kg_m2 + 1.0 / link_kg_m2);
            return Err(MujocoError::Param {
                field: "joint_stiffness_nm_rad",
                joint: Some(j),
                why: format!(
                    "{} N m/rad with {} N m s/rad on a motor inertia of {} kg m^2: the gear \
                     twists at {:.0} rad/s, too fast for the model's {} us timestep (at most \
                     {k_max:.0} N m/rad, and damping at most {:.1} N m s/rad)",
                    g.stiffness_nm_rad,
                    g.damping_nm_s_rad,
                    g.motor_inertia_kg_m2,
                    w,
                    plant.step_ns as f64 * 1e-3,
                    g.motor_inertia_kg_m2 / plant.dt_s
                ),
            });
        }
    }
    Ok(())
}

fn tunings(params: &MujocoParams, plant: &Plant) -> Result<[DriveTuning; MAX_DOF], MujocoError> {
    let mut inertia = params
        .inertia_kg_m2
        .unwrap_or_else(|| plant.inertia_diagonal());
    if params.inertia_kg_m2.is_none() {
        // The drive's auto-tuning sees the motor side too.
        for (i, g) in inertia.iter_mut().zip(&params.gears) {
            *i += g.motor_inertia_kg_m2;
        }
    }
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
        if let Some(error) = self.injected.take() {
            return Err(error);
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
