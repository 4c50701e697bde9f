//! The reference loop written down by hand (docs/margin.md walks through it).
//!
//! The simulated drive is a P position loop (`kpd = 2 pi bandwidth`) around a PI
//! velocity loop (`kv = 4 kpd`, integral corner `kiv = kv / 4`) on `J s^2 + b s`
//! (Coulomb friction left out: the model is linear). Closing both loops gives
//!
//! ```text
//! G(s) = kv kpd (s + kiv) / (s^3 + (b/J + kv) s^2 + kv (kiv + kpd) s + kv kiv kpd)
//! ```
//!
//! The host servo at period `T` uses the last measurement: `E = -z^-1 Y`, and
//! `U = (kp + ki T z / (z - 1)) E`. The drive holds each command for a period (zero
//! order hold, `(1 - e^-jwT) / (jwT)`, aliasing ignored) and the transport line adds
//! `e^-jw tau`. So
//!
//! ```text
//! L(jw) = (kp + ki T z/(z - 1)) z^-1 G(jw) (1 - e^-jwT)/(jwT) e^-jw tau,  z = e^jwT
//! ```

use crate::complex::Complex;
use crate::setup::MarginSetup;
use chunkrt_sim::VELOCITY_LOOP_RATIO;

/// The simulated drive's velocity-loop integral corner as a fraction of the velocity
/// loop's bandwidth (chunkrt-sim documents a quarter).
const DRIVE_INTEGRAL_CORNER_RATIO: f64 = 0.25;

/// The model's `L(j 2 pi f)` for `setup` with `delay_s` of transport delay.
pub fn model_loop(setup: &MarginSetup, delay_s: f64, freq_hz: f64) -> Complex {
    let j = setup.joint;
    let w = 2.0 * core::f64::consts::PI * freq_hz;
    let t = setup.period_s();
    let s = Complex::new(0.0, w);
    let kpd = setup.arm.position_gain();
    let kv = kpd * VELOCITY_LOOP_RATIO;
    let kiv = kv * DRIVE_INTEGRAL_CORNER_RATIO;
    let beta = setup.arm.viscous_nm_s_rad[j] / setup.arm.inertia_kg_m2[j];
    let s2 = s * s;
    let den = s2 * s
        + s2.scale(beta + kv)
        + s.scale(kv * (kiv + kpd))
        + Complex::new(kv * kiv * kpd, 0.0);
    let g = (s + Complex::new(kiv, 0.0)).scale(kv * kpd) / den;
    let z = Complex::from_polar(1.0, w * t);
    let one = Complex::new(1.0, 0.0);
    let ctrl = Complex::new(setup.gains.kp, 0.0) + (z / (z - one)).scale(setup.gains.ki_per_s * t);
    let zoh = (one - Complex::from_polar(1.0, -w * t)) / s.scale(t);
    let delay = Complex::from_polar(1.0, -w * (t + delay_s));
    ctrl * g * zoh * delay
}

/// Margins of the model loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelMargins {
    /// Gain crossover frequency.
    pub crossover_hz: f64,
    /// Phase margin.
    pub pm_deg: f64,
    /// Phase crossover frequency and gain margin (dB), where the phase reaches -180.
    pub gain_margin: Option<(f64, f64)>,
}

/// Crossovers of the model by a log scan from 0.01 Hz to Nyquist, refined by
/// bisection. `None` when `|L|` never falls through 1.
pub fn model_margins(setup: &MarginSetup, delay_s: f64) -> Option<ModelMargins> {
    let nyquist = 0.5 / setup.period_s();
    let n = 2000;
    let f_at = |i: usize| 0.01 * (nyquist / 0.01).powf(i as f64 / n as f64);
    let l = |f: f64| model_loop(setup, delay_s, f);
    let bisect = |mut lo: f64, mut hi: f64, above: &dyn Fn(f64) -> bool| {
        for _ in 0..60 {
            let mid = (lo * hi).sqrt();
            if above(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (lo * hi).sqrt()
    };
    let i = (0..n).find(|&i| l(f_at(i)).abs() > 1.0 && l(f_at(i + 1)).abs() <= 1.0)?;
    let fc = bisect(f_at(i), f_at(i + 1), &|f| l(f).abs() > 1.0);
    // Unwrapped phase along the scan.
    let mut phase = l(f_at(0)).arg().to_degrees();
    let mut gain_margin = None;
    let mut pm = None;
    for k in 1..=n {
        let mut p = l(f_at(k)).arg().to_degrees();
        while p - phase > 180.0 {
            p -= 360.0;
        }
        while p - phase < -180.0 {
            p += 360.0;
        }
        if pm.is_none() && f_at(k) >= fc {
            let pc = l(fc).arg().to_degrees();
            // Same branch as the scan.
            pm = Some(180.0 + pc + 360.0 * ((phase - pc) / 360.0).round());
        }
        if gain_margin.is_none() && phase > -180.0 && p <= -180.0 {
            let offset = p - l(f_at(k)).arg().to_degrees();
            let fp = bisect(f_at(k - 1), f_at(k), &|f| {
                let mut q = l(f).arg().to_degrees() + offset;
                while q - p > 180.0 {
                    q -= 360.0;
                }
                while q - p < -180.0 {
                    q += 360.0;
                }
                q > -180.0
            });
            gain_margin = Some((fp, -20.0 * l(fp).abs().log10()));
        }
        phase = p;
    }
    Some(ModelMargins {
        crossover_hz: fc,
        pm_deg: pm?,
        gain_margin,
    })
}
