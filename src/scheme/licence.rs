//! Licences: plain identifiers (`ISHARE.0001`, `https://licenses.ishare.eu/<name>/<MAJOR.MINOR>`,
//! compared exactly) or nested `allOf` / `anyOf` expressions (2.2 on), and what a licence
//! expression guarantees. An expression that is not one of these is kept as written with its
//! problem: it guarantees nothing, and the policy set that carries it grants nothing.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::fmt;

/// A licence expression as it appears in `policySets[].target.environment.licenses`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Licence {
    Id(String),
    AllOf(Vec<Licence>),
    AnyOf(Vec<Licence>),
    /// No licence expression the scheme defines.
    Unusable {
        written: Value,
        problem: LicenceProblem,
    },
}

/// What makes a licence expression unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LicenceProblem {
    /// Neither text nor an object.
    NotAnExpression,
    /// `allOf` and `anyOf` in one object: which one binds is not said.
    BothLists,
    /// An object without `allOf` or `anyOf`.
    NoList,
    NotAList(&'static str),
    EmptyList(&'static str),
    /// A member no licence expression has.
    UnknownMember(String),
}

impl fmt::Display for LicenceProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LicenceProblem::NotAnExpression => {
                f.write_str("is neither a licence identifier nor an allOf/anyOf object")
            }
            LicenceProblem::BothLists => f.write_str("has both allOf and anyOf"),
            LicenceProblem::NoList => f.write_str("is an object without allOf or anyOf"),
            LicenceProblem::NotAList(m) => write!(f, "has {m}, which is not a list"),
            LicenceProblem::EmptyList(m) => write!(f, "has an empty {m}"),
            LicenceProblem::UnknownMember(m) => {
                write!(f, "has the member {m:?}, which no licence expression has")
            }
        }
    }
}

impl Licence {
    /// Read an expression as written: never fails, an unusable part keeps its problem.
    pub fn read(value: &Value) -> Licence {
        let unusable = |problem| Licence::Unusable {
            written: value.clone(),
            problem,
        };
        let o = match value {
            Value::String(id) => return Licence::Id(id.clone()),
            Value::Object(o) => o,
            _ => return unusable(LicenceProblem::NotAnExpression),
        };
        if let Some(other) = o.keys().find(|k| *k != "allOf" && *k != "anyOf") {
            return unusable(LicenceProblem::UnknownMember(other.clone()));
        }
        let list = |name: &'static str, make: fn(Vec<Licence>) -> Licence| match &o[name] {
            Value::Array(items) if items.is_empty() => unusable(LicenceProblem::EmptyList(name)),
            Value::Array(items) => make(items.iter().map(Licence::read).collect()),
            _ => unusable(LicenceProblem::NotAList(name)),
        };
        match (o.contains_key("allOf"), o.contains_key("anyOf")) {
            (true, true) => unusable(LicenceProblem::BothLists),
            (true, false) => list("allOf", Licence::AllOf),
            (false, true) => list("anyOf", Licence::AnyOf),
            (false, false) => unusable(LicenceProblem::NoList),
        }
    }

    fn to_value(&self) -> Value {
        let list = |name: &str, items: &[Licence]| {
            let mut o = Map::new();
            o.insert(name.into(), items.iter().map(Licence::to_value).collect());
            Value::Object(o)
        };
        match self {
            Licence::Id(id) => Value::String(id.clone()),
            Licence::AllOf(items) => list("allOf", items),
            Licence::AnyOf(items) => list("anyOf", items),
            Licence::Unusable { written, .. } => written.clone(),
        }
    }

    /// Whether the expression is a plain identifier, as 1.9 to 2.1 write every licence.
    pub fn is_identifier(&self) -> bool {
        matches!(self, Licence::Id(_))
    }

    /// The licence identifiers that hold whichever way the expression is satisfied: an identifier
    /// guarantees itself, `allOf` the union of its members, `anyOf` only what all of its members
    /// share, and an expression with an unusable part nothing.
    pub fn guaranteed(&self) -> BTreeSet<&str> {
        if !self.is_usable() {
            return BTreeSet::new();
        }
        match self {
            Licence::Id(id) => BTreeSet::from([id.as_str()]),
            Licence::AllOf(all_of) => all_of.iter().flat_map(Licence::guaranteed).collect(),
            Licence::AnyOf(any_of) => {
                let mut sets = any_of.iter().map(Licence::guaranteed);
                let first = sets.next().unwrap_or_default();
                sets.fold(first, |acc, s| acc.intersection(&s).copied().collect())
            }
            Licence::Unusable { .. } => BTreeSet::new(),
        }
    }

    /// Whether every part of the expression is one the scheme defines.
    pub fn is_usable(&self) -> bool {
        match self {
            Licence::Id(_) => true,
            Licence::AllOf(v) | Licence::AnyOf(v) => v.iter().all(Licence::is_usable),
            Licence::Unusable { .. } => false,
        }
    }

    /// Every identifier the expression mentions.
    pub fn identifiers(&self) -> Vec<&str> {
        match self {
            Licence::Id(id) => vec![id.as_str()],
            Licence::AllOf(v) | Licence::AnyOf(v) => {
                v.iter().flat_map(Licence::identifiers).collect()
            }
            Licence::Unusable { .. } => Vec::new(),
        }
    }

    /// The first unusable part, with its place below `at`.
    pub fn unusable(&self, at: String) -> Option<(String, &LicenceProblem)> {
        match self {
            Licence::Id(_) => None,
            Licence::AllOf(v) | Licence::AnyOf(v) => {
                let name = match self {
                    Licence::AllOf(_) => "allOf",
                    _ => "anyOf",
                };
                v.iter()
                    .enumerate()
                    .find_map(|(i, l)| l.unusable(format!("{at}.{name}[{i}]")))
            }
            Licence::Unusable { problem, .. } => Some((at, problem)),
        }
    }
}

