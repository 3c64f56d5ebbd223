use super::super::log_line::{line_into, strings_of, to_json, Line, Rfc3339};
use super::{DecisionLog, Queued};
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
    full.path = format!("/api/containers/{odd}").into();
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
        judged: None,
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
        judged: None,
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
    // Lines made at once and decisions handed over to the writer take turns.
    let sent: Vec<Decision> = (0..500).map(|_| Decision::new()).collect();
    for (i, d) in sent.iter().enumerate() {
        match i % 2 {
            0 => log.write(d, 200, Duration::from_millis(1)),
            _ => log.hand_over(d.clone(), 200, Duration::from_millis(1)),
        }
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
    log.hand_over(last.clone(), 403, Duration::ZERO);
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

#[test]
fn a_decision_handed_over_is_written_as_its_line_made_at_once_would_be() {
    // A path longer than the line's bound: its line is made at once. A path of control
    // characters, within the bound before escaping and over it after: the writer cuts it.
    let mut long = Decision::new();
    long.path = "/".repeat(2000).into();
    let mut escaped = Decision::new();
    escaped.path = "\u{1}".repeat(300).into();
    let mut shapes = decisions();
    shapes.extend([long.clone(), escaped.clone()]);
    let bound = 1024;
    assert!(strings_of(&long).unwrap() >= bound);
    assert!(strings_of(&escaped).unwrap() < bound);
    assert_eq!(
        strings_of(&shapes[3]),
        None,
        "a registry's failure, said in the line"
    );
    let dir = tempfile::tempdir().unwrap();
    let masked = vec!["path".to_string(), "caller.id".to_string()];
    for (i, (mask, max_line_bytes)) in [
        (Vec::new(), 16 * 1024),
        (masked, 16 * 1024),
        (Vec::new(), bound),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("decisions-{i}.log"));
        let settings = DecisionLogSettings {
            target: DecisionLogTarget::File(path.clone()),
            mask,
            max_line_bytes,
            queue: 100,
        };
        let log = DecisionLog::open(&settings, Metrics::new()).unwrap();
        let mut expected = Vec::new();
        for d in &shapes {
            let duration = Duration::from_nanos(1_500_001);
            line_into(&mut expected, d, 403, duration, &settings);
            log.hand_over(d.clone(), 403, duration);
        }
        log.flush(Duration::from_secs(10));
        let written = std::fs::read(&path).unwrap();
        assert_eq!(
            String::from_utf8(written).unwrap(),
            String::from_utf8(expected).unwrap(),
            "settings {i}"
        );
    }
}

/// A log's output that holds its first write until the test lets it go, so that what comes
/// meanwhile waits in the queue, to be taken in one batch.
struct Held {
    gate: Option<std::sync::mpsc::Receiver<()>>,
    out: Arc<std::sync::Mutex<Vec<u8>>>,
}

impl std::io::Write for Held {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(gate) = self.gate.take() {
            let _ = gate.recv();
        }
        self.out.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A log into a `Held` output whose writer has taken `first` and is held writing it: what
/// comes next waits until the sender is used, then is written into the returned buffer.
fn held_log(
    settings: &DecisionLogSettings,
    metrics: &Metrics,
    first: Decision,
) -> (
    DecisionLog,
    std::sync::mpsc::Sender<()>,
    Arc<std::sync::Mutex<Vec<u8>>>,
) {
    let (open, gate) = std::sync::mpsc::channel();
    let out = Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = Held {
        gate: Some(gate),
        out: out.clone(),
    };
    let log = DecisionLog::start(Box::new(held), settings, metrics.clone()).unwrap();
    log.hand_over(first, 200, Duration::ZERO);
    let taken = (0..1000).any(|_| {
        std::thread::sleep(Duration::from_millis(5));
        log.shared.pending().writing == 1
    });
    assert!(taken, "the writer took the first line");
    (log, open, out)
}

#[test]
fn lines_made_at_once_and_decisions_handed_over_wait_as_such_and_are_written_in_turn() {
    let settings = DecisionLogSettings {
        target: DecisionLogTarget::Stdout,
        mask: Vec::new(),
        max_line_bytes: 1024,
        queue: 100,
    };
    let metrics = Metrics::new();
    let first = Decision::new();
    let mut expected = Vec::new();
    line_into(&mut expected, &first, 200, Duration::ZERO, &settings);
    let (log, open, out) = held_log(&settings, &metrics, first);
    let duration = Duration::from_millis(3);
    // Every shape of decision, handed over and made at once in turn: a decision that holds
    // too much (the long path) or names a failure (the registry's) has its line made at once.
    let mut long = Decision::new();
    long.path = "/".repeat(2000).into();
    let mut shapes = decisions();
    shapes.push(long);
    let mut kinds = Vec::new();
    for d in &shapes {
        line_into(&mut expected, d, 403, duration, &settings);
        log.write(d, 403, duration);
        kinds.push("made");
        line_into(&mut expected, d, 403, duration, &settings);
        log.hand_over(d.clone(), 403, duration);
        kinds.push(match strings_of(d) {
            Some(n) if n < settings.max_line_bytes => "handed",
            _ => "made",
        });
    }
    let waiting: Vec<&str> = (log.shared.pending().queued.iter())
        .map(|q| match q {
            Queued::Made(_) => "made",
            Queued::Decision(_) => "handed",
        })
        .collect();
    assert_eq!(waiting, kinds);
    assert_eq!(kinds.iter().filter(|k| **k == "handed").count(), 4);
    open.send(()).unwrap();
    log.flush(Duration::from_secs(10));
    assert_eq!(
        String::from_utf8(out.lock().unwrap().clone()).unwrap(),
        String::from_utf8(expected).unwrap()
    );
    let count = |outcome: &str| metrics.decision_log.with_label_values(&[outcome]).get();
    assert_eq!(count("written"), 1 + 2 * shapes.len() as u64);
    assert_eq!(count("failed") + count("dropped"), 0);
}

#[test]
fn a_writer_behind_by_half_its_queue_gets_its_lines_made_by_the_callers() {
    let settings = DecisionLogSettings {
        target: DecisionLogTarget::Stdout,
        mask: Vec::new(),
        max_line_bytes: 16 * 1024,
        queue: 4,
    };
    let metrics = Metrics::new();
    let (log, open, out) = held_log(&settings, &metrics, Decision::new());
    // One line being written: one more is handed over; from two on (half of four), the line
    // is made at once; the fourth in waiting fills the queue and the fifth is dropped.
    let sent: Vec<Decision> = (0..4).map(|_| Decision::new()).collect();
    for d in &sent {
        log.hand_over(d.clone(), 200, Duration::ZERO);
    }
    let waiting: Vec<bool> = (log.shared.pending().queued.iter())
        .map(|q| matches!(q, Queued::Decision(_)))
        .collect();
    assert_eq!(waiting, [true, false, false]);
    open.send(()).unwrap();
    log.flush(Duration::from_secs(10));
    let count = |outcome: &str| metrics.decision_log.with_label_values(&[outcome]).get();
    assert_eq!((count("written"), count("dropped")), (4, 1));
    let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    for (i, d) in sent.iter().enumerate() {
        assert_eq!(text.contains(d.id.as_str()), i < 3, "decision {i}");
    }
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
