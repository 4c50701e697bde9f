//! chunkrt-sim: the simulated arm, a [`Backend`](chunkrt_core::Backend) for tests,
//! demos and loop measurements.
//!
//! Each joint is a CSP (cyclic synchronous position) drive on a rigid motor + link:
//!
//! - **Drive**: a cascaded loop as servo drives run it, a P position loop of bandwidth
//!   `bandwidth_hz` feeding a PI velocity loop four times faster, scaled by the joint
//!   inertia, saturated at `max_torque_nm` (with conditional integration, so the
//!   integral does not wind up). The drive latches the command at each exchange; with
//!   `velocity_feedforward` it feeds `Command::vel_rad_s` forward and extrapolates the
//!   target with it until the next command (for at most `max_extrapolation_ns`).
//! - **Plant**: `J dv/dt = tau + tau_ext - b v - friction`, with Coulomb friction as a
//!   stick-slip model (a joint at rest stays put until the other torques exceed the
//!   Coulomb level) and hard stops at `pos_min_rad` / `pos_max_rad` (position clamped,
//!   velocity into the stop zeroed).
//! - **Time**: semi-implicit Euler in fixed sub-steps (`substep_ns`, 100 us by default)
//!   over the real time elapsed between exchanges (`now`), the remainder carried to
//!   the next call: a late exchange leaves the old command in force longer, so loop
//!   jitter reaches the plant.
//! - **Requests** as a CiA 402 drive handles them: `Track` enables (holding the actual
//!   position on the enabling exchange, then tracking), `QuickStop` ramps to rest at
//!   `quick_stop_decel_rad_s2` and holds in `DriveState::QuickStop`, `Disable` removes
//!   torque (friction brings the joint to rest), `FaultReset` clears a fault and
//!   enables again.
//! - **Fault injection** for tests, deterministic: [`SimArm::inject_error_for`] and
//!   [`SimArm::inject_drive_fault`].
//!
//! `exchange` refuses a non-finite command or one with the wrong joint count
//! (`BackendError::InvalidCommand`) without applying it, and never allocates.
//!
//! For loop analysis, [`SimArm::advance_to`], [`SimArm::apply`], [`SimArm::joint`] and
//! [`SimArm::set_external_torque`] drive the model directly, without the `Backend`
//! wrapper.

mod arm;
mod clock;
mod drive;
mod inject;
mod joint;
mod params;

pub use arm::{check_command, SimArm};
pub use clock::{StepClock, MAX_CATCH_UP_NS};
pub use drive::{Drive, DriveTuning, INTEGRAL_CORNER_RATIO};
pub use inject::InjectedErrors;
pub use joint::{JointState, REST_VEL_RAD_S};
pub use params::{SimArmParams, SimError, MAX_LOOP_GAIN_PER_SUBSTEP, VELOCITY_LOOP_RATIO};
