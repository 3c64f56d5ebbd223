//! Rate bounds: a token bucket (so many a second on average, so many at once), and one bucket per
//! key (a client address, a caller) in a table of bounded size. The time is a parameter, so the bounds are testable.

use std::borrow::Borrow;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A wait in whole seconds, at least one (`Retry-After`).
pub fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

/// At most `per_second` takes a second on average, `burst` at once.
pub struct TokenBucket {
    per_second: f64,
    burst: f64,
    /// The tokens left, and when they were counted.
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(per_second: f64, burst: f64, now: Instant) -> Self {
        let burst = burst.max(1.0);
        TokenBucket {
            per_second,
            burst,
            state: Mutex::new((burst, now)),
        }
    }

    /// Take one token, or say how long it takes until there is one.
    pub fn take(&self, now: Instant) -> Result<(), Duration> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, counted) = *state;
        let now = now.max(counted);
        let elapsed = now.duration_since(counted).as_secs_f64();
        let tokens = (tokens + elapsed * self.per_second).min(self.burst);
        if tokens >= 1.0 {
            *state = (tokens - 1.0, now);
            Ok(())
        } else {
            *state = (tokens, now);
            Err(Duration::from_secs_f64((1.0 - tokens) / self.per_second))
        }
    }
}

/// The part of an address that names one client: an IPv4 address (also written in IPv6), or the
/// /64 network of an IPv6 address, which is what one subscriber is given.
pub fn client_key(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        v4 => v4,
    }
}

/// A token bucket per key, for at most `capacity` keys at once: the least used go first, and a
/// bucket unused for as long as it takes to fill is forgotten (it would be full again). A
/// forgotten bucket starts full, so a bound that must hold whatever the table forgets needs a
/// bucket for all keys besides.
pub struct Buckets<K> {
    per_second: f64,
    burst: f64,
    buckets: moka::sync::Cache<K, Arc<TokenBucket>>,
}

impl<K: Hash + Eq + Send + Sync + 'static> Buckets<K> {
    pub fn new(per_second: f64, burst: f64, capacity: u64) -> Self {
        Buckets {
            per_second,
            burst,
            buckets: moka::sync::Cache::builder()
                .max_capacity(capacity)
                .time_to_idle(Duration::from_secs_f64(burst.max(1.0) / per_second))
                .build(),
        }
    }

    /// Take one token of `key`'s bucket, or say how long it takes until there is one.
    pub fn take<Q>(&self, key: &Q, now: Instant) -> Result<(), Duration>
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        self.buckets
            .get_with_by_ref(key, || {
                Arc::new(TokenBucket::new(self.per_second, self.burst, now))
            })
            .take(now)
    }
}

/// A token bucket per client (`client_key`).
pub struct BucketsPerClient(Buckets<IpAddr>);

impl BucketsPerClient {
    pub fn new(per_second: f64, burst: f64, capacity: u64) -> Self {
        BucketsPerClient(Buckets::new(per_second, burst, capacity))
    }

    /// Take one token of `address`'s bucket, or say how long it takes until there is one.
    pub fn take(&self, address: IpAddr, now: Instant) -> Result<(), Duration> {
        self.0.take(&client_key(address), now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_gives_its_burst_then_its_rate() {
        let start = Instant::now();
        let bucket = TokenBucket::new(2.0, 10.0, start);
        let granted = (0..100).filter(|_| bucket.take(start).is_ok()).count();
        assert_eq!(granted, 10);
        assert_eq!(bucket.take(start), Err(Duration::from_millis(500)));
        let later = start + Duration::from_millis(500);
        assert_eq!(bucket.take(later), Ok(()));
        assert!(bucket.take(later).is_err());
    }

    #[test]
    fn one_client_emptying_its_bucket_leaves_the_others_theirs() {
        let now = Instant::now();
        let buckets = BucketsPerClient::new(0.5, 3.0, 100);
        let greedy: IpAddr = "127.0.0.2".parse().unwrap();
        let taken = (0..10)
            .filter(|_| buckets.take(greedy, now).is_ok())
            .count();
        assert_eq!(taken, 3);
        assert_eq!(buckets.take(greedy, now), Err(Duration::from_secs(2)));
        assert_eq!(buckets.take("127.0.0.1".parse().unwrap(), now), Ok(()));
    }

    #[test]
    fn an_ipv6_client_is_its_64_network_and_a_mapped_ipv4_address_is_itself() {
        let key = |a: &str| client_key(a.parse().unwrap()).to_string();
        assert_eq!(key("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_eq!(key("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(key("192.0.2.7"), "192.0.2.7");
    }
}
