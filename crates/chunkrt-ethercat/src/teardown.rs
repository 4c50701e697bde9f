//! The way down: quick stop until the arm is at rest, disable voltage, OP -> INIT; and
//! the clean-up after a failed bring-up. Runs outside the control loop.

use crate::backend::{EthercatBackend, REST_VEL_RAD_S};
use crate::bus::step;
use crate::cia402::PowerState;
use crate::params::MAX_DRIVES;
use chunkrt_core::{BackendError, DriveRequest};
use ethercrab::{Command, RegisterAddress};
use std::fmt;
use std::time::{Duration, Instant};

/// What of the way down did not reach its end: each step that failed, in order.
#[derive(Debug, thiserror::Error)]
#[error("{}", join(.0, "; "))]
pub struct TeardownError(pub Vec<TeardownProblem>);

/// One step of the way down that failed.
#[derive(Debug, thiserror::Error)]
pub enum TeardownProblem {
    /// The quick stop did not bring every drive to rest in time.
    #[error("quick stop: drives not at rest within {timeout:?} ({error})")]
    QuickStop {
        /// How long it was given.
        timeout: Duration,
        /// The last cycle's error.
        error: BackendError,
    },
    /// Not every drive left Operation Enabled / Quick Stop Active.
    #[error("disable: not all drives disabled ({0})")]
    Disable(BackendError),
    /// OP -> INIT failed and not every drive reads INIT.
    #[error("leaving OP: {0}")]
    LeaveOp(LeaveOpError),
    /// The broadcast to INIT after a failed bring-up was not answered.
    #[error("bus to INIT: {0}")]
    BusToInit(String),
}

/// OP -> INIT failed (ethercrab's message), and after the broadcast to INIT these drives
/// did not read INIT.
#[derive(Debug, thiserror::Error)]
#[error("{first}; then, sent to INIT: {}", join(drives, ", "))]
pub struct LeaveOpError {
    /// Why the group transition failed.
    pub first: String,
    /// Each drive not in INIT.
    pub drives: Vec<NotInInit>,
}

/// A drive (by station address) that does not read INIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotInInit {
    /// It reads another AL state.
    #[error("drive {addr:#06x} in AL state {state:#06x}")]
    InState {
        /// Station address.
        addr: u16,
        /// Its AL status.
        state: u16,
    },
    /// It does not answer.
    #[error("drive {0:#06x} does not answer")]
    Silent(u16),
}

/// `items` separated by `sep`.
fn join<T: fmt::Display>(items: &[T], sep: &str) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

