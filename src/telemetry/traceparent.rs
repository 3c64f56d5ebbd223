//! W3C Trace Context: the `traceparent` and `tracestate` a request brings, read strictly (a header
//! that is malformed in any way is ignored, never an error), and the ones the gateway sends on.

use super::write_hex;
use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

pub const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");
pub const TRACESTATE: http::HeaderName = http::HeaderName::from_static("tracestate");

/// The longest `tracestate` taken from a request (the length W3C asks every participant to
/// pass on); a longer one is dropped whole.
pub const MAX_TRACESTATE: usize = 512;
/// The most list members a `tracestate` may have (W3C); with more it is dropped whole.
const MAX_MEMBERS: usize = 32;

/// The length of a version 00 `traceparent`: `00-<32 hex>-<16 hex>-<2 hex>`.
const LEN: usize = 55;

/// The trace a request names: its `traceparent`, with its `tracestate` when that is valid too.
/// None when there is no `traceparent`, more than one, or one that is not valid.
pub fn extract(headers: &http::HeaderMap) -> Option<SpanContext> {
    let mut values = headers.get_all(TRACEPARENT).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let (trace_id, span_id, flags) = parse_traceparent(value.as_bytes())?;
    let state = tracestate(headers).unwrap_or_default();
    Some(SpanContext::new(trace_id, span_id, flags, true, state))
}

/// A `traceparent` value: version, trace id, parent id and flags, lower-case hex between dashes.
/// Version ff and all-zero ids are invalid; a later version than 00 is read for the fields 00
/// knows. Only the sampled flag is kept.
pub fn parse_traceparent(value: &[u8]) -> Option<(TraceId, SpanId, TraceFlags)> {
    let value = value.trim_ascii();
    if value.len() < LEN {
        return None;
    }
    let version = hex_byte(&value[0..2])?;
    let exact = match version {
        0xff => return None,
        0x00 => value.len() == LEN,
        // A later version may add fields after a dash.
        _ => value.len() == LEN || value[LEN] == b'-',
    };
    if !exact || value[2] != b'-' || value[35] != b'-' || value[52] != b'-' {
        return None;
    }
    let trace_id = u128::from_str_radix(lower_hex(&value[3..35])?, 16).ok()?;
    let span_id = u64::from_str_radix(lower_hex(&value[36..52])?, 16).ok()?;
    let flags = hex_byte(&value[53..55])?;
    if trace_id == 0 || span_id == 0 {
        return None;
    }
    Some((
        TraceId::from(trace_id),
        SpanId::from(span_id),
        TraceFlags::new(flags & TraceFlags::SAMPLED.to_u8()),
    ))
}

/// The text of lower-case hex digits only (W3C: upper case is invalid).
fn lower_hex(digits: &[u8]) -> Option<&str> {
    digits
        .iter()
        .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        .then(|| std::str::from_utf8(digits).ok())
        .flatten()
}

fn hex_byte(digits: &[u8]) -> Option<u8> {
    u8::from_str_radix(lower_hex(digits)?, 16).ok()
}

/// The request's `tracestate`, its headers joined: None when it is absent, longer than
/// MAX_TRACESTATE, has more than MAX_MEMBERS members, or any member is not `key=value` as W3C
/// writes them.
fn tracestate(headers: &http::HeaderMap) -> Option<TraceState> {
    let mut joined = String::new();
    for value in headers.get_all(TRACESTATE) {
        let text = value.to_str().ok()?;
        if !joined.is_empty() {
            joined.push(',');
        }
        joined.push_str(text);
        if joined.len() > MAX_TRACESTATE {
            return None;
        }
    }
    let members = joined
        .split(',')
        .filter(|m| !m.trim_matches([' ', '\t']).is_empty())
        .count();
    if members == 0 || members > MAX_MEMBERS {
        return None;
    }
    let state: TraceState = joined.parse().ok()?;
    // W3C values are printable ASCII without a trailing space.
    let printable = |v: &str| v.bytes().all(|b| (0x20..=0x7e).contains(&b)) && !v.ends_with(' ');
    (&state)
        .into_iter()
        .all(|(_, v)| printable(v))
        .then_some(state)
}

