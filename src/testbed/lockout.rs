//! Password guessing slowed down, for every sign-in form of the testbed (the identity provider's and
//! the registry's `/admin`): after a few wrong passwords for one user name, or from one client
//! address, every further attempt with them is refused for a while that doubles with each further
//! wrong password. Both tables are bounded; a record unused for longer than the longest refusal
//! is forgotten.

use crate::rate::{client_key, whole_seconds};
use axum::http::{header, HeaderName, HeaderValue};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Wrong passwords without a wait (for one user name, or from one address).
const FREE_FAILURES: u32 = 3;
/// The wait after the first wrong password beyond them; each further one doubles it.
const FIRST_LOCK: Duration = Duration::from_secs(30);
/// The longest wait.
const LONGEST_LOCK: Duration = Duration::from_secs(3600);
/// User names, and client addresses, remembered at once (each).
const CAPACITY: u64 = 10_000;
/// The characters of a user name that count: a longer one is one of them.
const USER_NAME_CHARS: usize = 64;

/// The wrong passwords of one user name or address, and the end of its wait.
#[derive(Default)]
struct Failures {
    count: u32,
    locked_until: Option<Instant>,
}

impl Failures {
    fn wait(&self, now: Instant) -> Option<Duration> {
        self.locked_until
            .map(|until| until.saturating_duration_since(now))
            .filter(|wait| !wait.is_zero())
    }

    fn failed(&mut self, now: Instant) {
        self.count = self.count.saturating_add(1);
        if let Some(beyond) = self.count.checked_sub(FREE_FAILURES + 1) {
            let lock = FIRST_LOCK.saturating_mul(1 << beyond.min(16));
            self.locked_until = Some(now + lock.min(LONGEST_LOCK));
        }
    }
}

type Table<K> = moka::sync::Cache<K, Arc<Mutex<Failures>>>;

fn table<K: std::hash::Hash + Eq + Send + Sync + 'static>() -> Table<K> {
    moka::sync::Cache::builder()
        .max_capacity(CAPACITY)
        .time_to_idle(LONGEST_LOCK * 2)
        .build()
}

fn lock(failures: &Mutex<Failures>) -> MutexGuard<'_, Failures> {
    failures.lock().unwrap_or_else(|e| e.into_inner())
}

/// The wrong passwords per user name and per client address of one sign-in form.
pub struct Lockout {
    users: Table<String>,
    addresses: Table<IpAddr>,
}

/// An attempt refused: how long until the next one is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locked {
    pub wait: Duration,
}

impl Default for Lockout {
    fn default() -> Self {
        Lockout {
            users: table(),
            addresses: table(),
        }
    }
}

impl Lockout {
    /// An attempt to sign in as `user` from `address`: refused while either waits; else
    /// `check` says whether the password is right (Some) or not (None). A wrong one counts for
    /// both, a right one clears the user name's count. Attempts for the same user name or from the
    /// same address are checked one at a time, so that attempts made at once cannot pass together.
    pub fn attempt<T>(
        &self,
        user: &str,
        address: IpAddr,
        now: Instant,
        check: impl FnOnce() -> Option<T>,
    ) -> Result<Option<T>, Locked> {
        // The address first: one that waits touches no user name's record, so that it cannot
        // push a locked user name out of the table by naming many others.
        let of_address = self
            .addresses
            .get_with(client_key(address), Default::default);
        let mut of_address = lock(&of_address);
        if let Some(wait) = of_address.wait(now) {
            return Err(Locked { wait });
        }
        let user: String = user.chars().take(USER_NAME_CHARS).collect();
        let of_user = self.users.get_with(user, Default::default);
        let mut of_user = lock(&of_user);
        if let Some(wait) = of_user.wait(now) {
            return Err(Locked { wait });
        }
        let checked = check();
        match checked {
            Some(_) => *of_user = Failures::default(),
            None => {
                of_user.failed(now);
                of_address.failed(now);
            }
        }
        Ok(checked)
    }
}

impl Locked {
    /// Whole seconds to wait, at least one.
    pub fn seconds(&self) -> u64 {
        whole_seconds(self.wait)
    }

