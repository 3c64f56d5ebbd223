//! Numbers as text (a condition's operands, the values a rule takes from a request): read in
//! JSON's grammar, exactly, with a bounded exponent, and compared only where the three ways
//! backends read a number agree: as an exact decimal (Java's `BigDecimal`, Python's `Decimal`,
//! databases), as the nearest binary64 (JavaScript, Go's `float64`, most JSON binders), and as
//! its leading integer (`parseInt`, Ruby's `to_i`, C's `strtol`: `5000e-1` is 5000). Where they
//! disagree (`0.1` and `0.10000000000000000001`, `9007199254740993` and `9007199254740992`,
//! `5000e-1` and `1000`) no order is given: a decision made on one reading would be wrong for
//! another. Nothing here can overflow: the exponent is bounded before any arithmetic.

use std::cmp::Ordering;

/// The longest number read: longer text is no number.
pub const MAX_LEN: usize = 64;

/// The largest exponent written (`1e1000000`); beyond it, text is no number. Every place of a
/// digit then fits an i64 many times over.
pub const MAX_EXPONENT: i64 = 1_000_000;

/// The largest integer every binary64 reader reads exactly (RFC 7493, I-JSON §2.2: 2⁵³ − 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A number as an exact decimal: its sign, its significant digits (no leading or trailing zeros;
/// none for zero) and the power of ten of the last of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
}

impl Decimal {
    /// A number in JSON's grammar (`-12.5e3`), at most MAX_LEN long with an exponent of at most
    /// MAX_EXPONENT either way; None for anything else (`inf`, `0x10`, ` 5`, `+5`, `05`, `.5`).
    pub fn parse(s: &str) -> Option<Decimal> {
        if s.len() > MAX_LEN {
            return None;
        }
        let b = s.as_bytes();
        let mut i = 0;
        let digits_from = |i: &mut usize| {
            let start = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            &b[start..*i]
        };
        let negative = b.first() == Some(&b'-');
        i += usize::from(negative);
        let int = digits_from(&mut i);
        if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
            return None;
        }
        let mut fraction: &[u8] = &[];
        if b.get(i) == Some(&b'.') {
            i += 1;
            fraction = digits_from(&mut i);
            if fraction.is_empty() {
                return None;
            }
        }
        let mut written: i64 = 0;
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            let negative_power = b.get(i) == Some(&b'-');
            i += usize::from(matches!(b.get(i), Some(b'-' | b'+')));
            let power = digits_from(&mut i);
            if power.is_empty() {
                return None;
            }
            // Leading zeros do not count towards the bound; anything past it is no number.
            let mut significant = power.iter().skip_while(|d| **d == b'0');
            written = significant.try_fold(0i64, |at, d| {
                Some(at * 10 + i64::from(d - b'0')).filter(|at| *at <= MAX_EXPONENT)
            })?;
            if negative_power {
                written = -written;
            }
        }
        if i != b.len() {
            return None;
        }
        let mut digits: Vec<u8> = int.iter().chain(fraction).map(|d| d - b'0').collect();
        // Both terms are bounded (MAX_EXPONENT, MAX_LEN): no overflow.
        let mut exponent = written - fraction.len() as i64;
        let leading = digits.iter().take_while(|d| **d == 0).count();
        digits.drain(..leading);
        while digits.last() == Some(&0) {
            digits.pop();
            exponent += 1;
        }
        Some(match digits.is_empty() {
            true => Decimal {
                negative: false,
                digits,
                exponent: 0,
            },
            false => Decimal {
                negative,
                digits,
                exponent,
            },
        })
    }

    fn sign(&self) -> i8 {
        match (self.digits.is_empty(), self.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    /// The exact order of two decimals.
    pub fn cmp_exact(&self, other: &Decimal) -> Ordering {
        let by_sign = self.sign().cmp(&other.sign());
        if by_sign != Ordering::Equal || self.sign() == 0 {
            return by_sign;
        }
        // The place of the most significant digit (bounded by MAX_LEN + MAX_EXPONENT), then the
        // digits from there on.
        let top = |d: &Decimal| d.digits.len() as i64 + d.exponent;
        let magnitude = top(self)
            .cmp(&top(other))
            .then_with(|| self.digits.cmp(&other.digits));
        match self.negative {
            true => magnitude.reverse(),
            false => magnitude,
        }
    }
}

/// Whether some common reader takes `text` for a number, though JSON may not: JavaScript's
/// `Number()` and `parseInt`, Python's `float()` and `int()`, Go's `ParseFloat` accept a sign,
/// leading zeros, a bare `.5` or `5.`, white space at the edges, `_` between digits, `0x`, `0o`
/// and `0b` integers, `inf`, `infinity` and `nan`. Two such texts that differ are told apart by
/// their text only where both are JSON numbers the two readers order apart (`compare`).
pub fn looks_like_number(text: &str) -> bool {
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let t = t.strip_prefix(['+', '-']).unwrap_or(t);
    if ["inf", "infinity", "nan"]
        .iter()
        .any(|w| t.eq_ignore_ascii_case(w))
    {
        return true;
    }
    let prefixed = |digit: fn(&char) -> bool| {
        move |rest: &str| !rest.is_empty() && rest.chars().all(|c| c == '_' || digit(&c))
    };
    for (prefix, digits) in [
        ("0x", prefixed(char::is_ascii_hexdigit)),
        ("0o", prefixed(|c| ('0'..='7').contains(c))),
        ("0b", prefixed(|c| matches!(c, '0' | '1'))),
    ] {
        if let Some(rest) = t.get(..2).filter(|p| p.eq_ignore_ascii_case(prefix)) {
            return digits(&t[rest.len()..]);
        }
    }
    let (mantissa, exponent) = match t.find(['e', 'E']) {
        Some(at) => (&t[..at], Some(&t[at + 1..])),
        None => (t, None),
    };
    let mantissa_ok = mantissa.chars().any(|c| c.is_ascii_digit())
        && mantissa.matches('.').count() <= 1
        && mantissa
            .chars()
            .all(|c| c.is_ascii_digit() || c == '_' || c == '.');
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit() || c == '_')
    });
    mantissa_ok && exponent_ok
}

