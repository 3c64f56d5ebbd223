use super::super::log_line::{to_json, Line, Rfc3339};
use super::DecisionLog;
use crate::config::model::{DecisionLogSettings, DecisionLogTarget};
use crate::gateway::decision::{
    Assessed, Decision, Evaluated, EvidenceSource, EvidenceUsed, Mode, Taken,
};
use crate::gateway::reject::{Reject, Unavailable};
use crate::peers::registry_errors::RegistryFailure;
use crate::scheme::mask::AccessRequest;
use crate::scheme::verdict::{DecidedBy, Decision as Verdict, DenyReason, Evaluation};
use crate::telemetry::Metrics;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};
use time::format_description::well_known::Rfc3339 as Format;
use time::OffsetDateTime;

#[test]
fn times_are_written_as_rfc3339_in_utc_with_nanoseconds() {
    // The epoch, leap days, the turn of centuries and of the year 2100, and now.
    let secs = [
        0,
        951_782_400,
        951_868_800,
        4_107_542_400,
        4_102_444_799,
        1_795_500_000,
    ];
    for (i, secs) in secs.into_iter().enumerate() {
        let at = UNIX_EPOCH + Duration::new(secs, 7 + 123_456_789 * i as u32);
        let ours = String::from_utf8(Rfc3339(at).bytes().to_vec()).unwrap();
        let parsed = OffsetDateTime::parse(&ours, &Format).unwrap();
        assert_eq!(parsed, OffsetDateTime::from(at), "{ours}");
    }
    let now = std::time::SystemTime::now();
    let ours = String::from_utf8(Rfc3339(now).bytes().to_vec()).unwrap();
    assert_eq!(
        OffsetDateTime::parse(&ours, &Format).unwrap(),
        OffsetDateTime::from(now)
    );
}

/// Every shape of line, with strings that need escaping in every field that can carry one.
fn decisions() -> Vec<Decision> {
    let odd = "C1\"\\\u{1}\n\u{7f}é\u{2028}";
    let mut full = Decision::new();
    // A backslash alone, a quote alone, a control character alone.
    full.method = "G\\ET".into();
    full.route = "containers\"read".into();
    full.path = format!("/api/containers/{odd}");
    full.mode = Mode::Shadow;
    full.called_by_party("EU.EORI.NL000000001".into());
    if let Some(c) = full.caller.as_mut() {
        c.acting_for = Some(odd.into());
    }
    full.values = vec![
        Taken {
            name: "identifiers".into(),
            template: "{path.id}".into(),
            value: odd.into(),
        },
        Taken {
            name: "attributes".into(),
            template: "*".into(),
            value: "\t".into(),
        },
    ];
    full.mask = Some(std::sync::Arc::new(AccessRequest {
        policy_issuer: "EU.EORI.NL000000005".into(),
        access_subject: "EU.EORI.NL000000001".into(),
        service_providers: vec!["EU.EORI.NL000000003".into()],
        resource_type: "CONTAINER".into(),
        identifiers: vec![odd.into(), "C2".into()],
        attributes: vec![],
        actions: vec!["iSHARE.READ".into()],
        required_licences: vec!["ISHARE.0001".into()],
        ..AccessRequest::default()
    }));
    let places = vec![
        DecidedBy {
            step: 0,
            policy_set: Some(0),
            policy: Some(1),
            rule: Some(2),
            part: Some(odd.into()),
        },
        DecidedBy::default(),
        DecidedBy {
            step: 12,
            policy_set: Some(0),
            policy: Some(13),
            rule: Some(2),
            part: Some("conditions.allOf[1]".into()),
        },
        DecidedBy {
            step: 1,
            policy_set: Some(4),
            ..DecidedBy::default()
        },
    ];
    full.assessed = Some(assessed(EvidenceSource::Given { from: odd.into() }, places));
    full.shadow_denied(&Reject::NotFound);
    full.decided_in = Some(Duration::from_micros(1234));
    let mut by_header = full.clone();
    by_header.assessed = Some(assessed(EvidenceSource::Header, Vec::new()));
    let mut by_registry = Decision::new();
    by_registry.assessed = Some(Assessed {
        cache_hit: true,
        kept_as: None,
        ..assessed(
            EvidenceSource::Registry {
                registry: "EU.EORI.NL000000004".into(),
            },
            Vec::new(),
        )
    });
    let mut refused = Decision::new();
    let failure = RegistryFailure::Answer {
        registry: "EU.EORI.NL000000004".into(),
        problem: odd.into(),
    };
    refused.refused(&Reject::Unavailable(Unavailable::Registry(failure)));
    vec![full, by_header, by_registry, refused, Decision::new()]
}

fn assessed(source: EvidenceSource, decided_by: Vec<DecidedBy>) -> Assessed {
    let evaluation = Evaluation {
        decision: Verdict::Deny(DenyReason::NoPolicy),
        decided_by,
    };
    let evidence = EvidenceUsed {
        source,
        issuers: vec!["EU.EORI.NL000000005".into(), "a\"b".into()],
        signers: vec!["EU.EORI.NL000000004".into()],
    };
    Assessed {
        evaluated: Arc::new(Evaluated::new(evaluation, evidence)),
        cache_hit: false,
        kept_as: None,
    }
}