    /// What the sign-in form says: when to try again.
    pub fn message(&self) -> String {
        let at = time::OffsetDateTime::now_utc() + self.wait;
        format!(
            "Too many wrong passwords for this user name or from this address: try again in {} seconds (at {:02}:{:02}:{:02} UTC).",
            self.seconds(),
            at.hour(),
            at.minute(),
            at.second()
        )
    }

    /// The header of the refusal (429) that says when to try again.
    pub fn retry_after(&self) -> [(HeaderName, HeaderValue); 1] {
        [(header::RETRY_AFTER, HeaderValue::from(self.seconds()))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));

    /// A wrong password for `user` from `address` at `now`: refused (the wait) or taken.
    fn wrong(lockout: &Lockout, user: &str, address: IpAddr, now: Instant) -> Option<Duration> {
        lockout
            .attempt(user, address, now, || None::<()>)
            .err()
            .map(|l| l.wait)
    }

    #[test]
    fn wrong_passwords_beyond_a_few_wait_twice_as_long_each() {
        let lockout = Lockout::default();
        let start = Instant::now();
        for _ in 0..FREE_FAILURES {
            assert_eq!(wrong(&lockout, "jane", HOME, start), None);
        }
        assert_eq!(
            wrong(&lockout, "jane", HOME, start),
            None,
            "taken, and waits"
        );
        assert_eq!(wrong(&lockout, "jane", HOME, start), Some(FIRST_LOCK));
        let right = lockout.attempt("jane", HOME, start, || Some(()));
        assert_eq!(right, Err(Locked { wait: FIRST_LOCK }), "a right one too");
        let mut now = start + FIRST_LOCK;
        assert_eq!(wrong(&lockout, "jane", HOME, now), None);
        assert_eq!(wrong(&lockout, "jane", HOME, now), Some(FIRST_LOCK * 2));
        for _ in 0..20 {
            now += LONGEST_LOCK;
            assert_eq!(wrong(&lockout, "jane", HOME, now), None);
        }
        assert_eq!(
            wrong(&lockout, "jane", HOME, now),
            Some(LONGEST_LOCK),
            "never longer than the longest"
        );
    }

    #[test]
    fn a_user_name_waits_from_every_address_and_an_address_for_every_user_name() {
        let lockout = Lockout::default();
        let now = Instant::now();
        let other: IpAddr = "2001:db8::1".parse().unwrap();
        for i in 0..=FREE_FAILURES {
            assert_eq!(
                wrong(&lockout, "jane", "192.0.2.9".parse().unwrap(), now),
                None,
                "{i}"
            );
            assert_eq!(wrong(&lockout, &format!("guess-{i}"), HOME, now), None);
        }
        assert!(wrong(&lockout, "jane", other, now).is_some());
        assert!(lockout.attempt("john", HOME, now, || Some(())).is_err());
        assert_eq!(lockout.attempt("john", other, now, || Some(7)), Ok(Some(7)));
    }

    #[test]
    fn a_right_password_clears_the_count_of_its_user_name() {
        let lockout = Lockout::default();
        let now = Instant::now();
        for i in 0..FREE_FAILURES {
            let address = IpAddr::from([10, 0, 0, i as u8]);
            assert_eq!(wrong(&lockout, "jane", address, now), None);
        }
        assert_eq!(
            lockout.attempt("jane", HOME, now, || Some(())),
            Ok(Some(()))
        );
        assert_eq!(
            wrong(&lockout, "jane", "10.0.1.1".parse().unwrap(), now),
            None
        );
        assert_eq!(
            wrong(&lockout, "jane", "10.0.1.2".parse().unwrap(), now),
            None
        );
    }

    #[test]
    fn a_refusal_says_when_to_try_again() {
        let locked = Locked {
            wait: Duration::from_millis(29_200),
        };
        assert_eq!(locked.seconds(), 30);
        assert!(locked.message().contains("try again in 30 seconds (at "));
        assert_eq!(locked.retry_after()[0].1, "30");
    }
}