/// The nearest binary64 of a number `Decimal::parse` reads (Rust's parse rounds correctly; an
/// exponent beyond binary64's range gives an infinity or zero, as a JSON binder's would).
fn binary64(text: &str) -> f64 {
    text.parse().unwrap_or(f64::NAN)
}

/// The leading integer of a number `Decimal::parse` reads: its sign and the digits before any
/// `.`, `e` or `E`, as a reader that stops there takes it.
fn leading_integer(text: &str) -> Option<Decimal> {
    let end = text.find(['.', 'e', 'E']).unwrap_or(text.len());
    Decimal::parse(&text[..end])
}

/// A value a backend reads compared with a constant the gateway holds (a condition's right
/// operand), where both are numbers `Decimal::parse` reads and every reader of the value orders
/// it alike against the constant: as an exact decimal, as binary64 (beside the constant's
/// binary64), and as its leading integer. None otherwise.
pub fn compare(value: &str, constant: &str) -> Option<Ordering> {
    let constant_exact = Decimal::parse(constant)?;
    let exact = Decimal::parse(value)?.cmp_exact(&constant_exact);
    let nearest = binary64(value).partial_cmp(&binary64(constant))?;
    let leading = leading_integer(value)?.cmp_exact(&constant_exact);
    (exact == nearest && exact == leading).then_some(exact)
}

/// Whether `text` is a number every reader reads as the same number: its exact decimal and the
/// shortest decimal of its nearest binary64 are one number (`0.1`, `2.5e-3`, `100`; not
/// `0.10000000000000000001`, `9007199254740993`, `1e400`).
pub fn reads_alike(text: &str) -> bool {
    reads_as(text, binary64(text))
}