#[test]
fn a_line_is_written_byte_for_byte_as_serde_json_writes_it() {
    for (i, d) in decisions().iter().enumerate() {
        for answered in [None, Some((403, Duration::from_nanos(1_500_001)))] {
            let of = Line::of(d, answered);
            let mut ours = Vec::new();
            of.write(&mut ours);
            let serde = serde_json::to_string(&of).unwrap();
            assert_eq!(String::from_utf8(ours).unwrap(), serde, "decision {i}");
        }
    }
}

#[test]
fn a_registry_answer_not_addressed_to_us_is_said_in_the_line_with_both_audiences() {
    let mut d = Decision::new();
    let problem = "the answer is addressed to 2f5c6d0e-user (aud), not to EU.EORI.NL000000003";
    let failure = RegistryFailure::Answer {
        registry: "EU.EORI.NL000000004".into(),
        problem: problem.into(),
    };
    d.refused(&Reject::Unavailable(Unavailable::Registry(failure)));
    let line = to_json(&d);
    assert_eq!(line["reason"], "registry_garbled");
    assert_eq!(
        line["description"],
        "the authorisation registry's answer is not usable evidence; the gateway's log and \
         decision log say why"
    );
    assert_eq!(
        line["detail"],
        format!("the answer of EU.EORI.NL000000004 is not usable evidence: {problem}")
    );
    // A refusal whose answer says it all has no detail.
    let mut d = Decision::new();
    d.refused(&Reject::NotFound);
    assert!(to_json(&d).get("detail").is_none());
}

#[test]
fn the_writer_writes_whole_lines_in_order_and_counts_what_a_full_queue_drops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decisions.log");
    let settings = DecisionLogSettings {
        target: DecisionLogTarget::File(path.clone()),
        mask: Vec::new(),
        max_line_bytes: 16 * 1024,
        queue: 1,
    };
    let metrics = Metrics::new();
    let log = DecisionLog::open(&settings, metrics.clone()).unwrap();
    let count = |outcome: &str| metrics.decision_log.with_label_values(&[outcome]).get();
    // One line waits at most: a burst keeps the first and drops the rest until the writer
    // has taken it.
    let sent: Vec<Decision> = (0..500).map(|_| Decision::new()).collect();
    for d in &sent {
        log.write(d, 200, Duration::from_millis(1));
    }
    log.flush(Duration::from_secs(10));
    let (written, dropped) = (count("written"), count("dropped"));
    assert_eq!(written + dropped, 500);
    assert!(
        written >= 1 && dropped >= 1,
        "{written} written, {dropped} dropped"
    );
    // After the burst, each line waits alone again and is written; dropping the log writes
    // out what it holds.
    let last = Decision::new();
    log.write(&last, 403, Duration::ZERO);
    drop(log);
    let text = (0..500)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            std::fs::read_to_string(&path).unwrap()
        })
        .find(|t| t.contains(last.id.as_str()) && count("written") == written + 1)
        .expect("the last line, written and counted when the log was dropped");
    let ids: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| v["decision_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len() as u64, written + 1);
    assert_eq!(ids.first().map(String::as_str), Some(sent[0].id.as_str()));
    assert_eq!(ids.last().map(String::as_str), Some(last.id.as_str()));
    let order: Vec<usize> = ids[..ids.len() - 1]
        .iter()
        .map(|id| sent.iter().position(|d| d.id.as_str() == id).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert_eq!(count("failed"), 0);
}

/// The byte-by-byte rule: a quote, a backslash or a control character needs escaping.
fn plain_by_bytes(s: &str) -> bool {
    !s.bytes().any(|b| b < b' ' || b == b'"' || b == b'\\')
}

#[test]
fn a_string_is_plain_word_by_word_exactly_when_it_is_byte_by_byte() {
    use super::super::log_line::plain;
    // Every ASCII character at every place of every length up to three words, among fillers
    // on either side of each boundary that matters (a space, the characters beside the quote
    // and the backslash, DEL, and characters of two and three bytes whose high bits are set).
    for filler in [" ", "a", "!", "#", "[", "]", "~", "\u{7f}", "é", "€"] {
        for len in 1..=24 {
            for at in 0..len {
                for c in (0u8..0x80).map(char::from) {
                    let mut s: String = filler.repeat(len);
                    let byte = at * filler.len();
                    s.replace_range(byte..byte + filler.len(), c.encode_utf8(&mut [0; 4]));
                    assert_eq!(plain(&s), plain_by_bytes(&s), "{s:?}");
                }
            }
        }
    }
    assert!(plain(""));
    assert!(!plain("ok\u{0}"), "a NUL in the last word");
    assert!(!plain("12345678\""), "a quote alone in the last word");
}

proptest::proptest! {
    #[test]
    fn any_string_is_plain_word_by_word_exactly_when_it_is_byte_by_byte(
        s in proptest::string::string_regex("(.|[\"\\\\\u{0}-\u{1f}\u{7f}-\u{a0}])*").unwrap()
    ) {
        proptest::prop_assert_eq!(super::super::log_line::plain(&s), plain_by_bytes(&s));
    }
}
