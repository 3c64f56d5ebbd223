//! Conditions (3.0, RFC055): a tree of `anyOf`/`allOf` over comparisons of a value the service
//! provider knows about the request (`leftOperand`, declared by the route) with a constant
//! (`rightOperand`). A tree is read as written and keeps what makes a part of it unusable; it
//! holds only when every part of it can be evaluated and it is true on the route's values. The
//! scheme does not say what a service provider must do with a condition it cannot evaluate:
//! here it never holds.

use crate::reading::number;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// The values a route declares for left operands: the request's value, or None when the request
/// does not give it.
pub type Operands = BTreeMap<String, Option<String>>;

/// A condition tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    AnyOf(Vec<Condition>),
    AllOf(Vec<Condition>),
    Compare(Comparison),
    /// A part that is no condition the scheme defines, kept as written.
    Unusable {
        written: Value,
        problem: Problem,
    },
}

/// A leaf: `leftOperand` `operator` `rightOperand`.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub left: String,
    pub operator: Operator,
    pub right: Operand,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    Equal,
    NotEqual,
    GreaterThan,
    LessThan,
}

impl Operator {
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Equal => "equal",
            Operator::NotEqual => "notEqual",
            Operator::GreaterThan => "greaterThan",
            Operator::LessThan => "lessThan",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            Operator::Equal,
            Operator::NotEqual,
            Operator::GreaterThan,
            Operator::LessThan,
        ]
        .into_iter()
        .find(|o| o.as_str() == text)
    }
}

/// A `rightOperand`: text (the schema's type), or a JSON number, compared as a number.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Text(String),
    Number(Number),
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Text(t) => write!(f, "{t:?}"),
            Operand::Number(n) => write!(f, "{n}"),
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.left, self.operator.as_str(), self.right)
    }
}

