//! chunkrt-mujoco: a physics-modelled arm, a [`Backend`](chunkrt_core::Backend) whose
//! plant is MuJoCo with a real arm's model (`models/franka_panda/panda.xml`, the Franka
//! Panda's kinematics and inertia from MuJoCo Menagerie).
//!
//! What it has that the simulated arm (`chunkrt-sim`: independent joints, one motor model
//! each) leaves out: gravity load that changes with the pose, inertia coupled between
//! joints, Coriolis forces, the model's joint damping and rotor inertia (armature).
//!
//! - **Drives**: one CSP drive per hinge joint, the same drive model as the simulated
//!   arm's (`chunkrt_sim::Drive`: P position loop, PI velocity loop scaled by the load
//!   inertia it is tuned for, saturated at the drive's torque limit, CiA 402 states and
//!   quick-stop ramp), run at the model's timestep (125 us, 8 kHz, in the bundled model).
//!   Its torque is applied to the joint (`qfrc_applied`); nothing compensates gravity
//!   but the velocity loop's integral, as in a drive without a model-based feed-forward.
//! - **Between drive and physics**: an encoder (`encoder_counts_per_rev`: the measured
//!   position quantized, the velocity estimated from it through a first-order filter) and
//!   a transport delay on the setpoint path (`transport_delay_ns`), `sense.rs`.
//! - **Feedback** as a drive reports it (0x6064 / 0x606C / 0x6077): the encoder's
//!   position, the estimated velocity, the torque the drive applies.
//! - **Time**: whole physics steps over the real time between exchanges, the remainder
//!   carried, in phase with the first exchange; deterministic for a given model and
//!   command sequence.
//! - **The model file** and every file it names (`<include>`s, meshes, textures) are
//!   read once with a bound, checked against their digests and loaded by MuJoCo from
//!   those bytes through its virtual file system (`mjcf.rs`).
//!
//! - **Holding brakes** (`brakes`): engaged while a joint's drive is disabled or faulted,
//!   a stiff, critically damped spring to where the joint was, saturated at the drive's
//!   torque limit; a drive enabled takes over the load its brake held.
//!
//! - **Gears** (`gears`, per joint; rigid by default): torsional compliance and backlash
//!   between the drive's motor and the link, a two-mass model with a motor-side inertia;
//!   the drive and the brake act on the motor side and the encoder reads it (`gear.rs`).
//! - **A wrist force/torque sensor** (`ft_site`, `ft.rs`): the model's `<force>` and
//!   `<torque>` sensors on one site, in the feedback as the wrench the world exerts on
//!   the tool (base frame), sampled with the encoders.
//! - **Kinematics** ([`chain_from_mjcf`], `kin.rs`): the arm's chain from the world body
//!   to a named tool site or body, read from the same model file, for the Cartesian
//!   constraints (`chunkrt_core::Chain`); checked against MuJoCo's own kinematics.
//! - **Behind `chunkrt ecsim`'s drives** ([`MujocoChain`], `chain.rs`): the whole arm as
//!   the plant of a simulated EtherCAT chain, each joint mounted on its drive as the
//!   master's configuration says.
//!
//! The library is linked through `mujoco-rs` (built against MuJoCo 3.17.0);
//! `scripts/bootstrap-mujoco.sh` places it, from PyPI's `mujoco` wheel.

mod arm;
mod chain;
mod ft;
mod gear;
mod kin;
mod mjcf;
mod params;
mod plant;
mod sense;

pub use arm::{JointRequest, JointTruth, MujocoArm};
pub use chain::{MujocoChain, ShaftMount};
pub use gear::GearParams;
pub use kin::{chain_from_mjcf, ArmKinematics};
pub use mjcf::{ASSET_LIMIT_BYTES, TOTAL_LIMIT_BYTES, VIRTUAL_ROOT, XML_LIMIT_BYTES};
pub use params::{
    MujocoError, MujocoParams, MAX_GEAR_RAD_PER_STEP, MAX_LOOP_GAIN_PER_STEP,
    MAX_TRANSPORT_DELAY_NS, VELOCITY_LOOP_RATIO,
};
pub use plant::file_sha256;
