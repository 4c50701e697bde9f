//! The simulated arm: joints advanced in fixed sub-steps over the real elapsed time,
//! a CiA 402-like request handling, fault injection, and the `Backend` implementation.

use chunkrt_core::{
    Backend, BackendError, Command, DriveRequest, DriveState, Feedback, MonoTime, MAX_DOF,
};

use crate::clock::StepClock;
use crate::inject::InjectedErrors;
use crate::joint::{Joint, JointState};
use crate::params::{SimArmParams, SimError};

/// Longest simulated time `shutdown` lets the quick stop run before disabling.
const SHUTDOWN_STOP_NS: u64 = 10_000_000_000;

/// A simulated arm: one CSP drive + motor + link per joint. See the crate docs.
#[derive(Clone, Debug)]
pub struct SimArm {
    params: SimArmParams,
    joints: [Joint; MAX_DOF],
    /// Sim clock: advanced in whole sub-steps, lags `now` by less than one sub-step
    /// (the remainder is carried into the next call); set by `start` or the first call.
    clock: StepClock,
    /// The next exchange puts the sub-step grid in phase with its time (set by
    /// `start`).
    align_next: bool,
    /// Injected communication errors still to return, and which.
    injected: InjectedErrors,
}

impl SimArm {
    /// A validated arm at rest at `params.initial_pos_rad`, drives disabled until
    /// [`Backend::start`] (or a `Track` request) enables them.
    pub fn new(params: SimArmParams) -> Result<SimArm, SimError> {
        params.validate()?;
        let mut joints = [Joint::new(&params, 0); MAX_DOF];
        for (j, joint) in joints.iter_mut().enumerate().take(params.joints) {
            *joint = Joint::new(&params, j);
        }
        Ok(SimArm {
            params,
            joints,
            clock: StepClock::new(params.substep_ns),
            align_next: false,
            injected: InjectedErrors::default(),
        })
    }

    /// The parameters the arm was built with.
    pub fn params(&self) -> &SimArmParams {
        &self.params
    }

    /// The sim clock (a whole number of sub-steps after the time it was set).
    pub fn sim_time(&self) -> MonoTime {
        self.clock.time()
    }

    /// Sets the sim clock to `now` without integrating (what `start` does).
    pub fn set_clock(&mut self, now: MonoTime) {
        self.clock.set(now);
    }

    /// Integrates every joint in whole sub-steps from the sim clock up to `now`
    /// (the remainder is carried) under the currently latched commands. Returns the
    /// number of sub-steps taken. Times before the sim clock do nothing. Pure: the
    /// result depends only on the state and `now`. Never allocates.
    pub fn advance_to(&mut self, now: MonoTime) -> u64 {
        let (t0, steps) = self.clock.advance(now);
        let substep_ns = self.params.substep_ns;
        let dt_s = substep_ns as f64 * 1e-9;
        for joint in &mut self.joints[..self.params.joints] {
            for k in 0..steps {
                joint.step(t0 + k * substep_ns, dt_s);
            }
        }
        steps
    }

    /// Snapshot of joint `j` at the sim clock; `None` past the last joint.
    pub fn joint(&self, j: usize) -> Option<JointState> {
        (j < self.params.joints).then(|| self.joints[j].snapshot(self.clock.time().as_ns()))
    }

    /// Sets a constant external load torque on joint `j` (gravity, contact, a probe
    /// signal for loop measurements). Refuses unknown joints and non-finite torques.
    pub fn set_external_torque(&mut self, j: usize, torque_nm: f64) -> Result<(), SimError> {
        self.check_joint(j)?;
        if !torque_nm.is_finite() {
            return Err(SimError::Field {
                field: "external_torque_nm",
                joint: j,
                value: torque_nm,
                expected: "finite",
            });
        }
        self.joints[j].set_external_torque(torque_nm);
        Ok(())
    }

    /// Makes the next `cycles` calls of `exchange` fail with `error`, as a lost or
    /// corrupted frame would: the plant keeps running on the previously latched
    /// commands, the new command is not applied and `fb` is left untouched.
    pub fn inject_error_for(&mut self, cycles: u32, error: BackendError) {
        self.injected.set(cycles, error);
    }

    /// Puts the drive of joint `j` into fault with error `code` (torque off at once).
    /// It stays in fault, and `exchange` reports `DriveFault`, until a `FaultReset`.
    pub fn inject_drive_fault(&mut self, j: usize, code: u16) -> Result<(), SimError> {
        self.check_joint(j)?;
        self.joints[j].fault(code);
        Ok(())
    }

    /// Writes the current measurement, stamped `t_capture`, into `fb`. Entries past the
    /// last joint are zeroed.
    pub fn fill_feedback(&self, t_capture: MonoTime, fb: &mut Feedback) {
        fb.t_capture = t_capture;
        fb.dof = self.params.joints as u16;
        fb.bus_rtt_ns = 0;
        for j in 0..MAX_DOF {
            if j < self.params.joints {
                let joint = &self.joints[j];
                let s = joint.snapshot(self.clock.time().as_ns());
                fb.pos_rad[j] = s.link_pos_rad;
                fb.vel_rad_s[j] = s.vel_rad_s;
                fb.torque_nm[j] = s.torque_nm;
                fb.state[j] = s.state;
                fb.error_code[j] = s.error_code;
            } else {
                fb.pos_rad[j] = 0.0;
                fb.vel_rad_s[j] = 0.0;
                fb.torque_nm[j] = 0.0;
                fb.state[j] = DriveState::Disabled;
                fb.error_code[j] = 0;
            }
        }
    }

