//! Simulated time: integer picoseconds.
//!
//! Picoseconds (not nanoseconds) so that serialization times at datacenter rates are exact or
//! nearly so: a 1000 B packet takes 80,000 ps at 100 Gbit/s and a 64 B ACK 5,120 ps, where a
//! nanosecond clock would round the ACK by 2 % per hop and drift. A `u64` of picoseconds spans
//! 213 days of simulated time.

/// A point in simulated time or a duration, picoseconds.
pub type Time = u64;

pub const PS_PER_NS: Time = 1_000;
pub const PS_PER_US: Time = 1_000_000;
pub const PS_PER_MS: Time = 1_000_000_000;
pub const PS_PER_SEC: Time = 1_000_000_000_000;

/// Bits in a byte, for rate conversions.
pub const BITS_PER_BYTE: u64 = 8;

/// Microseconds (possibly fractional, as written in scenario files) to picoseconds.
pub fn from_us(us: f64) -> Time {
    (us * PS_PER_US as f64).round().max(0.0) as Time
}

/// Picoseconds to whole microseconds (the algorithms' clock), rounded down.
pub fn to_us(t: Time) -> u64 {
    t / PS_PER_US
}

/// Picoseconds to fractional microseconds, for outputs.
pub fn to_us_f64(t: Time) -> f64 {
    t as f64 / PS_PER_US as f64
}

/// Picoseconds to whole nanoseconds (the queue disciplines' clock).
pub fn to_ns(t: Time) -> u64 {
    t / PS_PER_NS
}

/// Seconds as f64.
pub fn to_secs(t: Time) -> f64 {
    t as f64 / PS_PER_SEC as f64
}

/// Time to serialize `bytes` onto a link of `rate_bps` bits per second, picoseconds (rounded up,
/// so back-to-back packets never exceed the line rate).
pub fn tx_time(bytes: u32, rate_bps: u64) -> Time {
    // A packet's bits in ps·bit/s fit 64 bits (2^32 bytes · 8 · 10^12 does not, 9 KB does), and a
    // 64-bit division is several times cheaper than the 128-bit one it replaces, per packet.
    match u64::from(bytes).checked_mul(BITS_PER_BYTE * PS_PER_SEC) {
        Some(bits) => bits.div_ceil(rate_bps.max(1)),
        None => tx_time_long(u64::from(bytes), rate_bps),
    }
}

/// As [`tx_time`], for byte counts beyond one packet.
pub fn tx_time_long(bytes: u64, rate_bps: u64) -> Time {
    let bits = u128::from(bytes) * u128::from(BITS_PER_BYTE) * u128::from(PS_PER_SEC);
    bits.div_ceil(u128::from(rate_bps.max(1))) as Time
}

/// Time to send `bytes` at `bytes_per_sec`, picoseconds (for pacing).
pub fn pace_time(bytes: u32, bytes_per_sec: f64) -> Time {
    (f64::from(bytes) / bytes_per_sec * PS_PER_SEC as f64).ceil() as Time
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_is_exact_at_datacenter_rates() {
        assert_eq!(tx_time(1000, 100_000_000_000), 80_000);
        assert_eq!(tx_time(64, 100_000_000_000), 5_120);
        assert_eq!(tx_time(1500, 1_000_000_000), 12 * PS_PER_US);
        // Rounds up: 1 byte at 3 bit/s is 2.67 s.
        assert_eq!(tx_time(1, 3), 2_666_666_666_667);
    }

    #[test]
    fn the_64_bit_path_rounds_as_the_128_bit_one() {
        for bytes in [0, 1, 64, 1_048, 1_500, 9_000, 2_305_843, 2_305_844, u32::MAX] {
            for rate in [1, 7, 1_000_000, 999_999_937, 10_000_000_000, 100_000_000_000, 400_000_000_000] {
                assert_eq!(tx_time(bytes, rate), tx_time_long(u64::from(bytes), rate), "{bytes} B at {rate} bit/s");
            }
        }
    }

    #[test]
    fn conversions() {
        assert_eq!(from_us(1.5), 1_500_000);
        assert_eq!(to_us(1_999_999), 1);
        assert_eq!(to_ns(1_999), 1);
        assert_eq!(pace_time(1500, 1.25e8), 12 * PS_PER_US);
    }
}
