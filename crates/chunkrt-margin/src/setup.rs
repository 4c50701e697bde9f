//! What the reference loop measures: the simulated arm, the joint, the host servo's
//! gains, the probe and the measurement's times.

use crate::error::MarginError;
use chunkrt_sim::SimArmParams;

/// Host-side servo gains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServoGains {
    /// Proportional gain on the position error (rad / rad).
    pub kp: f64,
    /// Integral gain (1/s): the command moves `ki * e * T` per cycle.
    pub ki_per_s: f64,
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct MarginSetup {
    /// The simulated arm (Coulomb friction makes the loop amplitude-dependent; the
    /// reference loop has none).
    pub arm: SimArmParams,
    /// The joint the loop is closed on.
    pub joint: usize,
    /// Bus period.
    pub period_ns: u64,
    /// The controller.
    pub gains: ServoGains,
    /// Probe amplitude (rad).
    pub amplitude_rad: f64,
    /// Shortest settling time before the DFT window (also at least 5 probe periods).
    pub settle_s: f64,
    /// Shortest DFT window (also at least 4 probe periods).
    pub window_s: f64,
    /// Free response watched after the probe stops, for the stability verdict.
    pub verdict_s: f64,
}

impl MarginSetup {
    /// The reference loop of docs/margin.md: one simulated joint (0.6 kg m^2, no
    /// friction, 20 Hz drive position loop, 100 us drive sub-step) under a host-side
    /// integral servo `ki = 2 pi 3 1/s` at a 1 ms bus period; 1 mrad probe.
    pub fn reference() -> MarginSetup {
        let mut arm = SimArmParams::with_joints(1);
        arm.viscous_nm_s_rad[0] = 0.0;
        arm.coulomb_nm[0] = 0.0;
        arm.inertia_kg_m2[0] = 0.6;
        arm.initial_pos_rad[0] = 0.0;
        MarginSetup {
            arm,
            joint: 0,
            period_ns: 1_000_000,
            gains: ServoGains {
                kp: 0.0,
                ki_per_s: 2.0 * core::f64::consts::PI * 3.0,
            },
            amplitude_rad: 1e-3,
            settle_s: 3.0,
            window_s: 2.0,
            verdict_s: 10.0,
        }
    }

    /// Checks the setup; the message names the field.
    pub fn check(&self) -> Result<(), MarginError> {
        let bad = |what: &str| Err(MarginError::Setup(what.to_string()));
        if self.joint >= self.arm.joints {
            return bad(&format!(
                "joint {} does not exist (the arm has {})",
                self.joint, self.arm.joints
            ));
        }
        if self.period_ns == 0 {
            return bad("the period must be positive");
        }
        if !(self.gains.kp.is_finite() && self.gains.ki_per_s.is_finite()) {
            return bad("gains must be finite");
        }
        if self.gains.ki_per_s <= 0.0 && self.gains.kp <= 0.0 {
            return bad("at least one of kp, ki must be positive");
        }
        if !(self.amplitude_rad.is_finite() && self.amplitude_rad > 0.0) {
            return bad("the probe amplitude must be positive");
        }
        let settle_ok = self.settle_s.is_finite() && self.settle_s >= 0.0;
        let window_ok = self.window_s.is_finite() && self.window_s > 0.0;
        let verdict_ok = self.verdict_s.is_finite() && self.verdict_s > 0.0;
        if !(settle_ok && window_ok && verdict_ok) {
            return bad("settle, window and verdict times must be positive");
        }
        Ok(())
    }

    pub(crate) fn period_s(&self) -> f64 {
        self.period_ns as f64 * 1e-9
    }
}
