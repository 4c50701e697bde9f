//! The reality gap between two plants, measured channel by channel.
//!
//! A single distance between simulated and real trajectories names no mechanism. Here
//! the same excitations ([`GapSetup`]) run on both plants, one after the other, each
//! by the real [`Runtime`](chunkrt_rt::Runtime) on whatever backend its config names
//! (the simulated arm, the MuJoCo arm, EtherCAT over a wire, a real arm), and the
//! recordings are sized per channel and joint ([`compare`]):
//!
//! - **actuator**: the measured position over the command that left the gate,
//!   `Y / C`, at each probe frequency: phase lag and gain (a drive delay, a slower
//!   loop, compliance);
//! - **coupling**: every other joint's answer to one joint's probe (inertial and
//!   gear coupling);
//! - **load**: the torque that holds the arm at rest (gravity, a payload);
//! - **sensing**: measured minus commanded at rest: its mean (an encoder offset) and
//!   the distribution of the rest (noise, KS distance);
//! - **timing**: the policy path's end-to-end jitter, oldest observation, missed
//!   deadlines.
//!
//! Each row carries both plants' values, the difference, the tolerance
//! ([`Tolerances`]) and a verdict. `chunkrt gap` writes them as `gap.json` with a
//! figure.

mod compare;
mod error;
mod measure;
mod setup;
mod signal;

pub use compare::{compare, GapRow, Tolerances};
pub use error::GapError;
pub use measure::{
    measure_plant, HoldStats, JointResponse, PlantMeasurement, ResponsePoint, Timing,
};
pub use setup::GapSetup;
