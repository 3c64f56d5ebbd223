//! Budgets per caller: a token bucket for each caller that spends something on others' behalf
//! (registry calls), refilled evenly over a minute, with a bounded table of callers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most callers a budget remembers; a caller forgotten starts with a full bucket.
const CALLERS: u64 = 100_000;

/// A bucket: what is left, and when it was last filled.
struct Bucket {
    left: f64,
    at: Instant,
}

/// So many calls per minute per caller, in bursts of at most a minute's worth.
pub struct CallerBudget {
    per_minute: u32,
    buckets: moka::sync::Cache<String, Arc<Mutex<Bucket>>>,
}

impl CallerBudget {
    pub fn new(per_minute: u32) -> Self {
        CallerBudget {
            per_minute: per_minute.max(1),
            buckets: moka::sync::Cache::builder()
                .max_capacity(CALLERS)
                // A caller idle for a minute has a full bucket again: forget it.
                .time_to_idle(Duration::from_secs(60))
                .build(),
        }
    }

    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Spend one call of `caller`'s budget, or say when the next one is available.
    pub fn take(&self, caller: &str, now: Instant) -> Result<(), Duration> {
        let full = f64::from(self.per_minute);
        let bucket = self.buckets.get_with_by_ref(caller, || {
            Arc::new(Mutex::new(Bucket {
                left: full,
                at: now,
            }))
        });
        let mut bucket = bucket.lock().unwrap_or_else(|e| e.into_inner());
        let per_second = full / 60.0;
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.left = (bucket.left + elapsed * per_second).min(full);
        bucket.at = now;
        if bucket.left >= 1.0 {
            bucket.left -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.left) / per_second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_spends_a_minutes_worth_and_then_waits_while_others_do_not() {
        let budget = CallerBudget::new(60);
        let start = Instant::now();
        for _ in 0..60 {
            assert_eq!(budget.take("a", start), Ok(()));
        }
        let wait = budget.take("a", start).unwrap_err();
        assert!(
            wait > Duration::from_millis(900) && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert_eq!(
            budget.take("b", start),
            Ok(()),
            "another caller's budget is its own"
        );
        assert_eq!(budget.take("a", start + Duration::from_secs(1)), Ok(()));
        assert!(budget.take("a", start + Duration::from_secs(1)).is_err());
        // Refilled evenly, never beyond a minute's worth.
        let later = start + Duration::from_secs(3600);
        assert_eq!(
            (0..100).filter(|_| budget.take("a", later).is_ok()).count(),
            60
        );
    }
}