/// What makes a part of a tree unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    NotAnObject,
    /// Neither a comparison nor `anyOf`/`allOf`.
    Empty,
    /// Comparison members and `anyOf`/`allOf` in one object.
    LeafAndTree,
    /// `anyOf` and `allOf` in one object: which one binds is not said.
    BothLists,
    NotAList(&'static str),
    EmptyList(&'static str),
    /// A comparison without this member.
    Incomplete(&'static str),
    /// `leftOperand` or `operator` is not text.
    NotText(&'static str),
    /// A member no condition has.
    UnknownMember(String),
    UnknownOperator(String),
    /// A `rightOperand` that is neither text nor a number.
    OperandType(&'static str),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::NotAnObject => f.write_str("is not an object"),
            Problem::Empty => f.write_str("is neither a comparison nor anyOf/allOf"),
            Problem::LeafAndTree => {
                f.write_str("mixes a comparison (leftOperand, operator, rightOperand) with anyOf/allOf")
            }
            Problem::BothLists => f.write_str("has both anyOf and allOf"),
            Problem::NotAList(m) => write!(f, "has {m}, which is not a list"),
            Problem::EmptyList(m) => write!(f, "has an empty {m}"),
            Problem::Incomplete(m) => write!(f, "is a comparison without {m}"),
            Problem::NotText(m) => write!(f, "has a {m} that is not text"),
            Problem::UnknownMember(m) => write!(f, "has the member {m:?}, which no condition has"),
            Problem::UnknownOperator(o) => write!(
                f,
                "has the operator {o:?}; the operators are equal, notEqual, greaterThan and lessThan"
            ),
            Problem::OperandType(t) => write!(f, "compares with a rightOperand of type {t}, neither text nor a number"),
        }
    }
}

const LEAF: [&str; 3] = ["leftOperand", "operator", "rightOperand"];

impl Condition {
    /// Read a tree as written: never fails, an unusable part keeps its problem.
    pub fn read(value: &Value) -> Condition {
        let unusable = |problem| Condition::Unusable {
            written: value.clone(),
            problem,
        };
        let Value::Object(o) = value else {
            return unusable(Problem::NotAnObject);
        };
        if let Some(other) = o
            .keys()
            .find(|k| !LEAF.contains(&k.as_str()) && *k != "anyOf" && *k != "allOf")
        {
            return unusable(Problem::UnknownMember(other.clone()));
        }
        let lists = (o.get("anyOf"), o.get("allOf"));
        let leaf = LEAF.iter().any(|m| o.contains_key(*m));
        match lists {
            (Some(_), Some(_)) => unusable(Problem::BothLists),
            (Some(_), None) | (None, Some(_)) if leaf => unusable(Problem::LeafAndTree),
            (Some(list), None) => {
                Self::list(list, "anyOf", Condition::AnyOf).unwrap_or_else(unusable)
            }
            (None, Some(list)) => {
                Self::list(list, "allOf", Condition::AllOf).unwrap_or_else(unusable)
            }
            (None, None) if !leaf => unusable(Problem::Empty),
            (None, None) => Self::comparison(o).map_or_else(unusable, Condition::Compare),
        }
    }

    fn list(
        value: &Value,
        name: &'static str,
        make: fn(Vec<Condition>) -> Condition,
    ) -> Result<Condition, Problem> {
        match value {
            Value::Array(items) if items.is_empty() => Err(Problem::EmptyList(name)),
            Value::Array(items) => Ok(make(items.iter().map(Condition::read).collect())),
            _ => Err(Problem::NotAList(name)),
        }
    }

    fn comparison(o: &Map<String, Value>) -> Result<Comparison, Problem> {
        let text = |name: &'static str| match o.get(name) {
            None => Err(Problem::Incomplete(name)),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(Problem::NotText(name)),
        };
        let left = text("leftOperand")?;
        let operator = text("operator")?;
        let operator = Operator::parse(&operator).ok_or(Problem::UnknownOperator(operator))?;
        let right = match o.get("rightOperand") {
            None => return Err(Problem::Incomplete("rightOperand")),
            Some(Value::String(s)) => Operand::Text(s.clone()),
            Some(Value::Number(n)) => Operand::Number(n.clone()),
            Some(other) => return Err(Problem::OperandType(json_type(other))),
        };
        Ok(Comparison {
            left,
            operator,
            right,
        })
    }

    fn to_value(&self) -> Value {
        let list = |name: &str, items: &[Condition]| {
            let mut o = Map::new();
            o.insert(name.into(), items.iter().map(Condition::to_value).collect());
            Value::Object(o)
        };
        match self {
            Condition::AnyOf(items) => list("anyOf", items),
            Condition::AllOf(items) => list("allOf", items),
            Condition::Compare(c) => {
                let right = match &c.right {
                    Operand::Text(t) => Value::String(t.clone()),
                    Operand::Number(n) => Value::Number(n.clone()),
                };
                serde_json::json!({
                    "leftOperand": c.left,
                    "operator": c.operator.as_str(),
                    "rightOperand": right,
                })
            }
            Condition::Unusable { written, .. } => written.clone(),
        }
    }

    /// Whether the tree holds on `operands`; `at` names the tree (`rules[0].conditions`). Every
    /// part must be evaluable, whatever the others come to; then the tree must be true.
    pub fn check(&self, at: &str, operands: &Operands) -> Result<(), ConditionFailure> {
        self.evaluable(at.to_string(), operands)?;
        self.truth(at.to_string(), operands)
    }

    fn evaluable(&self, at: String, operands: &Operands) -> Result<(), ConditionFailure> {
        match self {
            Condition::AnyOf(items) | Condition::AllOf(items) => {
                let name = self.list_name();
                items
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, c)| c.evaluable(format!("{at}.{name}[{i}]"), operands))
            }
            Condition::Unusable { problem, .. } => Err(ConditionFailure::Unusable {
                at,
                problem: problem.clone(),
            }),
            Condition::Compare(c) => c.value(&at, operands).and_then(|value| {
                c.order(value)
                    .map(|_| ())
                    .ok_or_else(|| ConditionFailure::Incomparable {
                        at,
                        comparison: c.to_string(),
                        value: value.to_string(),
                    })
            }),
        }
    }

    fn truth(&self, at: String, operands: &Operands) -> Result<(), ConditionFailure> {
        match self {
            Condition::AllOf(items) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, c)| c.truth(format!("{at}.allOf[{i}]"), operands)),
            Condition::AnyOf(items) => {
                let held = items
                    .iter()
                    .enumerate()
                    .any(|(i, c)| c.truth(format!("{at}.anyOf[{i}]"), operands).is_ok());
                match held {
                    true => Ok(()),
                    false => Err(ConditionFailure::NotMet {
                        at,
                        what: format!("none of its {} conditions holds", items.len()),
                    }),
                }
            }
            Condition::Compare(c) => {
                let value = c.value(&at, operands)?;
                match c.holds(value) {
                    true => Ok(()),
                    false => Err(ConditionFailure::NotMet {
                        what: format!("{c} does not hold: {} is {value:?}", c.left),
                        at,
                    }),
                }
            }
            Condition::Unusable { problem, .. } => Err(ConditionFailure::Unusable {
                at,
                problem: problem.clone(),
            }),
        }
    }

    fn list_name(&self) -> &'static str {
        match self {
            Condition::AnyOf(_) => "anyOf",
            _ => "allOf",
        }
    }
}

