//! Log lines a failing dependency would write with every request it fails (Redis gone, a scheme
//! owner unreachable): at most one per reason in an interval, which says how many were left out
//! since the last. Every request still has its decision-log line.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Throttle {
    interval: Duration,
    /// By reason: when its last line was written, and the lines left out since.
    last: Mutex<HashMap<&'static str, (Instant, u64)>>,
}

impl Throttle {
    pub fn new(interval: Duration) -> Self {
        Throttle {
            interval,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a line for `reason` is written at `now`: then the number of lines left out since
    /// the last one. The reasons are the refusal table's, a bounded set.
    pub fn admit(&self, reason: &'static str, now: Instant) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match last.get_mut(reason) {
            Some((at, left_out)) if now.duration_since(*at) < self.interval => {
                *left_out += 1;
                None
            }
            Some((at, left_out)) => {
                *at = now;
                Some(std::mem::take(left_out))
            }
            None => {
                last.insert(reason, (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_reason_and_interval_then_the_count_of_those_left_out() {
        let throttle = Throttle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(throttle.admit("a", at(0)), Some(0));
        assert_eq!(throttle.admit("a", at(1)), None);
        assert_eq!(throttle.admit("a", at(9)), None);
        assert_eq!(throttle.admit("b", at(9)), Some(0));
        assert_eq!(throttle.admit("a", at(10)), Some(2));
        assert_eq!(throttle.admit("a", at(11)), None);
    }
}
