//! The scheme's formats and rules as pure code: no I/O, and the current time is always a parameter.

/// Defines `code()` for an error type from one table of arms — a reason code, or (under `nested`) a
/// variant whose inner error gives the code — and `codes()`, every code `code()` can give. A code is
/// a stable, bounded label for answers, logs and metrics; `codes()` lets tests hold the
/// documentation to all of them.
macro_rules! reason_codes {
    ($ty:ident { $($pat:pat => $code:literal,)* } $(nested { $($npat:pat => $inner:ident: $ity:ty,)* })?) => {
        impl $ty {
            /// A stable, bounded label for answers, logs and metrics.
            pub fn code(&self) -> &'static str {
                match self {
                    $($pat => $code,)*
                    $($($npat => $inner.code(),)*)?
                }
            }

            /// Every code [`Self::code`] can give.
            pub fn codes() -> Vec<&'static str> {
                #[allow(unused_mut)]
                let mut all = vec![$($code),*];
                $($(all.extend(<$ity>::codes());)*)?
                all
            }
        }
    };
}
pub(crate) use reason_codes;

/// Where the pieces of `haystack` between `separator`s lie (empty ones too). The values split
/// here are kilobytes long: memchr scans them with vector instructions, where `str::split` goes
/// a word at a time.
pub fn pieces(haystack: &[u8], separator: u8) -> impl Iterator<Item = Range<usize>> + '_ {
    memchr::memchr_iter(separator, haystack)
        .chain(std::iter::once(haystack.len()))
        .scan(0, |start, end| {
            let piece = *start..end;
            *start = end + 1;
            Some(piece)
        })
}

/// Whether two names have the same letters and digits, in any case, whatever else they hold: as
/// a backend reads header names that it folds or drops every other character of (CGI, WSGI and
/// Rack read `X_Forwarded_For` as `X-Forwarded-For`; a framework mapping headers to names reads
/// `delegationEvidence` as `delegation_evidence`), and as a careless producer may spell a member.
pub fn same_letters(a: &str, b: &str) -> bool {
    letters(a).eq(letters(b))
}

/// What [`same_letters`] compares of a name: its letters and digits, in lower case.
pub fn letters(s: &str) -> impl Iterator<Item = u8> + '_ {
    s.bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
}

pub mod assertion;
pub mod capabilities;
pub mod condition;
pub mod evaluation;
pub mod evidence;
pub mod evidence_token;
pub mod jwe;
pub mod jwt;
pub mod licence;
pub mod mask;
pub mod models;
pub mod openid;
pub mod party;
pub mod party_record;
pub mod terms;
pub mod trust;
pub mod verdict;
pub mod version;
pub mod vocabulary;

use std::ops::Range;
use std::time::{SystemTime, UNIX_EPOCH};

/// A point in time as seconds since the Unix epoch.
///
/// Sub-second precision is kept because real clients send fractional NumericDates
/// (`iat = time.time()`), and comparing those against a truncated clock would be off by up to a second.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Timestamp(f64);

impl Timestamp {
    /// The current wall-clock time. The only place the scheme core may read the clock is its callers.
    pub fn now() -> Self {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(since.as_secs_f64())
    }

    pub fn from_secs(secs: i64) -> Self {
        Timestamp(secs as f64)
    }

    pub fn from_secs_f64(secs: f64) -> Self {
        Timestamp(secs)
    }

    /// Whole seconds, rounded down: the unit of every integer time field of the scheme.
    pub fn secs(self) -> i64 {
        self.0.floor() as i64
    }

    pub fn as_f64(self) -> f64 {
        self.0
    }

    pub fn plus_secs(self, secs: f64) -> Self {
        Timestamp(self.0 + secs)
    }
}
