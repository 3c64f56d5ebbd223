//! How long a busy core goes without running, for the load benchmark (`benches/load.sh`): a
//! thread that does nothing but read the clock notes every gap between two readings.
//!
//!     cargo run --release --example pauses -- SECONDS
//!
//! Pinned alone to a core (taskset), a gap is time the core did not run it: the kernel's own
//! work, another thread, or the host pausing a virtual core. A server on that core is paused as
//! long, and at a constant rate what queues meanwhile lands in its latency's tail. Prints one
//! tab-separated line: gaps over 1 ms, gaps over 5 ms, the longest gap and the sum of the gaps
//! over 1 ms, both in milliseconds.

use std::time::{Duration, Instant};

#[derive(Debug, Default, PartialEq)]
struct Pauses {
    over_1ms: u64,
    over_5ms: u64,
    longest: Duration,
    paused: Duration,
}

impl Pauses {
    fn note(&mut self, gap: Duration) {
        self.longest = self.longest.max(gap);
        if gap > Duration::from_millis(1) {
            self.over_1ms += 1;
            self.paused += gap;
        }
        if gap > Duration::from_millis(5) {
            self.over_5ms += 1;
        }
    }

    fn line(&self) -> String {
        format!(
            "{}\t{}\t{:.3}\t{:.3}",
            self.over_1ms,
            self.over_5ms,
            self.longest.as_secs_f64() * 1e3,
            self.paused.as_secs_f64() * 1e3
        )
    }
}

fn measure(length: Duration) -> Pauses {
    let mut pauses = Pauses::default();
    let start = Instant::now();
    let mut last = start;
    while last - start < length {
        let now = Instant::now();
        pauses.note(now - last);
        last = now;
    }
    pauses
}

fn main() {
    let seconds = std::env::args()
        .nth(1)
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| (1..=600).contains(s));
    let Some(seconds) = seconds else {
        eprintln!("usage: pauses SECONDS (1 to 600)");
        std::process::exit(2);
    };
    println!("{}", measure(Duration::from_secs(seconds)).line());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_counted_by_length_and_only_the_long_ones_summed() {
        let mut pauses = Pauses::default();
        for micros in [40, 1_000, 1_001, 5_000, 5_001, 21_000] {
            pauses.note(Duration::from_micros(micros));
        }
        assert_eq!(
            pauses,
            Pauses {
                over_1ms: 4,
                over_5ms: 2,
                longest: Duration::from_micros(21_000),
                paused: Duration::from_micros(1_001 + 5_000 + 5_001 + 21_000),
            }
        );
        assert_eq!(pauses.line(), "4\t2\t21.000\t32.002");
    }
}
