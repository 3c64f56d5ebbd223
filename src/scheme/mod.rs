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

/// Names looked up by [`same_letters`], each with a value: a name asked about is folded once, on
/// the stack and no further than the longest name held, and looked up by hash only when a name
/// held has as many letters.
#[derive(Clone, Debug)]
pub struct LetterMap<V> {
    entries: HashMap<Box<[u8]>, V, foldhash::fast::FixedState>,
    /// The most letters a name held has.
    longest: usize,
    /// Bit n set: a name held has n letters (bit 63: 63 or more).
    lengths: u64,
}

/// A name is folded on the stack while no name held has more letters than this (configured
/// header names); past it, each lookup folds into an allocation of the longest's size.
const FOLDED_ON_STACK: usize = 64;

impl<V> LetterMap<V> {
    /// The map of `names`, values of names with the same letters merged by `merge`.
    pub fn new<'a>(
        names: impl IntoIterator<Item = (&'a str, V)>,
        merge: impl Fn(&mut V, V),
    ) -> Self {
        let mut entries: HashMap<Box<[u8]>, V, _> = HashMap::default();
        for (name, value) in names {
            match entries.entry(letters(name).collect()) {
                Entry::Occupied(mut held) => merge(held.get_mut(), value),
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
            }
        }
        let longest = entries.keys().map(|h| h.len()).max().unwrap_or(0);
        let lengths = entries
            .keys()
            .fold(0, |bits, h| bits | 1 << h.len().min(63));
        LetterMap {
            entries,
            longest,
            lengths,
        }
    }

    /// The value of the name held with the same letters as `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        // Room for one letter more than the longest name held: each byte is written, and counts
        // only if it is a letter or digit.
        let mut stack = [0u8; FOLDED_ON_STACK + 1];
        let mut heap = Vec::new();
        let room: &mut [u8] = match self.longest <= FOLDED_ON_STACK {
            true => &mut stack[..=self.longest],
            false => {
                heap.resize(self.longest + 1, 0);
                &mut heap
            }
        };
        let mut n = 0;
        for &b in name.as_bytes() {
            let c = FOLDED[usize::from(b)];
            // More letters than any name held has: none is the same.
            *room.get_mut(n)? = c;
            n += usize::from(c != 0);
        }
        if n > self.longest || self.lengths & 1 << n.min(63) == 0 {
            return None;
        }
        self.entries.get(&room[..n])
    }
}

/// Each byte as [`letters`] keeps it: a letter or digit in lower case, anything else 0.
static FOLDED: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            table[b] = c.to_ascii_lowercase();
        }
        b += 1;
    }
    table
};

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

use std::collections::hash_map::{Entry, HashMap};
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Header-name characters and a few more, so that folds and near misses are common.
    fn name() -> impl Strategy<Value = String> {
        proptest::string::string_regex("[aAbB3xX_.-]{0,12}").expect("a valid pattern")
    }

    proptest! {
        /// The map finds what a search by `same_letters` finds, and merges values as told.
        #[test]
        fn a_letter_map_finds_what_same_letters_finds(
            held in proptest::collection::vec(name(), 0..8),
            asked in name(),
        ) {
            let map = LetterMap::new(held.iter().map(|h| (h.as_str(), 1usize)), |v, w| *v += w);
            let same = held.iter().filter(|h| same_letters(h, &asked)).count();
            prop_assert_eq!(map.get(&asked).copied().unwrap_or(0), same);
        }
    }

    #[test]
    fn a_letter_map_folds_names_longer_than_the_stack_holds() {
        let long = "x-".repeat(FOLDED_ON_STACK + 1);
        let map = LetterMap::new([(long.as_str(), ()), ("b3", ())], |_, _| {});
        assert!(map.get(&"X_".repeat(FOLDED_ON_STACK + 1)).is_some());
        assert!(map.get(&"x".repeat(FOLDED_ON_STACK)).is_none());
        assert!(map.get(&"x".repeat(FOLDED_ON_STACK + 2)).is_none());
        assert!(map.get("B-3").is_some());
        assert!(map.get("").is_none());
    }

    #[test]
    fn an_empty_letter_map_holds_nothing() {
        let map: LetterMap<()> = LetterMap::new([], |_, _| {});
        assert!(map.get("").is_none());
        assert!(map.get("b3").is_none());
    }
}