impl Comparison {
    /// The request's value of the left operand, as the route declares it.
    fn value<'a>(&self, at: &str, operands: &'a Operands) -> Result<&'a str, ConditionFailure> {
        match operands.get(&self.left) {
            None => Err(ConditionFailure::Undefined {
                at: at.to_string(),
                operand: self.left.clone(),
            }),
            Some(None) => Err(ConditionFailure::Absent {
                at: at.to_string(),
                operand: self.left.clone(),
            }),
            Some(Some(v)) => Ok(v),
        }
    }

    /// How `value` compares with the right operand, where the operator can compare them: text
    /// with text for (not)equal; numbers with numbers (exactly, and only where a decimal and a
    /// binary64 reader order them alike: `reading::number`), and instants (RFC 3339) with
    /// instants, for every operator. None: values of types the operator does not compare,
    /// numbers the two readers order differently, or texts that differ but read as the same
    /// number or instant (`100` and `1e2`), on which (not)equal would decide by how the value is
    /// written.
    fn order(&self, value: &str) -> Option<Ordering> {
        let ordering = matches!(self.operator, Operator::GreaterThan | Operator::LessThan);
        match &self.right {
            // The same text is the same value to equal and notEqual; greaterThan and lessThan
            // compare it only where it is a number or a time every reader reads alike.
            Operand::Text(right) if !ordering && value == right => Some(Ordering::Equal),
            Operand::Text(right) if !ordering => {
                // Two texts a reader takes for numbers are told apart only where every reader
                // orders them apart (`00` and `0` are one number to JavaScript); two instants
                // where both are instants and not the same one (`…T00:00Z` and `…T00:00:00Z`
                // are one to most readers). Other text is told apart by its spelling.
                let apart = if number::looks_like_number(value) && number::looks_like_number(right)
                {
                    number::compare(value, right).is_some_and(Ordering::is_ne)
                } else if looks_like_instant(value) && looks_like_instant(right) {
                    compare_instants(value, right).is_some_and(Ordering::is_ne)
                } else {
                    true
                };
                apart.then(|| value.cmp(right))
            }
            Operand::Text(right) => {
                number::compare(value, right).or_else(|| compare_instants(value, right))
            }
            Operand::Number(right) => number::compare(value, &right.to_string()),
        }
    }

    fn holds(&self, value: &str) -> bool {
        let Some(order) = self.order(value) else {
            return false;
        };
        match self.operator {
            Operator::Equal => order == Ordering::Equal,
            Operator::NotEqual => order != Ordering::Equal,
            Operator::GreaterThan => order == Ordering::Greater,
            Operator::LessThan => order == Ordering::Less,
        }
    }
}

/// Whether some reader takes `text` for a date or a time: it starts with a date (`2026-12-25`).
fn looks_like_instant(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 10
        && b[..10].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

/// Two RFC 3339 date-times compared as instants.
fn compare_instants(a: &str, b: &str) -> Option<Ordering> {
    let parse = |s: &str| {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
    };
    Some(parse(a)?.cmp(&parse(b)?))
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Serialize for Condition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Condition::read(&Value::deserialize(d)?))
    }
}

/// Why a condition tree does not hold. `at` names the part that decided (`rules[0].conditions.allOf[1]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConditionFailure {
    Unusable {
        at: String,
        problem: Problem,
    },
    /// The route declares no value for the left operand.
    Undefined {
        at: String,
        operand: String,
    },
    /// The route declares it, but the request does not give it.
    Absent {
        at: String,
        operand: String,
    },
    /// The operator cannot compare the request's value with the right operand.
    Incomparable {
        at: String,
        comparison: String,
        value: String,
    },
    NotMet {
        at: String,
        what: String,
    },
}

impl ConditionFailure {
    /// Where in the evidence it was decided.
    pub fn at(&self) -> &str {
        match self {
            ConditionFailure::Unusable { at, .. }
            | ConditionFailure::Undefined { at, .. }
            | ConditionFailure::Absent { at, .. }
            | ConditionFailure::Incomparable { at, .. }
            | ConditionFailure::NotMet { at, .. } => at,
        }
    }
}

reason_codes! {
    ConditionFailure {
        ConditionFailure::Unusable { problem: Problem::UnknownMember(_), .. } => "evidence_member_not_understood",
        ConditionFailure::Unusable { problem: Problem::UnknownOperator(_), .. } => "condition_operator_unknown",
        ConditionFailure::Unusable { problem: Problem::OperandType(_), .. }
        | ConditionFailure::Incomparable { .. } => "condition_operand_type",
        ConditionFailure::Unusable { .. } => "condition_malformed",
        ConditionFailure::Undefined { .. } => "condition_operand_undefined",
        ConditionFailure::Absent { .. } => "condition_value_absent",
        ConditionFailure::NotMet { .. } => "condition_not_met",
    }
}

impl fmt::Display for ConditionFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConditionFailure::Unusable { at, problem } => {
                write!(f, "the condition {at} {problem}; a condition that cannot be evaluated never holds")
            }
            ConditionFailure::Undefined { at, operand } => write!(
                f,
                "the condition {at} compares {operand}, for which the route declares no value; a condition that cannot be evaluated never holds"
            ),
            ConditionFailure::Absent { at, operand } => write!(
                f,
                "the condition {at} compares {operand}, which the request does not give"
            ),
            ConditionFailure::Incomparable {
                at,
                comparison,
                value,
            } => write!(
                f,
                "the condition {at} ({comparison}) cannot be decided on the request's value {value:?}: greaterThan and lessThan compare numbers or RFC 3339 times, a numeric rightOperand a number, and equal and notEqual text, which must not be the same number or time written otherwise"
            ),
            ConditionFailure::NotMet { at, what } => write!(f, "the condition {at}: {what}"),
        }
    }
}

#[cfg(test)]
#[path = "condition_tests.rs"]
mod tests;
