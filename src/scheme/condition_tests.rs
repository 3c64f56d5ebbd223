use super::*;
use serde_json::json;
use std::cmp::Ordering;

fn operands(pairs: &[(&str, Option<&str>)]) -> Operands {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
        .collect()
}

fn code(tree: Value, values: &Operands) -> &'static str {
    match Condition::read(&tree).check("rules[0].conditions", values) {
        Ok(()) => "holds",
        Err(e) => e.code(),
    }
}

fn leaf(left: &str, op: &str, right: Value) -> Value {
    json!({"leftOperand": left, "operator": op, "rightOperand": right})
}

#[test]
fn comparisons_hold_on_the_routes_values() {
    let v = operands(&[("requesterLocation", Some("NL")), ("weight", Some("12"))]);
    assert_eq!(
        code(leaf("requesterLocation", "equal", json!("NL")), &v),
        "holds"
    );
    assert_eq!(
        code(leaf("requesterLocation", "equal", json!("Mars")), &v),
        "condition_not_met"
    );
    assert_eq!(
        code(leaf("requesterLocation", "notEqual", json!("Mars")), &v),
        "holds"
    );
    assert_eq!(code(leaf("weight", "greaterThan", json!("9")), &v), "holds");
    assert_eq!(
        code(leaf("weight", "lessThan", json!(9)), &v),
        "condition_not_met"
    );
    assert_eq!(code(leaf("weight", "equal", json!(12.0)), &v), "holds");
    // Text compares as text: case and spelling count.
    assert_eq!(
        code(leaf("requesterLocation", "equal", json!("nl")), &v),
        "condition_not_met"
    );
}

#[test]
fn instants_and_large_integers_compare_exactly() {
    let v = operands(&[
        ("bookedAt", Some("2026-03-01T10:00:00+01:00")),
        ("big", Some("9007199254740994")),
    ]);
    assert_eq!(
        code(
            leaf("bookedAt", "lessThan", json!("2026-03-01T09:30:00Z")),
            &v
        ),
        "holds"
    );
    assert_eq!(
        code(leaf("big", "greaterThan", json!(9007199254740992u64)), &v),
        "holds"
    );
    assert_eq!(
        code(leaf("big", "equal", json!(9007199254740992u64)), &v),
        "condition_not_met"
    );
}

/// Numbers a decimal reader and a binary64 reader (JavaScript, Go) order differently decide
/// nothing, whichever way a condition compares them: a backend of either kind would act on
/// another number than the one decided on.
#[test]
fn numbers_the_two_readers_order_differently_are_no_operands() {
    let v = operands(&[
        ("weight", Some("9007199254740993.0")),
        ("share", Some("0.10000000000000001")),
        ("zero", Some("-0")),
        ("amount", Some("1e9223372036854775807")),
    ]);
    for (left, op, right) in [
        ("weight", "equal", json!(9007199254740992u64)),
        ("weight", "notEqual", json!(9007199254740992u64)),
        ("weight", "greaterThan", json!(9007199254740992u64)),
        ("weight", "notEqual", json!("9007199254740992")),
        ("share", "greaterThan", json!("0.1")),
        ("share", "notEqual", json!("0.1")),
        ("amount", "lessThan", json!(1000)),
        ("amount", "greaterThan", json!("1000")),
    ] {
        let tree = leaf(left, op, right);
        assert_eq!(code(tree.clone(), &v), "condition_operand_type", "{tree}");
    }
    assert_eq!(code(leaf("zero", "equal", json!(0)), &v), "holds");
    // Text some reader takes for a number is no text to tell apart by its spelling.
    for value in ["00", "+0", ".0", "0.", "0_0", "0x0", " 0"] {
        let v = operands(&[("amount", Some(value))]);
        for op in ["equal", "notEqual"] {
            assert_eq!(
                code(leaf("amount", op, json!("0")), &v),
                "condition_operand_type",
                "{value:?} {op} 0"
            );
        }
    }
    let codes = operands(&[("code", Some("C1"))]);
    assert_eq!(code(leaf("code", "notEqual", json!("C2")), &codes), "holds");
    // A number beside text that no reader takes for one is told apart by its spelling.
    let numbered = operands(&[("code", Some("12345"))]);
    assert_eq!(
        code(leaf("code", "notEqual", json!("SECRET-1")), &numbered),
        "holds"
    );
    for (a, b, order) in [
        ("100", "1e2", Ordering::Equal),
        ("15", "1.50E1", Ordering::Equal),
        ("-2", "-10", Ordering::Greater),
        ("1", "1.00", Ordering::Equal),
        ("12", "1.2e1", Ordering::Equal),
        ("-1", "0", Ordering::Less),
        ("123", "1.23e2", Ordering::Equal),
        ("2.5", "1.23", Ordering::Greater),
        ("0.5", "0.75", Ordering::Less),
    ] {
        assert_eq!(number::compare(a, b), Some(order), "{a} {b}");
    }
    // A value a reader of its leading integer reads otherwise decides nothing.
    for (a, b) in [
        ("1e2", "100"),
        ("1.50", "1.5"),
        ("0.001", "1E-3"),
        ("-0.5", "0"),
    ] {
        assert_eq!(number::compare(a, b), None, "{a} {b}");
    }
    for not_a_number in [
        "05",
        "+5",
        " 5",
        "inf",
        "NaN",
        "0x10",
        "1.",
        ".5",
        "1e",
        "",
        "1e99999999999999999999",
    ] {
        assert_eq!(number::compare(not_a_number, "5"), None, "{not_a_number:?}");
    }
}