impl EthercatBackend {
    /// Cycles at the bus period with `request` (no command: hold) until `done`, at most
    /// `timeout`. Err carries the last cycle error.
    pub(crate) fn run_until(
        &mut self,
        timeout: Duration,
        request: DriveRequest,
        mut done: impl FnMut(&mut EthercatBackend) -> bool,
    ) -> Result<(), BackendError> {
        let end = Instant::now() + timeout;
        let mut next = Instant::now();
        let mut last = BackendError::FrameLost;
        loop {
            self.encode(request, None);
            match self.cycle(None) {
                Ok(()) if done(self) => return Ok(()),
                Ok(()) => {}
                Err(e) => last = e,
            }
            if Instant::now() >= end {
                return Err(last);
            }
            next += self.p.period;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    }

    /// [`Self::abort`] after `e`, a failed bring-up or enable: the error to return,
    /// with what of the teardown failed, if anything did.
    pub(crate) fn aborted(
        &mut self,
        e: crate::BringUpError,
    ) -> Box<dyn std::error::Error + Send + Sync> {
        match self.abort() {
            None => Box::new(e),
            Some(teardown) => format!(
                "{e}; then the teardown failed too: {teardown}: check the drives before \
                 going near the arm"
            )
            .into(),
        }
    }

    /// After a failed bring-up: disable every drive that runs process data, leave OP,
    /// and send the whole bus to INIT (drives in INIT cannot be enabled). Returns what
    /// of that failed (the caller says it beside the bring-up's own error).
    pub(crate) fn abort(&mut self) -> Option<TeardownError> {
        let mut problems = Vec::new();
        if self.group.is_some() {
            let n = self.p.dof();
            let disabled = self.run_until(self.p.period * 10, DriveRequest::Disable, |b| {
                b.drv[..n].iter().all(|d| {
                    !matches!(
                        d.power,
                        PowerState::OperationEnabled | PowerState::QuickStopActive
                    )
                })
            });
            if let Err(e) = disabled {
                problems.push(TeardownProblem::Disable(e));
            }
        }
        if let Err(e) = self.leave_op() {
            problems.push(TeardownProblem::LeaveOp(e));
        }
        let init = step(
            &mut self.io,
            "bus to INIT",
            Duration::from_millis(500),
            Command::bwr(RegisterAddress::AlControl.into())
                .ignore_wkc()
                .send(&self.md, 0x0011u16),
        );
        match init {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => problems.push(TeardownProblem::BusToInit(e.to_string())),
            Err(e) => problems.push(TeardownProblem::BusToInit(e.to_string())),
        }
        (!problems.is_empty()).then_some(TeardownError(problems))
    }

    /// OP -> INIT through ethercrab's group transition. When that fails (e.g. one reply
    /// that does not decode, a late frame's answer taken for another), the bus is sent
    /// to INIT by broadcast and every drive's own AL status is read back: all in INIT
    /// is a shutdown that reached its end (the first failure is logged), anything else
    /// is the failure, with each drive's state.
    fn leave_op(&mut self) -> Result<(), LeaveOpError> {
        let Some(g) = self.group.take() else {
            return Ok(());
        };
        let addrs: Vec<u16> = (0..self.p.dof())
            .filter_map(|i| g.address(&self.md, i).map(|(a, _)| a))
            .collect();
        let left = step(
            &mut self.io,
            "leave OP",
            self.p.state_timeout * 3,
            g.leave_op(&self.md),
        );
        let first = match left {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        match self.confirm_init(&addrs) {
            Ok(()) => {
                tracing::warn!(
                    "ethercat: leaving OP: {first}; the bus was then sent to INIT and every \
                     drive reads INIT in its AL status"
                );
                Ok(())
            }
            Err(drives) => Err(LeaveOpError { first, drives }),
        }
    }

    /// Broadcasts AL control INIT and polls each drive's AL status (at its station
    /// address) until all read INIT, for at most the state timeout; Err: each drive's
    /// last state.
    fn confirm_init(&mut self, addrs: &[u16]) -> Result<(), Vec<NotInInit>> {
        let t = Duration::from_millis(200);
        let end = Instant::now() + self.p.state_timeout;
        loop {
            let _ = step(
                &mut self.io,
                "bus to INIT",
                t,
                Command::bwr(RegisterAddress::AlControl.into())
                    .ignore_wkc()
                    .send(&self.md, 0x0011u16),
            );
            let mut states = Vec::with_capacity(addrs.len());
            for &a in addrs {
                let st = step(
                    &mut self.io,
                    "AL status",
                    t,
                    Command::fprd(a, RegisterAddress::AlStatus.into()).receive::<u16>(&self.md),
                );
                states.push(match st {
                    Ok(Ok(s)) if s & 0x1F == 0x01 => None,
                    Ok(Ok(s)) => Some(NotInInit::InState { addr: a, state: s }),
                    _ => Some(NotInInit::Silent(a)),
                });
            }
            if states.iter().all(Option::is_none) {
                return Ok(());
            }
            if Instant::now() >= end {
                return Err(states.into_iter().flatten().collect());
            }
            std::thread::sleep(self.p.period.max(Duration::from_millis(10)));
        }
    }

    /// Quick stop until at rest, disable voltage, OP -> INIT.
    pub(crate) fn stop_and_disable(&mut self) -> Result<(), TeardownError> {
        if self.group.is_none() {
            return Ok(());
        }
        let n = self.p.dof();
        let has_vel = self.p.layout.velocity_actual.is_some();
        let scales: Vec<_> = self.p.drives.iter().map(|d| d.scale).collect();
        let mut last = [0i32; MAX_DRIVES];
        for (i, d) in self.drv[..n].iter().enumerate() {
            last[i] = d.actual;
        }
        let stop_timeout = self.p.enable_timeout + Duration::from_secs(3);
        // At rest: out of Operation Enabled and slower than REST_VEL_RAD_S (measured, or
        // from the position change over one cycle when no velocity is mapped).
        let period_s = self.p.period.as_secs_f64();
        let stopped = self.run_until(stop_timeout, DriveRequest::QuickStop, |b| {
            let mut rest = true;
            for (i, d) in b.drv[..n].iter().enumerate() {
                let vel = if has_vel {
                    scales[i].vel_rad_s(d.vel)
                } else {
                    f64::from(d.actual.wrapping_sub(last[i]))
                        / scales[i].counts_per_rad()
                        / period_s
                };
                last[i] = d.actual;
                rest &= d.power != PowerState::OperationEnabled && vel.abs() <= REST_VEL_RAD_S;
            }
            rest
        });
        let mut problems = Vec::new();
        if let Err(error) = stopped {
            problems.push(TeardownProblem::QuickStop {
                timeout: stop_timeout,
                error,
            });
        }
        problems.extend(self.disable_and_leave());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(TeardownError(problems))
        }
    }

    /// Disable voltage on every drive at once (no wait for rest: an operator's third
    /// stop request, after the quick stop), then OP -> INIT.
    pub(crate) fn disable_at_once(&mut self) -> Result<(), TeardownError> {
        if self.group.is_none() {
            return Ok(());
        }
        let problems = self.disable_and_leave();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(TeardownError(problems))
        }
    }

    /// Disable voltage until no drive is enabled or quick-stopping, then OP -> INIT;
    /// what failed.
    fn disable_and_leave(&mut self) -> Vec<TeardownProblem> {
        let n = self.p.dof();
        let disabled = self.run_until(self.p.state_timeout, DriveRequest::Disable, |b| {
            b.drv[..n].iter().all(|d| {
                !matches!(
                    d.power,
                    PowerState::OperationEnabled | PowerState::QuickStopActive
                )
            })
        });
        let left = self.leave_op();
        let mut problems = Vec::new();
        if let Err(e) = disabled {
            problems.push(TeardownProblem::Disable(e));
        }
        if let Err(e) = left {
            problems.push(TeardownProblem::LeaveOp(e));
        }
        problems
    }
}