    /// Hands `cmd` to the drives at `now` (after `advance_to(now)`), as `exchange` does,
    /// validating it first; an invalid command changes nothing. The drives latch the
    /// setpoint on arrival, at `now`, as a CSP drive latches it at the sync event:
    /// `cmd.t_cmd` is not used, so a late exchange shows up in the plant.
    pub fn apply(&mut self, now: MonoTime, cmd: &Command) -> Result<(), BackendError> {
        self.validate_command(cmd)?;
        let t_ns = now.as_ns();
        for (j, joint) in self.joints[..self.params.joints].iter_mut().enumerate() {
            match cmd.request {
                DriveRequest::Track => match joint.state() {
                    DriveState::Enabled => joint.latch(cmd.pos_rad[j], cmd.vel_rad_s[j], t_ns),
                    DriveState::Fault => {}
                    _ => joint.enable_holding(t_ns),
                },
                DriveRequest::QuickStop => joint.quick_stop(),
                DriveRequest::Disable => joint.disable(),
                DriveRequest::FaultReset => match joint.state() {
                    DriveState::Enabled => joint.latch(cmd.pos_rad[j], cmd.vel_rad_s[j], t_ns),
                    DriveState::Fault => {
                        joint.reset_fault();
                        joint.enable_holding(t_ns);
                    }
                    _ => joint.enable_holding(t_ns),
                },
            }
        }
        Ok(())
    }

    /// Whether every joint is at rest (slower than `REST_VEL_RAD_S`, no quick-stop ramp
    /// running).
    pub fn at_rest(&self) -> bool {
        self.joints[..self.params.joints].iter().all(Joint::at_rest)
    }

    fn validate_command(&self, cmd: &Command) -> Result<(), BackendError> {
        check_command(cmd, self.params.joints)
    }

    fn first_fault(&self) -> Option<BackendError> {
        self.joints[..self.params.joints]
            .iter()
            .enumerate()
            .find(|(_, joint)| joint.state() == DriveState::Fault)
            .map(|(j, joint)| BackendError::DriveFault {
                joint: j as u16,
                code: joint.error_code(),
            })
    }

    fn check_joint(&self, j: usize) -> Result<(), SimError> {
        if j < self.params.joints {
            Ok(())
        } else {
            Err(SimError::NoSuchJoint {
                joint: j,
                joints: self.params.joints,
            })
        }
    }
}

/// Checks `cmd` as a drive set of `joints` joints takes it: the joint count must match,
/// and a `Track` or `FaultReset` command must have finite setpoints (stop requests do not
/// use the setpoints, so garbage there must not keep the arm from stopping). Names the
/// first joint that is wrong.
pub fn check_command(cmd: &Command, joints: usize) -> Result<(), BackendError> {
    if usize::from(cmd.dof) != joints {
        // The first joint index that is missing or extra.
        return Err(BackendError::InvalidCommand {
            joint: cmd.dof.min(joints as u16),
        });
    }
    if matches!(cmd.request, DriveRequest::QuickStop | DriveRequest::Disable) {
        return Ok(());
    }
    for j in 0..joints {
        if !(cmd.pos_rad[j].is_finite() && cmd.vel_rad_s[j].is_finite()) {
            return Err(BackendError::InvalidCommand { joint: j as u16 });
        }
    }
    Ok(())
}

impl Backend for SimArm {
    fn dof(&self) -> usize {
        self.params.joints
    }

    fn name(&self) -> &'static str {
        "sim"
    }

    /// Integrated to each cycle's deadline (see the trait).
    fn samples_at_deadline(&self) -> bool {
        true
    }

    /// Sets the sim clock to `now` and enables every drive holding its position.
    /// Fails if a drive is in fault (injected before start).
    fn start(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.set_clock(now);
        self.align_next = true;
        for joint in &mut self.joints[..self.params.joints] {
            if joint.state() != DriveState::Fault {
                joint.enable_holding(now.as_ns());
            }
        }
        self.fill_feedback(now, fb);
        match self.first_fault() {
            Some(err) => Err(Box::new(err)),
            None => Ok(()),
        }
    }

    /// Integrates the plant up to `now` under the previous command, then latches `cmd`
    /// and reads the measurement at `now`. On an invalid command (wrong joint count; a
    /// non-finite setpoint in a `Track` or `FaultReset` command) the command is not
    /// applied (the drives keep the previous one) and `fb` is still filled; on an
    /// injected error `fb` is untouched. While a drive is in fault, `fb` is filled and
    /// the first faulted joint is reported as `DriveFault`. Never allocates.
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError> {
        if std::mem::take(&mut self.align_next) {
            // The drives' sub-step clock starts in phase with the first exchange, as a
            // drive synchronized to the bus does with SYNC0: the arm, held at rest
            // since `start`, is integrated from less than a sub-step later. Every later
            // exchange on the control grid then ends on a whole sub-step, so a run
            // does not depend on when it was started between two of them.
            self.clock.align(now);
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

    /// Quick-stops the arm, lets it come to rest (in simulated time, at most 10 s past
    /// `now`), then disables the drives.
    fn shutdown(&mut self, now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.advance_to(now);
        for joint in &mut self.joints[..self.params.joints] {
            joint.quick_stop();
        }
        let step_ns = self.params.substep_ns;
        let end = self.clock.time().add_ns(SHUTDOWN_STOP_NS);
        while !self.at_rest() && self.clock.time() < end {
            let next = self.clock.time().add_ns(step_ns * 100);
            self.advance_to(next);
        }
        for joint in &mut self.joints[..self.params.joints] {
            joint.disable();
        }
        Ok(())
    }
}
