//! The wear a run put on the arm (issue 41), tallied by the telemetry thread from the
//! records the control loop already sends (nothing more on the control thread), for the
//! wear ledger the runtime appends it to at the end of every run ([`crate::ledger`]): one
//! JSON line per hardware id, append-only, so that a manifest can cite the ledger up to
//! a line by the digest of those lines (`chunkrt_files::lines::lines_prefix_sha256`) while
//! later runs go on appending.
//!
//! Per joint: shocks (the gate clamping at the acceleration, jerk or torque slew limit,
//! one per joint and cycle; following-error excursions, one per excursion), the
//! measured torque's RMS and peak over the cycles with a measurement, and the running
//! time (cycles run times the period).

use crate::records::{CycleRecord, EventRecord};
use chunkrt_core::{Constraint, MAX_DOF};
use serde_json::{json, Value};

/// The shock kinds a ledger line counts, in its order.
pub const SHOCKS: [&str; 4] = ["acceleration", "jerk", "torque_slew", "following_error"];

/// A run's wear so far.
#[derive(Clone, Debug, Default)]
pub struct WearTally {
    cycles: u64,
    dof: usize,
    shocks: [[u64; MAX_DOF]; 4],
    torque_sq: [f64; MAX_DOF],
    torque_peak: [f64; MAX_DOF],
    torque_n: u64,
}

impl WearTally {
    /// One control cycle: its measured torques.
    pub fn cycle(&mut self, r: &CycleRecord) {
        self.cycles += 1;
        self.dof = self.dof.max((r.dof as usize).min(MAX_DOF));
        if r.fb_held {
            return;
        }
        let mut finite = true;
        for j in 0..self.dof {
            finite &= r.fb_torque_nm[j].is_finite();
        }
        if !finite {
            return;
        }
        self.torque_n += 1;
        for j in 0..self.dof {
            let tau = r.fb_torque_nm[j];
            self.torque_sq[j] += tau * tau;
            self.torque_peak[j] = self.torque_peak[j].max(tau.abs());
        }
    }

    /// An event: a gate intervention at the acceleration, jerk or slew limit, or a
    /// following-error excursion.
    pub fn event(&mut self, e: &EventRecord) {
        match e {
            EventRecord::Gate { intervention, .. } => {
                let j = (intervention.joint as usize).min(MAX_DOF - 1);
                let mask = if intervention.mask.is_empty() {
                    intervention.constraint.bit()
                } else {
                    intervention.mask.0
                };
                for (k, c) in [
                    Constraint::Acceleration,
                    Constraint::Jerk,
                    Constraint::TorqueSlew,
                ]
                .into_iter()
                .enumerate()
                {
                    if mask & c.bit() != 0 {
                        self.shocks[k][j] += 1;
                    }
                }
            }
            EventRecord::FollowingError { joint, .. } => {
                self.shocks[3][(*joint as usize).min(MAX_DOF - 1)] += 1;
            }
            _ => {}
        }
    }

    /// The joints seen so far.
    pub fn dof(&self) -> usize {
        self.dof
    }

    /// This run's wear on joints `joints` (of the arm), `period_s` the control
    /// period: the report's `wear`, and the body of a ledger line.
    pub fn summary(&self, joints: std::ops::Range<usize>, period_s: f64) -> Value {
        let joints = joints.start.min(MAX_DOF)..joints.end.min(MAX_DOF);
        let per = |v: &[u64; MAX_DOF]| v[joints.clone()].to_vec();
        let n = self.torque_n.max(1) as f64;
        let shocks: serde_json::Map<String, Value> = SHOCKS
            .iter()
            .zip(&self.shocks)
            .map(|(k, v)| (k.to_string(), json!(per(v))))
            .collect();
        json!({
            "joints": joints.clone().collect::<Vec<_>>(),
            "running_s": self.cycles as f64 * period_s,
            "shocks": shocks,
            "torque_rms_nm": joints.clone().map(|j| (self.torque_sq[j] / n).sqrt()).collect::<Vec<_>>(),
            "torque_peak_nm": joints.clone().map(|j| self.torque_peak[j]).collect::<Vec<_>>(),
            "torque_samples": self.torque_n,
        })
    }
}
