//! Joint radians <-> drive counts.
//!
//! A drive's position is an int32 that wraps on multi-turn encoders. A joint angle is
//! carried as the count *relative to the offset*, computed modulo 2^32 and read as a
//! signed number: that is right wherever the absolute count sits on the int32 circle, as
//! long as the joint's range spans less than 2^31 counts from the offset (checked by the
//! config). Commands beyond that are clamped, never wrapped into a jump.

/// The mapping of one joint onto its drive's counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointScale {
    counts_per_rad: f64,
    offset_counts: i32,
    direction: f64,
}

/// Largest relative count a command may ask for (one below the int32 edge).
const REL_MAX: f64 = (i32::MAX - 1) as f64;

impl JointScale {
    /// `counts_per_rad` > 0 (finite), `direction` is 1 or -1 (anything negative counts as
    /// -1). Checked by the config; asserted here, where the value is born.
    pub fn new(counts_per_rad: f64, offset_counts: i32, direction: i8) -> JointScale {
        assert!(
            counts_per_rad.is_finite() && counts_per_rad > 0.0,
            "counts_per_rad must be positive"
        );
        JointScale {
            counts_per_rad,
            offset_counts,
            direction: if direction < 0 { -1.0 } else { 1.0 },
        }
    }

    /// Joint angle of a drive position.
    pub fn pos_rad(&self, counts: i32) -> f64 {
        let rel = counts.wrapping_sub(self.offset_counts);
        f64::from(rel) * self.direction / self.counts_per_rad
    }

    /// Drive position for a joint angle; beyond the int32 range the relative count is
    /// clamped (NaN gives the offset: callers refuse NaN before this).
    pub fn pos_counts(&self, rad: f64) -> i32 {
        let rel = (rad * self.direction * self.counts_per_rad)
            .round()
            .clamp(-REL_MAX, REL_MAX);
        // `as` on a finite value within the int32 range is exact; NaN becomes 0.
        self.offset_counts.wrapping_add(rel as i32)
    }

    /// Joint velocity of a drive velocity (counts/s).
    pub fn vel_rad_s(&self, counts_s: i32) -> f64 {
        f64::from(counts_s) * self.direction / self.counts_per_rad
    }

    /// Drive velocity (counts/s, clamped to int32) for a joint velocity.
    pub fn vel_counts_s(&self, rad_s: f64) -> i32 {
        (rad_s * self.direction * self.counts_per_rad)
            .round()
            .clamp(-REL_MAX, REL_MAX) as i32
    }

    /// Joint torque of a drive's torque actual value (0x6077, per mille of its rated
    /// torque): a drive reports torque in its own (counting) direction, so a joint mounted
    /// with `direction = -1` turns its sign.
    pub fn torque_nm(&self, per_mille: i16, rated_torque_nm: f64) -> f64 {
        f64::from(per_mille) * 1e-3 * rated_torque_nm * self.direction
    }

    /// A distance in counts no shorter than `rad` (a window: rounded up, saturated to
    /// u32; NaN gives 0, callers refuse it before this).
    pub fn window_counts(&self, rad: f64) -> u32 {
        // `as` saturates: above u32::MAX it gives u32::MAX.
        (rad.abs() * self.counts_per_rad).ceil() as u32
    }

    /// Counts per radian.
    pub fn counts_per_rad(&self) -> f64 {
        self.counts_per_rad
    }

    /// The count at joint angle 0.
    pub fn offset_counts(&self) -> i32 {
        self.offset_counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offset_and_direction() {
        let s = JointScale::new(1000.0, 500, -1);
        assert_eq!(s.pos_counts(0.0), 500);
        assert_eq!(s.pos_counts(1.0), -500);
        assert_eq!(s.pos_rad(-500), 1.0);
        assert_eq!(s.vel_rad_s(2000), -2.0);
        assert_eq!(s.vel_counts_s(-2.0), 2000);
        // A drive mounted reversed reports a joint's positive torque as negative.
        assert_eq!(s.torque_nm(-500, 87.0), 43.5);
        assert_eq!(JointScale::new(1000.0, 500, 1).torque_nm(-500, 87.0), -43.5);
    }

    #[test]
    fn positions_wrap_across_the_int32_edge() {
        // Offset near the top of the circle: +0.5 rad lands past i32::MAX, wrapped.
        let s = JointScale::new(1_000_000.0, i32::MAX - 100, 1);
        let c = s.pos_counts(0.5);
        assert!(c < 0, "wrapped to the negative side: {c}");
        assert!((s.pos_rad(c) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn out_of_range_commands_clamp_instead_of_wrapping() {
        let s = JointScale::new(1e9, 0, 1);
        assert_eq!(s.pos_counts(1e6), i32::MAX - 1);
        assert_eq!(s.pos_counts(-1e6), -(i32::MAX - 1));
        assert_eq!(s.pos_counts(f64::INFINITY), i32::MAX - 1);
        assert_eq!(s.vel_counts_s(-1e12), -(i32::MAX - 1));
    }

    #[test]
    fn windows_round_up_and_saturate() {
        let s = JointScale::new(1000.0, 500, -1);
        assert_eq!(s.window_counts(0.0101), 11);
        assert_eq!(s.window_counts(0.01), 10);
        assert_eq!(s.window_counts(-0.0101), 11);
        assert_eq!(JointScale::new(1e9, 0, 1).window_counts(10.0), u32::MAX);
    }

    proptest! {
        #[test]
        fn round_trip_within_half_a_count(
            cpr in 1.0f64..1e7,
            offset in any::<i32>(),
            dir in prop_oneof![Just(1i8), Just(-1i8)],
            frac in -0.999f64..0.999,
        ) {
            let s = JointScale::new(cpr, offset, dir);
            // Any angle whose relative count fits int32.
            let rad = frac * REL_MAX / cpr;
            let back = s.pos_rad(s.pos_counts(rad));
            prop_assert!((back - rad).abs() <= 0.5 / cpr + 1e-12 * rad.abs());
        }

        #[test]
        fn never_panics_and_stays_in_range(
            cpr in 1.0f64..1e9, offset in any::<i32>(), rad in any::<f64>(),
        ) {
            let s = JointScale::new(cpr, offset, 1);
            let c = s.pos_counts(rad);
            let rel = c.wrapping_sub(offset);
            prop_assert!(rel != i32::MIN && rel != i32::MAX);
        }
    }
}
