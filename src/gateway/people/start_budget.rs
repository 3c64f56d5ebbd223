//! Sign-ins started, bounded per client address and in all: each start signs a request object,
//! and one client starting as fast as it can must not use up everyone's starts.

use crate::gateway::reject::LoginFailure;
use crate::rate::{whole_seconds, BucketsPerClient, TokenBucket};
use std::net::IpAddr;
use std::time::Instant;

/// Clients whose sign-in starts are counted at once: a table of about 100 bytes each.
const START_CLIENTS: u64 = 100_000;

/// Sign-ins started: per client address (so that one client cannot use up everyone's), and in all
/// (each signs a request object). A start refused for its address takes nothing from all.
pub struct StartBudget {
    per_address: Option<(BucketsPerClient, u32)>,
    all: TokenBucket,
}

impl StartBudget {
    pub fn new(per_second: u32, per_minute: u32) -> Self {
        let per_second = f64::from(per_second);
        StartBudget {
            per_address: (per_minute > 0).then(|| {
                let burst = f64::from(per_minute);
                (
                    BucketsPerClient::new(burst / 60.0, burst, START_CLIENTS),
                    per_minute,
                )
            }),
            all: TokenBucket::new(per_second, per_second, Instant::now()),
        }
    }

    pub fn take(&self, client: Option<IpAddr>, now: Instant) -> Result<(), LoginFailure> {
        if let (Some((buckets, per_minute)), Some(client)) = (&self.per_address, client) {
            buckets
                .take(client, now)
                .map_err(|wait| LoginFailure::TooManyStartsFromAddress {
                    per_minute: *per_minute,
                    retry_after: whole_seconds(wait),
                })?;
        }
        self.all
            .take(now)
            .map_err(|wait| LoginFailure::TooManyStarts {
                retry_after: whole_seconds(wait),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_uses_up_its_starts_leaves_the_others_theirs() {
        let budget = StartBudget::new(50, 3);
        let (greedy, other) = ("127.0.0.2".parse().ok(), "127.0.0.1".parse().ok());
        let now = Instant::now();
        let refused: Vec<_> = (0..10)
            .filter_map(|_| budget.take(greedy, now).err())
            .collect();
        assert_eq!(refused.len(), 7);
        assert_eq!(
            refused[0],
            LoginFailure::TooManyStartsFromAddress {
                per_minute: 3,
                retry_after: 20
            }
        );
        assert_eq!(budget.take(other, now), Ok(()));
    }

    #[test]
    fn the_starts_of_all_clients_stay_bounded_and_a_refused_one_takes_nothing_from_them() {
        let budget = StartBudget::new(5, 2);
        let now = Instant::now();
        let client = |i: u8| Some(IpAddr::from([10, 0, 0, i]));
        assert_eq!(
            (0..10)
                .filter(|_| budget.take(client(1), now).is_ok())
                .count(),
            2
        );
        let taken = (2..10)
            .filter(|i| budget.take(client(*i), now).is_ok())
            .count();
        assert_eq!(taken, 3, "five in all");
        assert_eq!(
            budget.take(client(20), now),
            Err(LoginFailure::TooManyStarts { retry_after: 1 })
        );
        let later = now + std::time::Duration::from_secs(1);
        assert_eq!(budget.take(client(21), later), Ok(()));
        assert!(
            budget.take(None, later).is_ok(),
            "no address: only the bound of all"
        );
    }
}
