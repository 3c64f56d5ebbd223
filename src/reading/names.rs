//! When two member names are one name: where any common JSON binder would bind them to the same
//! field. Go's `encoding/json` folds names by Unicode's simple case folding (`ſ` is `s`, the
//! Kelvin sign `k`); .NET's `OrdinalIgnoreCase` and Java's `equalsIgnoreCase` compare simple
//! upper-case mappings (`ı` is `I`), Jackson lower-cases (`İ` is `i` in the root locale's simple
//! mapping, `I` is `ı` in a Turkish one). The binding key is coarser than each of them: every
//! character's simple upper-case then simple lower-case mapping, then Unicode's full case
//! folding (`ß` is `ss`), from the Unicode character database (ICU4X), not a table of our own.

use icu_casemap::CaseMapper;
use std::borrow::Cow;

/// The key a case-insensitive binder reads `name` under: two names with one key are one name.
pub fn binding_key(name: &str) -> Cow<'_, str> {
    if name.is_ascii() {
        return match name.bytes().any(|b| b.is_ascii_uppercase()) {
            true => Cow::Owned(name.to_ascii_lowercase()),
            false => Cow::Borrowed(name),
        };
    }
    let case = CaseMapper::new();
    let mapped: String = name
        .chars()
        .map(|c| case.simple_lowercase(case.simple_uppercase(c)))
        .collect();
    Cow::Owned(case.fold_string(&mapped).into_owned())
}

/// Whether a binder could bind `a` and `b` to one field.
pub fn same_name(a: &str, b: &str) -> bool {
    a == b || binding_key(a) == binding_key(b)
}

#[cfg(test)]
mod tests {
    use super::{binding_key, same_name};
    use proptest::prelude::*;

    #[test]
    fn names_binders_fold_together_are_one_name() {
        // Go (simple folding), .NET and Java (simple upper case), Jackson (lower case, also in a
        // Turkish locale), and full folding.
        for (a, b) in [
            ("sku", "ſku"),
            ("sku", "SKU"),
            ("kind", "\u{212A}ind"),
            ("id", "ıd"),
            ("ID", "ıd"),
            ("id", "İd"),
            ("angstrom\u{212B}", "ANGSTROM\u{00E5}"),
            ("µ", "μ"),
            ("strasse", "straße"),
            ("secret", "SECRET"),
        ] {
            assert!(same_name(a, b), "{a:?} and {b:?}");
        }
        for (a, b) in [("id", "ids"), ("sku", "skü"), ("a-b", "a_b"), ("s", "5")] {
            assert!(!same_name(a, b), "{a:?} and {b:?}");
        }
    }

    #[test]
    fn an_ascii_name_in_lower_case_is_its_own_key() {
        assert!(matches!(
            binding_key("temp"),
            std::borrow::Cow::Borrowed("temp")
        ));
        assert_eq!(binding_key("Temp"), "temp");
    }

    proptest! {
        /// Whatever the name, its upper- and lower-case forms (as Rust writes them) bind with it,
        /// and the key is a fixed point: the key of a key is itself.
        #[test]
        fn a_name_binds_with_its_own_cases(name in "\\PC{0,12}") {
            let key = binding_key(&name).into_owned();
            prop_assert_eq!(binding_key(&key).into_owned(), key.clone());
            let single_char_cases = name.chars().all(|c| {
                c.to_uppercase().count() == 1 && c.to_lowercase().count() == 1
            });
            if single_char_cases {
                prop_assert!(same_name(&name, &name.to_uppercase()));
                prop_assert!(same_name(&name, &name.to_lowercase()));
            }
        }
    }
}