/// The `traceparent` naming `span` as the parent of the call it is sent with.
pub fn traceparent(span: &SpanContext) -> http::HeaderValue {
    let mut text = *b"00-00000000000000000000000000000000-0000000000000000-00";
    write_hex(&mut text[3..35], &span.trace_id().to_bytes());
    write_hex(&mut text[36..52], &span.span_id().to_bytes());
    write_hex(&mut text[53..], &[span.trace_flags().to_u8()]);
    // Hex digits and dashes only.
    http::HeaderValue::from_bytes(&text).expect("a traceparent is ASCII")
}

/// `span` as B3's single header names the parent of a call: `{trace id}-{span id}-{1|0}`.
pub fn b3_single(span: &SpanContext) -> http::HeaderValue {
    let mut text = *b"00000000000000000000000000000000-0000000000000000-0";
    write_hex(&mut text[..32], &span.trace_id().to_bytes());
    write_hex(&mut text[33..49], &span.span_id().to_bytes());
    text[50] = if span.is_sampled() { b'1' } else { b'0' };
    http::HeaderValue::from_bytes(&text).expect("a b3 header is ASCII")
}

/// `span` as B3's multiple headers name it: `X-B3-TraceId`, `X-B3-SpanId`, `X-B3-Sampled`.
pub fn b3_multi(span: &SpanContext) -> [(&'static str, http::HeaderValue); 3] {
    let single = b3_single(span);
    let text = single.as_bytes();
    let value = |bytes: &[u8]| http::HeaderValue::from_bytes(bytes).expect("hex digits");
    [
        ("x-b3-traceid", value(&text[..32])),
        ("x-b3-spanid", value(&text[33..49])),
        ("x-b3-sampled", value(&text[50..])),
    ]
}

/// The `tracestate` sent with a call of `span`'s trace, if it has one.
pub fn tracestate_of(span: &SpanContext) -> Option<http::HeaderValue> {
    let state = span.trace_state().header();
    (!state.is_empty())
        .then(|| http::HeaderValue::from_str(&state).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_span_is_written_as_the_traceparent_it_was_read_from() {
        for case in [GOOD, &GOOD.replace("-01", "-00")] {
            let sc = extract(&headers(&[("traceparent", case)])).unwrap();
            assert_eq!(traceparent(&sc), *case);
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn a_valid_traceparent_gives_its_trace_parent_and_sampled_flag() {
        let sc = extract(&headers(&[("traceparent", GOOD)])).unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_sampled());
        assert!(sc.is_remote());
        let unsampled = GOOD.replace("-01", "-00");
        assert!(!extract(&headers(&[("traceparent", &unsampled)]))
            .unwrap()
            .is_sampled());
        // Flags other than sampled are not passed on.
        let (_, _, flags) = parse_traceparent(GOOD.replace("-01", "-ff").as_bytes()).unwrap();
        assert_eq!(flags, TraceFlags::SAMPLED);
        // Whitespace around the value is no part of it.
        assert!(parse_traceparent(format!("  {GOOD}\t").as_bytes()).is_some());
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        let long_version_00 = format!("{GOOD}-extra");
        let cases = [
            "",
            "00",
            "garbage",
            &GOOD[..54],
            long_version_00.as_str(),
            // all-zero trace id and parent id
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            // version ff, and versions that are not hex
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // upper-case hex anywhere
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
            "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // separators and digits out of place
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-+0f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-+1",
        ];
        for case in cases {
            assert_eq!(parse_traceparent(case.as_bytes()), None, "{case:?}");
        }
        // Bytes that are no text at all.
        assert_eq!(parse_traceparent(&[0xff; 60]), None);
        let mut not_text = GOOD.as_bytes().to_vec();
        not_text[10] = 0xc3;
        assert_eq!(parse_traceparent(&not_text), None);
        // Two traceparents: which one is meant cannot be told.
        assert!(extract(&headers(&[("traceparent", GOOD), ("traceparent", GOOD)])).is_none());
    }

    #[test]
    fn a_later_version_is_read_for_the_fields_version_00_knows() {
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next";
        assert!(parse_traceparent(later.as_bytes()).is_some());
        let glued = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x";
        assert_eq!(parse_traceparent(glued.as_bytes()), None);
    }

    #[test]
    fn tracestate_is_kept_only_when_valid_and_bounded() {
        let state = |values: &[&str]| {
            let mut pairs = vec![("traceparent", GOOD)];
            pairs.extend(values.iter().map(|v| ("tracestate", *v)));
            extract(&headers(&pairs)).unwrap().trace_state().header()
        };
        assert_eq!(state(&["congo=t61rcWkgMzE"]), "congo=t61rcWkgMzE");
        // Several headers are one list.
        assert_eq!(
            state(&["rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE"]),
            "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
        );
        // An invalid member, too long a list or too many members: the whole state goes, the
        // trace stays.
        assert_eq!(state(&["not a member"]), "");
        assert_eq!(state(&["UPPER=x"]), "");
        assert_eq!(state(&["tab=a\tb"]), "");
        let oversize = format!("a={}", "b".repeat(MAX_TRACESTATE));
        assert_eq!(state(&[&oversize]), "");
        let split_oversize = vec![format!("a={}", "b".repeat(300)); 2];
        let split: Vec<&str> = split_oversize.iter().map(String::as_str).collect();
        assert_eq!(state(&split), "");
        let many: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
        assert_eq!(state(&[&many.join(",")]), "");
        // Without a valid traceparent, a tracestate means nothing.
        assert!(extract(&headers(&[("tracestate", "congo=t61rcWkgMzE")])).is_none());
    }

    #[test]
    fn the_traceparent_sent_on_names_the_given_span() {
        let (trace_id, span_id, flags) = parse_traceparent(GOOD.as_bytes()).unwrap();
        let sc = SpanContext::new(trace_id, span_id, flags, false, TraceState::default());
        assert_eq!(traceparent(&sc), GOOD);
        assert_eq!(tracestate_of(&sc), None);
        let unsampled = SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::default(),
            false,
            TraceState::default(),
        );
        assert!(traceparent(&unsampled).to_str().unwrap().ends_with("-00"));
    }

    proptest! {
        /// Whatever a client sends, reading it ends in a trace or in nothing, never a panic; a
        /// header of the right shape is valid exactly when W3C says so, and is written back in
        /// version 00 with the sampled flag alone.
        #[test]
        fn any_header_is_read_or_ignored(
            bytes in prop::collection::vec(any::<u8>(), 0..80),
            version in "[0-9a-f]{2}",
            trace in "[0-9a-f]{32}",
            parent in "[0-9a-f]{16}",
            flags in "[0-9a-f]{2}",
            shout in any::<bool>(),
            state in "[ -~]{0,600}",
        ) {
            prop_assert_eq!(extract(&headers(&[])), None);
            let _ = parse_traceparent(&bytes);
            let mut text = format!("{version}-{trace}-{parent}-{flags}");
            if shout {
                text = text.to_uppercase();
            }
            let valid = version != "ff"
                && trace.bytes().any(|b| b != b'0')
                && parent.bytes().any(|b| b != b'0')
                && (!shout || !text.bytes().any(|b| b.is_ascii_uppercase()));
            match parse_traceparent(text.as_bytes()) {
                Some((trace_id, span_id, sampled)) => {
                    prop_assert!(valid, "{}", text);
                    let sc = SpanContext::new(trace_id, span_id, sampled, false, TraceState::default());
                    let sampled = u8::from_str_radix(&flags, 16).unwrap() & 1;
                    let expected = format!("00-{trace}-{parent}-0{sampled}");
                    let written = traceparent(&sc);
                    prop_assert_eq!(written.to_str().unwrap(), expected.as_str());
                }
                None => prop_assert!(!valid, "{}", text),
            }
            let mut map = headers(&[("traceparent", GOOD)]);
            if let Ok(value) = http::HeaderValue::from_str(&state) {
                map.insert(TRACESTATE, value);
            }
            let sc = extract(&map).unwrap();
            prop_assert!(sc.trace_state().header().len() <= MAX_TRACESTATE);
        }
    }
}