#[test]
fn text_that_reads_as_the_same_number_or_time_is_not_decided_by_its_spelling() {
    let v = operands(&[
        ("amount", Some("1e2")),
        ("at", Some("2026-03-01T10:00:00+01:00")),
    ]);
    // Equal would hold or not by how the value is written: neither, a Deny.
    for tree in [
        leaf("amount", "equal", json!("100")),
        leaf("amount", "notEqual", json!("100")),
        leaf("at", "equal", json!("2026-03-01T09:00:00Z")),
    ] {
        assert_eq!(code(tree.clone(), &v), "condition_operand_type", "{tree}");
    }
    assert_eq!(code(leaf("amount", "equal", json!("1e2")), &v), "holds");
    assert_eq!(code(leaf("amount", "notEqual", json!("200")), &v), "holds");
    // A reader that stops at the leading integer reads 1e2 as 1: a numeric 100 is no match.
    assert_eq!(
        code(leaf("amount", "equal", json!(100)), &v),
        "condition_operand_type"
    );
    let plain = operands(&[("amount", Some("100"))]);
    assert_eq!(code(leaf("amount", "equal", json!(100.0)), &plain), "holds");
    // Instants written otherwise, and a text that is no instant beside one.
    let at = operands(&[("at", Some("2026-12-25T00:00Z"))]);
    for op in ["equal", "notEqual"] {
        let tree = leaf("at", op, json!("2026-12-25T00:00:00Z"));
        assert_eq!(code(tree, &at), "condition_operand_type", "{op}");
    }
    let word = operands(&[("at", Some("tomorrow"))]);
    assert_eq!(
        code(leaf("at", "notEqual", json!("2026-12-25T00:00:00Z")), &word),
        "holds"
    );
}

#[test]
fn trees_combine_their_parts() {
    let v = operands(&[("a", Some("1")), ("b", Some("2"))]);
    let any = json!({"anyOf": [leaf("a", "equal", json!("9")), leaf("b", "equal", json!("2"))]});
    assert_eq!(code(any, &v), "holds");
    let all = json!({"allOf": [leaf("a", "equal", json!("1")), {"anyOf": [leaf("b", "equal", json!("3"))]}]});
    let failure = Condition::read(&all)
        .check("rules[0].conditions", &v)
        .unwrap_err();
    assert_eq!(failure.code(), "condition_not_met");
    assert_eq!(failure.at(), "rules[0].conditions.allOf[1]");
    let none = json!({"anyOf": [leaf("a", "equal", json!("9")), leaf("b", "equal", json!("9"))]});
    assert_eq!(code(none, &v), "condition_not_met");
}

#[test]
fn what_cannot_be_evaluated_never_holds_each_with_its_reason() {
    let v = operands(&[("a", Some("1")), ("absent", None)]);
    let cases = [
        (
            leaf("undeclared", "equal", json!("1")),
            "condition_operand_undefined",
        ),
        (
            leaf("absent", "equal", json!("1")),
            "condition_value_absent",
        ),
        (
            leaf("a", "contains", json!("1")),
            "condition_operator_unknown",
        ),
        (leaf("a", "equal", json!(true)), "condition_operand_type"),
        (leaf("a", "equal", json!(["1"])), "condition_operand_type"),
        (
            leaf("a", "greaterThan", json!("x")),
            "condition_operand_type",
        ),
        (
            json!({"leftOperand": "a", "operator": "equal"}),
            "condition_malformed",
        ),
        (
            json!({"leftOperand": 1, "operator": "equal", "rightOperand": "1"}),
            "condition_malformed",
        ),
        (json!({"anyOf": []}), "condition_malformed"),
        (
            json!({"allOf": leaf("a", "equal", json!("1"))}),
            "condition_malformed",
        ),
        (
            json!({"anyOf": [leaf("a", "equal", json!("1"))], "allOf": [leaf("a", "equal", json!("1"))]}),
            "condition_malformed",
        ),
        (
            json!({"anyOf": [leaf("a", "equal", json!("1"))], "leftOperand": "a"}),
            "condition_malformed",
        ),
        (json!({}), "condition_malformed"),
        (json!("a equal 1"), "condition_malformed"),
        (
            json!({"leftOperand": "a", "operator": "equal", "rightOperand": "1", "unit": "kg"}),
            "evidence_member_not_understood",
        ),
    ];
    for (tree, expected) in cases {
        assert_eq!(code(tree.clone(), &v), expected, "{tree}");
    }
    // A part that cannot be evaluated denies even where another part of an anyOf holds.
    let mixed =
        json!({"anyOf": [leaf("a", "equal", json!("1")), leaf("undeclared", "equal", json!("1"))]});
    let failure = Condition::read(&mixed)
        .check("rules[0].conditions", &v)
        .unwrap_err();
    assert_eq!(failure.code(), "condition_operand_undefined");
    assert_eq!(failure.at(), "rules[0].conditions.anyOf[1]");
}