/// Whether `text` is the finite binary64 `read`, written as its shortest decimal (in any of the
/// ways JSON writes that decimal). Where two decimals as short are as near to `read`, writers
/// choose differently (Rust's formatting one, serde_json's and JavaScript's the other, as
/// `666666606266666.3` and `.2` for `666666606266666.25`): such a number is no one decimal,
/// and reads alike to none.
pub fn reads_as(text: &str, read: f64) -> bool {
    if !read.is_finite() {
        return false;
    }
    let written = Decimal::parse(text);
    let rust = Decimal::parse(&format!("{read:e}"));
    let serde_json = Decimal::parse(ryu::Buffer::new().format_finite(read));
    written.is_some() && written == rust && written == serde_json
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap_or_else(|| panic!("{s} is a number"))
    }

    #[test]
    fn json_numbers_are_read_exactly() {
        assert_eq!(d("100"), d("1e2"));
        assert_eq!(d("100"), d("1.00E+2"));
        assert_eq!(d("0"), d("-0.0e5"));
        assert_eq!(d("0.5"), d("5e-1"));
        for not_json in [
            "", "-", "+5", "05", ".5", "5.", "1e", "1e+", "0x10", "inf", "NaN", " 5", "5 ", "1_0",
            "--1", "1e--1",
        ] {
            assert_eq!(Decimal::parse(not_json), None, "{not_json:?}");
        }
        assert_eq!(Decimal::parse(&"1".repeat(MAX_LEN + 1)), None);
    }

    #[test]
    fn text_that_some_reader_takes_for_a_number_looks_like_one() {
        for number in [
            "0",
            "00",
            "+5",
            "-0.5",
            ".5",
            "5.",
            " 7 ",
            "1_000",
            "0x1F",
            "0o17",
            "0B101",
            "inf",
            "-Infinity",
            "NaN",
            "1e5",
            "1E+05",
            "0000000000091953e-333600",
        ] {
            assert!(looks_like_number(number), "{number:?}");
        }
        for text in [
            "",
            "C1",
            "AB12",
            "0x",
            "1e",
            "1.2.3",
            "12a",
            "2026-03-01T10:00:00Z",
            "-",
            ".",
        ] {
            assert!(!looks_like_number(text), "{text:?}");
        }
    }

    #[test]
    fn an_exponent_past_the_bound_is_no_number_and_nothing_wraps() {
        for huge in [
            "1e9223372036854775807",
            "1E9223372036854775807",
            "9.9e9223372036854775807",
            "10e9223372036854775806",
            "1e-9223372036854775808",
            "1e99999999999999999999999999",
            "1e1000001",
        ] {
            assert_eq!(Decimal::parse(huge), None, "{huge}");
            assert_eq!(compare(huge, "1000"), None, "{huge}");
        }
        assert!(Decimal::parse("1e1000000").is_some());
        assert!(Decimal::parse("1e-0000000000000000000000000000001000000").is_some());
        assert_eq!(d("1e1000000").cmp_exact(&d("9")), Ordering::Greater);
    }

    #[test]
    fn numbers_are_compared_where_every_reader_agrees() {
        assert_eq!(compare("999", "1000"), Some(Ordering::Less));
        assert_eq!(compare("-1000", "-999"), Some(Ordering::Less));
        assert_eq!(compare("100", "1e2"), Some(Ordering::Equal));
        assert_eq!(compare("0", "0.1"), Some(Ordering::Less));
        // The value's spelling counts where a reader of it stops at its leading integer.
        assert_eq!(compare("1e2", "100"), None);
        assert_eq!(compare("0.10", "0.1"), None);
        // Past binary64's range the readers of whole numbers disagree: 1e400 is 1 to parseInt.
        assert_eq!(compare("1e400", "1000"), None);
        assert_eq!(compare("2000e0", "1000"), Some(Ordering::Greater));
        // A leading-integer reader takes 5000e-1 for 5000, 5.5 for 5.
        assert_eq!(compare("5000e-1", "1000"), None);
        assert_eq!(compare("5.5", "5"), None);
        assert_eq!(compare("999.5", "1000"), Some(Ordering::Less));
        assert_eq!(compare("-0.5", "0"), None);
        // Where binary64 rounds two numbers together, there is no order.
        assert_eq!(compare("0.099999999999999999995", "0.1"), None);
        assert_eq!(compare("9007199254740993", "9007199254740992"), None);
        assert_eq!(
            compare("18446744073709551617", "18446744073709552000"),
            None
        );
        assert_eq!(compare("1e-400", "0"), None);
        assert_eq!(compare("abc", "1"), None);
    }

    #[test]
    fn a_number_reads_alike_when_binary64_writes_it_back() {
        for alike in ["0.1", "2.5e-3", "100", "-0", "5e-324", "1.5E+300"] {
            assert!(reads_alike(alike), "{alike}");
        }
        // Exact in binary64, but written back as 1152921504606847000: another decimal.
        for not in [
            "1152921504606846976.0",
            "0.10000000000000000001",
            "9007199254740993",
            "1e400",
            "1e-400",
            "0.09999999999999999999",
            // Halfway between two decimals as short: Rust writes .3, serde_json .2.
            "666666606266666.3",
            "666666606266666.2",
        ] {
            assert!(!reads_alike(not), "{not}");
        }
    }
}
