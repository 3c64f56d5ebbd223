//! The characters a value a rule reads may hold, one rule for the path, the query, headers, the
//! body and AuthZEN: never a control character (C0, DEL, C1: a backend that trims, or stops at a
//! NUL, reads another value), and no character that shows nothing (white space beyond ASCII,
//! format characters, default-ignorable code points) unless a route accepts it. The classes come
//! from the Unicode character database (ICU4X), not a table of our own.

use icu_properties::props::{DefaultIgnorableCodePoint, GeneralCategory, WhiteSpace};
use icu_properties::{CodePointMapData, CodePointSetData};

/// A control character: C0 (with tab, CR and LF), DEL or C1.
pub fn is_control(c: char) -> bool {
    c.is_control()
}

/// Whether a value holds a control character.
pub fn has_control(value: &str) -> bool {
    value.chars().any(is_control)
}

/// A character beyond ASCII that shows nothing: white space (NBSP, U+2028, the ideographic
/// space), a format character (zero-width, bidirectional controls, the soft hyphen, tags) or a
/// default-ignorable code point (variation selectors, Hangul fillers).
pub fn is_invisible(c: char) -> bool {
    !c.is_ascii()
        && (CodePointSetData::new::<WhiteSpace>().contains(c)
            || CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
            || CodePointMapData::<GeneralCategory>::new().get(c) == GeneralCategory::Format)
}

#[cfg(test)]
mod tests {
    use super::{has_control, is_invisible};

    #[test]
    fn controls_are_c0_del_and_c1() {
        for control in [
            "\0", "\t", "\r", "\n", "\u{1}", "\u{7F}", "\u{85}", "\u{9F}",
        ] {
            assert!(has_control(&format!("SECRET-1{control}")), "{control:?}");
        }
        assert!(!has_control("SECRET-1 é\u{A0}"));
    }

    #[test]
    fn characters_that_show_nothing_are_invisible() {
        for c in [
            '\u{A0}',
            '\u{AD}',
            '\u{34F}',
            '\u{61C}',
            '\u{115F}',
            '\u{180E}',
            '\u{200B}',
            '\u{200D}',
            '\u{200E}',
            '\u{2028}',
            '\u{2029}',
            '\u{202E}',
            '\u{2060}',
            '\u{2066}',
            '\u{3000}',
            '\u{3164}',
            '\u{FE0F}',
            '\u{FEFF}',
            '\u{FFA0}',
            '\u{E0041}',
            '\u{1D173}',
        ] {
            assert!(is_invisible(c), "U+{:04X}", c as u32);
        }
        for c in ['a', ' ', 'é', 'Ｓ', '中', '\u{1F600}'] {
            assert!(!is_invisible(c), "U+{:04X}", c as u32);
        }
    }
}