#[test]
fn trees_round_trip_as_written_even_when_unusable() {
    for tree in [
        json!({"anyOf": [leaf("a", "equal", json!("1")), {"allOf": [leaf("b", "lessThan", json!(3))]}]}),
        json!({"anyOf": [], "note": 1}),
        json!({"leftOperand": "a", "operator": "contains", "rightOperand": "1"}),
    ] {
        let read: Condition = serde_json::from_value(tree.clone()).unwrap();
        assert_eq!(serde_json::to_value(&read).unwrap(), tree);
    }
}

/// Differential: the condition evaluator against two readers nobody here wrote, an exact decimal
/// one (bigdecimal) and a binary64 one (Rust's correctly rounded parse), over generated numbers:
/// signs, zeros, long mantissas, exponents small, at binary64's edges and far past the bound.
mod differential {
    use super::*;
    use bigdecimal::BigDecimal;
    use proptest::prelude::*;
    use std::str::FromStr;

    fn number() -> impl Strategy<Value = String> {
        let int = prop_oneof![Just("0".to_string()), "[1-9][0-9]{0,24}"];
        let fraction = prop::option::of("[0-9]{1,24}");
        let power = prop_oneof![
            4 => (0u64..30).prop_map(|p| p.to_string()),
            2 => (280u64..330).prop_map(|p| p.to_string()),
            1 => "0{1,4}[0-9]{1,3}",
            1 => (1_000_001u64..u64::MAX).prop_map(|p| p.to_string()),
            1 => Just("9223372036854775807".to_string()),
        ];
        let exponent = prop::option::of((
            prop_oneof![Just("e"), Just("E")],
            prop_oneof![Just(""), Just("+"), Just("-")],
            power,
        ));
        (any::<bool>(), int, fraction, exponent).prop_map(|(negative, int, fraction, exponent)| {
            let mut text = String::new();
            if negative {
                text.push('-');
            }
            text.push_str(&int);
            if let Some(f) = fraction {
                text.push('.');
                text.push_str(&f);
            }
            if let Some((e, sign, power)) = exponent {
                text.push_str(e);
                text.push_str(sign);
                text.push_str(&power);
            }
            text
        })
    }

    /// How the readers of a value `a` (exact, binary64, its leading integer) order it against
    /// the constant `b` where they all agree: None where they do not, or where either is past
    /// the gateway's bounds (64 characters, an exponent of a million).
    fn oracle(a: &str, b: &str) -> Option<Ordering> {
        let bounded = |t: &str| {
            let power = t
                .split(['e', 'E'])
                .nth(1)
                .map(|p| p.trim_start_matches(['+', '-']));
            let power = power.map(|p| p.trim_start_matches('0'));
            t.len() <= 64 && power.is_none_or(|p| p.len() < 7 || p == "1000000")
        };
        if !bounded(a) || !bounded(b) {
            return None;
        }
        let constant = BigDecimal::from_str(b).ok()?;
        let exact = BigDecimal::from_str(a).ok()?.cmp(&constant);
        let nearest = a
            .parse::<f64>()
            .ok()?
            .partial_cmp(&b.parse::<f64>().ok()?)?;
        let integer = a.split(['.', 'e', 'E']).next()?;
        let leading = BigDecimal::from_str(integer).ok()?.cmp(&constant);
        (exact == nearest && exact == leading).then_some(exact)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn numbers_compare_as_both_readers_agree(a in number(), b in number()) {
            prop_assert_eq!(number::compare(&a, &b), oracle(&a, &b), "{} and {}", a, b);
        }

        #[test]
        fn a_condition_holds_only_where_both_readers_say_it_does(a in number(), b in number()) {
            let v = operands(&[("n", Some(a.as_str()))]);
            let order = oracle(&a, &b);
            for (op, holds_on) in [("lessThan", Ordering::Less), ("greaterThan", Ordering::Greater)] {
                let expected = match order {
                    None => "condition_operand_type",
                    Some(o) if o == holds_on => "holds",
                    Some(_) => "condition_not_met",
                };
                prop_assert_eq!(code(leaf("n", op, json!(b)), &v), expected, "{} {} {}", a, op, b);
            }
            if a != b {
                let (equal, not_equal) = match order {
                    None | Some(Ordering::Equal) => ("condition_operand_type", "condition_operand_type"),
                    Some(_) => ("condition_not_met", "holds"),
                };
                prop_assert_eq!(code(leaf("n", "equal", json!(b)), &v), equal, "{} = {}", a, b);
                prop_assert_eq!(code(leaf("n", "notEqual", json!(b)), &v), not_equal, "{} != {}", a, b);
            }
        }
    }
}