impl Serialize for Licence {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Licence {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Licence::read(&Value::deserialize(d)?))
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

/// For each required licence, the index of the first expression of `list` that guarantees it.
pub fn granting(list: &[Licence], required: &[String]) -> Vec<usize> {
    let mut places: Vec<usize> = required
        .iter()
        .filter_map(|r| {
            list.iter()
                .position(|l| l.guaranteed().contains(r.as_str()))
        })
        .collect();
    places.sort_unstable();
    places.dedup();
    places
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Vec<Licence> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn plain_strings_and_nested_expressions_parse_and_round_trip() {
        let v = json!(["ISHARE.0001", {"allOf": ["A", {"anyOf": ["B", "C"]}]}]);
        let parsed = read(v.clone());
        assert_eq!(parsed[0], Licence::Id("ISHARE.0001".into()));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), v);
    }

    #[test]
    fn any_of_guarantees_only_what_every_branch_holds() {
        let l = read(json!([{"anyOf": [{"allOf": ["A", "B"]}, {"allOf": ["A", "C"]}]}]));
        assert_eq!(guaranteed_by(&l), BTreeSet::from(["A"]));
        assert_eq!(first_missing(&l, &["A".into()]), None);
        assert_eq!(first_missing(&l, &["A".into(), "B".into()]), Some("B"));
    }

    #[test]
    fn all_of_guarantees_every_member() {
        let l = read(json!(["X", {"allOf": ["A", "B"]}]));
        let required = ["X".into(), "A".into(), "B".into()];
        assert_eq!(first_missing(&l, &required), None);
        assert_eq!(granting(&l, &required), [0, 1]);
        assert_eq!(first_missing(&[], &["X".into()]), Some("X"));
    }

    #[test]
    fn versioned_identifiers_compare_exactly() {
        let l = read(json!([
            "https://licenses.ishare.eu/general-internal-use/1.0"
        ]));
        for other in [
            "https://licenses.ishare.eu/general-internal-use/1.1",
            "https://licenses.ishare.eu/general-internal-use/1.0/",
            "https://licenses.ishare.eu/General-Internal-Use/1.0",
            "https://licenses.ishare.eu/general/internal-use/1.0",
        ] {
            assert_eq!(first_missing(&l, &[other.into()]), Some(other));
        }
    }

    #[test]
    fn expressions_that_are_not_the_schemes_guarantee_nothing_and_keep_what_was_written() {
        for (written, problem) in [
            (
                json!({"allOf": ["A"], "anyOf": ["A"]}),
                LicenceProblem::BothLists,
            ),
            (json!({"allOf": []}), LicenceProblem::EmptyList("allOf")),
            (json!({"anyOf": "A"}), LicenceProblem::NotAList("anyOf")),
            (
                json!({"allOf": ["A"], "note": "x"}),
                LicenceProblem::UnknownMember("note".into()),
            ),
            (json!({}), LicenceProblem::NoList),
            (json!(7), LicenceProblem::NotAnExpression),
        ] {
            let l = read(json!([{"allOf": ["A", written.clone()]}]));
            assert_eq!(first_missing(&l, &["A".into()]), Some("A"), "{written}");
            let (at, found) = l[0].unusable("licenses[0]".into()).unwrap();
            assert_eq!((at.as_str(), found), ("licenses[0].allOf[1]", &problem));
            assert_eq!(
                serde_json::to_value(&l).unwrap(),
                json!([{"allOf": ["A", written]}])
            );
        }
    }
}
