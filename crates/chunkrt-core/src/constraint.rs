//! The kinds of intervention on a proposal: the permission gate's constraints and
//! the shaping stages in front of it (the action filter, the residual gate), one bit
//! each in a [`GateMask`].

/// One kind of intervention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Constraint {
    /// Non-finite value replaced by the previous command.
    NonFinite = 0,
    /// Position limit (with margin).
    Position = 1,
    /// Braking envelope.
    Braking = 2,
    /// Velocity limit.
    Velocity = 3,
    /// Acceleration limit.
    Acceleration = 4,
    /// Jerk limit.
    Jerk = 5,
    /// Observation outside the operating domain.
    Domain = 6,
    /// The thermal monitor's derated speed limit (a joint's I²t load past
    /// `limits.thermal.derate_at`).
    Thermal = 7,
    /// The low-pass action filter (`limits.action_filter_hz`) took out more than
    /// [`crate::action_filter::ACTS_ABOVE_RAD`] beside its own lag: what the proposal
    /// carried above the cutoff. Not a saturation: the filter is meant to act.
    ActionFilter = 8,
    /// The torque slew-rate limit (`[limits.torque_slew]`): the acceleration's change
    /// per period bound by `max_torque / (rise_time * inertia)` where that is below the
    /// jerk limit.
    TorqueSlew = 9,
    /// The residual gate's magnitude bound (`[policy.residual] bound_rad`): the
    /// residual policy's correction clamped. Shaping before the permission gate, not a
    /// saturation.
    ResidualBound = 10,
    /// The residual gate's rate bound (`[policy.residual] rate_rad_s`).
    ResidualRate = 11,
    /// The residual's activity region (`[policy.residual.region]`): the correction held
    /// at zero outside it, faded near its faces.
    ResidualRegion = 12,
    /// The Cartesian approach envelope (`[cartesian]` planes): the tool's speed toward a
    /// declared surface bounded by the braking curve `√(2·a_brake·z)`
    /// ([`crate::cartesian`]).
    Approach = 13,
    /// The Cartesian tool-speed limit (`[cartesian] max_tool_speed_m_s`).
    ToolSpeed = 14,
}

impl Constraint {
    /// Every constraint, in bit order.
    pub const ALL: [Constraint; CONSTRAINT_COUNT] = [
        Constraint::NonFinite,
        Constraint::Position,
        Constraint::Braking,
        Constraint::Velocity,
        Constraint::Acceleration,
        Constraint::Jerk,
        Constraint::Domain,
        Constraint::Thermal,
        Constraint::ActionFilter,
        Constraint::TorqueSlew,
        Constraint::ResidualBound,
        Constraint::ResidualRate,
        Constraint::ResidualRegion,
        Constraint::Approach,
        Constraint::ToolSpeed,
    ];

    /// Its bit in a [`GateMask`].
    pub const fn bit(self) -> u32 {
        1 << self as u8
    }

    /// Lower-case name for logs and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Constraint::NonFinite => "non_finite",
            Constraint::Position => "position",
            Constraint::Braking => "braking",
            Constraint::Velocity => "velocity",
            Constraint::Acceleration => "acceleration",
            Constraint::Jerk => "jerk",
            Constraint::Domain => "domain",
            Constraint::Thermal => "thermal",
            Constraint::ActionFilter => "action_filter",
            Constraint::TorqueSlew => "torque_slew",
            Constraint::ResidualBound => "residual_bound",
            Constraint::ResidualRate => "residual_rate",
            Constraint::ResidualRegion => "residual_region",
            Constraint::Approach => "approach",
            Constraint::ToolSpeed => "tool_speed",
        }
    }
}

/// Number of constraint kinds.
pub const CONSTRAINT_COUNT: usize = 15;

/// The constraints that shape the proposal before the permission gate (the action
/// filter, the residual gate): meant to act, never a saturation.
pub const SHAPING_BITS: u32 = Constraint::ActionFilter.bit()
    | Constraint::ResidualBound.bit()
    | Constraint::ResidualRate.bit()
    | Constraint::ResidualRegion.bit();

/// The permission gate's own interventions on what was proposed: every constraint but
/// the shaping stages' and `Domain` (the support monitor's mark of a withdrawal, no change
/// to the proposal). What an episode's gate figure and the residual's budget count.
pub const PERMISSION_BITS: u32 =
    !(SHAPING_BITS | Constraint::Domain.bit()) & ((1 << CONSTRAINT_COUNT) - 1);

/// One bit per constraint that intervened this cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct GateMask(pub u32);

impl GateMask {
    /// Whether `c` intervened.
    pub const fn contains(self, c: Constraint) -> bool {
        self.0 & c.bit() != 0
    }

    /// Whether nothing intervened.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}
