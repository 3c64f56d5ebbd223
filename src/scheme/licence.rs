//! Licences: plain identifiers (`ISHARE.0001`, `https://licenses.ishare.eu/...`) or nested
//! `allOf` / `anyOf` expressions, and what a licence expression guarantees.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A licence expression as it appears in `policySets[].target.environment.licenses`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Licence {
    Id(String),
    AllOf {
        #[serde(rename = "allOf")]
        all_of: Vec<Licence>,
    },
    AnyOf {
        #[serde(rename = "anyOf")]
        any_of: Vec<Licence>,
    },
}

impl Licence {
    /// The licence identifiers that hold whichever way the expression is satisfied: an identifier
    /// guarantees itself, `allOf` the union of its members, `anyOf` only what all of its members share.
    pub fn guaranteed(&self) -> BTreeSet<&str> {
        match self {
            Licence::Id(id) => BTreeSet::from([id.as_str()]),
            Licence::AllOf { all_of } => all_of.iter().flat_map(Licence::guaranteed).collect(),
            Licence::AnyOf { any_of } => {
                let mut sets = any_of.iter().map(Licence::guaranteed);
                let first = sets.next().unwrap_or_default();
                sets.fold(first, |acc, s| acc.intersection(&s).copied().collect())
            }
        }
    }

    /// Every identifier the expression mentions, for display.
    pub fn identifiers(&self) -> Vec<&str> {
        match self {
            Licence::Id(id) => vec![id.as_str()],
            Licence::AllOf { all_of: v } | Licence::AnyOf { any_of: v } => {
                v.iter().flat_map(Licence::identifiers).collect()
            }
        }
    }
}

/// The identifiers a list of licences (read as `allOf`) guarantees.
pub fn guaranteed_by(list: &[Licence]) -> BTreeSet<&str> {
    list.iter().flat_map(Licence::guaranteed).collect()
}

/// The first of `required` that `granted` does not guarantee, if any.
pub fn first_missing<'a>(granted: &[Licence], required: &'a [String]) -> Option<&'a str> {
    let have = guaranteed_by(granted);
    required
        .iter()
        .map(String::as_str)
        .find(|r| !have.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_strings_and_nested_expressions_parse_and_round_trip() {
        let v = json!(["ISHARE.0001", {"allOf": ["A", {"anyOf": ["B", "C"]}]}]);
        let parsed: Vec<Licence> = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(parsed[0], Licence::Id("ISHARE.0001".into()));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), v);
    }

    #[test]
    fn any_of_guarantees_only_what_every_branch_holds() {
        let l: Vec<Licence> = serde_json::from_value(json!([
            {"anyOf": [{"allOf": ["A", "B"]}, {"allOf": ["A", "C"]}]}
        ]))
        .unwrap();
        assert_eq!(guaranteed_by(&l), BTreeSet::from(["A"]));
        assert_eq!(first_missing(&l, &["A".into()]), None);
        assert_eq!(first_missing(&l, &["A".into(), "B".into()]), Some("B"));
    }

    #[test]
    fn all_of_guarantees_every_member() {
        let l: Vec<Licence> = serde_json::from_value(json!(["X", {"allOf": ["A", "B"]}])).unwrap();
        assert_eq!(
            first_missing(&l, &["X".into(), "A".into(), "B".into()]),
            None
        );
        assert_eq!(first_missing(&[], &["X".into()]), Some("X"));
    }
}
