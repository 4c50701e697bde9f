//! The few lines of complex arithmetic the margin code needs, and phase in degrees
//! as loops here report it (lagging, unwrapped along frequency).

/// A complex number (just what the margin code needs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Complex {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

impl Complex {
    /// Zero.
    pub const ZERO: Complex = Complex { re: 0.0, im: 0.0 };

    /// `re + j im`.
    pub const fn new(re: f64, im: f64) -> Self {
        Complex { re, im }
    }

    /// `r e^(j phi)`.
    pub fn from_polar(r: f64, phi: f64) -> Self {
        Complex::new(r * phi.cos(), r * phi.sin())
    }

    /// Magnitude.
    pub fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }

    /// Argument in (-pi, pi].
    pub fn arg(self) -> f64 {
        self.im.atan2(self.re)
    }

    /// Times a real number.
    pub fn scale(self, k: f64) -> Self {
        Complex::new(self.re * k, self.im * k)
    }
}

impl core::ops::Add for Complex {
    type Output = Complex;
    fn add(self, o: Complex) -> Complex {
        Complex::new(self.re + o.re, self.im + o.im)
    }
}

impl core::ops::Sub for Complex {
    type Output = Complex;
    fn sub(self, o: Complex) -> Complex {
        Complex::new(self.re - o.re, self.im - o.im)
    }
}

impl core::ops::Mul for Complex {
    type Output = Complex;
    fn mul(self, o: Complex) -> Complex {
        Complex::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}

impl core::ops::Div for Complex {
    type Output = Complex;
    fn div(self, o: Complex) -> Complex {
        let d = o.re * o.re + o.im * o.im;
        Complex::new(
            (self.re * o.re + self.im * o.im) / d,
            (self.im * o.re - self.re * o.im) / d,
        )
    }
}

impl core::ops::Neg for Complex {
    type Output = Complex;
    fn neg(self) -> Complex {
        Complex::new(-self.re, -self.im)
    }
}

/// The phase of `l` in degrees, in (-360, 0] (loops here lag).
pub fn lag_deg(l: Complex) -> f64 {
    let p = l.arg().to_degrees();
    if p > 0.0 {
        p - 360.0
    } else {
        p
    }
}

/// Phases (degrees, in frequency order) unwrapped: each within 180 degrees of the
/// one before.
pub fn unwrap_deg(phases: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let phases = phases.into_iter();
    let mut out: Vec<f64> = Vec::with_capacity(phases.size_hint().0);
    for mut ph in phases {
        if let Some(&prev) = out.last() {
            while ph - prev > 180.0 {
                ph -= 360.0;
            }
            while ph - prev < -180.0 {
                ph += 360.0;
            }
        }
        out.push(ph);
    }
    out
}
