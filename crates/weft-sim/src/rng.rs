//! The simulator's only source of randomness: SplitMix64 (Steele, Lea, Flood 2014), seeded
//! from the scenario's `seed`. One generator per purpose (placement, each application's
//! arrivals) so that adding an application does not shift another's random stream.
//!
//! Invariant: the same seed gives the same sequence on every platform; no clock is read.
//! Cost: a few integer operations per draw.

/// A SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `seed`, decorrelated by `stream` (e.g. an application index).
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng {
            state: seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03),
        };
        r.next_u64();
        r
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift (bias below 2^-32 for small n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Exponentially distributed with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_spread() {
        let mut a = Rng::new(7, 1);
        let mut b = Rng::new(7, 1);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut c = Rng::new(7, 2);
        assert_ne!(xs[0], c.next_u64());
        let mut r = Rng::new(1, 0);
        let mean: f64 = (0..20_000).map(|_| r.exp(10.0)).sum::<f64>() / 20_000.0;
        assert!((mean - 10.0).abs() < 0.5, "{mean}");
        let mut counts = [0u32; 4];
        for _ in 0..4000 {
            counts[r.below(4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
    }
}
