//! Linear scales and "nice" axis ticks (steps of 1, 2 or 5 times a power of ten), so axes
//! read at a glance.

/// Maps a data interval onto a pixel interval linearly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearScale {
    /// Data interval.
    pub domain: (f64, f64),
    /// Pixel interval (may run backwards, as y axes do).
    pub range: (f64, f64),
}

impl LinearScale {
    /// A scale from `domain` to `range`; a zero-width domain is widened to avoid dividing
    /// by zero.
    pub fn new(domain: (f64, f64), range: (f64, f64)) -> Self {
        let domain = if (domain.1 - domain.0).abs() < f64::EPSILON {
            (domain.0, domain.0 + 1.0)
        } else {
            domain
        };
        LinearScale { domain, range }
    }

    /// Pixel position of `value`.
    pub fn map(&self, value: f64) -> f64 {
        let t = (value - self.domain.0) / (self.domain.1 - self.domain.0);
        self.range.0 + t * (self.range.1 - self.range.0)
    }
}

/// A step of 1, 2 or 5 times a power of ten giving about `count` intervals over `[0, max]`.
pub fn nice_step(max: f64, count: u32) -> f64 {
    if !(max.is_finite() && max > 0.0) {
        return 1.0;
    }
    let raw = max / f64::from(count.max(1));
    let power = 10f64.powf(raw.log10().floor());
    let mantissa = raw / power;
    let nice = if mantissa <= 1.0 {
        1.0
    } else if mantissa <= 2.0 {
        2.0
    } else if mantissa <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// Tick values `0, step, 2·step, …` up to the first one at or above `max`; the axis then
/// ends on a round number.
pub fn nice_ticks(max: f64, count: u32) -> Vec<f64> {
    let step = nice_step(max, count);
    let mut ticks = vec![0.0];
    let mut value = 0.0;
    while value < max && ticks.len() < 50 {
        value += step;
        ticks.push(value);
    }
    if ticks.len() == 1 {
        ticks.push(step);
    }
    ticks
}

/// A tick label: integers without decimals, small steps with as many as they need.
pub fn tick_label(value: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{}", value.round() as i64)
    } else {
        let decimals = (-step.log10().floor()) as usize;
        format!("{value:.decimals$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_map_ends_and_middle() {
        let s = LinearScale::new((0.0, 100.0), (200.0, 0.0));
        assert_eq!(s.map(0.0), 200.0);
        assert_eq!(s.map(100.0), 0.0);
        assert_eq!(s.map(25.0), 150.0);
        let flat = LinearScale::new((5.0, 5.0), (0.0, 10.0));
        assert!(flat.map(5.0).is_finite());
    }

    #[test]
    fn steps_are_one_two_or_five() {
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(7.0, 5), 2.0);
        assert_eq!(nice_step(0.3, 3), 0.1);
        assert_eq!(nice_step(0.0, 5), 1.0);
        assert_eq!(nice_step(f64::NAN, 5), 1.0);
    }

    #[test]
    fn ticks_cover_the_maximum() {
        assert_eq!(nice_ticks(95.0, 5), [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(nice_ticks(0.0, 5), [0.0, 1.0]);
        assert_eq!(tick_label(40.0, 20.0), "40");
        assert_eq!(tick_label(0.2, 0.1), "0.2");
    }
}
