//! The backend's request as `rewrite_request` writes it when no name needs its case map: byte for
//! byte what pingora's head writes with it, and what the rewrite wrote before it used the plain
//! map (`reference`), over generated heads (names in every case, repeated, withheld, cookies, a
//! Host of the configuration's, a person's headers, HTTP/2's end of stream, trace context and a
//! body's framing added after).

use super::*;
use crate::config::tests::{write, BASE};
use crate::gateway::backend::upstream::UpstreamPool;
use proptest::prelude::*;

/// A delegated route: its backend never receives the licence headers it answers with.
const RULES: &str = r#"
[[route]]
name = "read"
path = "/api/containers/{id}"
upstream = "legacy"
delegation = { policy_issuer = "EU.EORI.NL000000005", resource_type = "CONTAINER", identifiers = ["{path.id}"], action = "iSHARE.READ" }
"#;

/// Names a client sends, the gateway sets or withholds, and pingora writes in its usual form.
const NAMES: [&str; 23] = [
    "host",
    "x-consumer-party-id",
    "authorization",
    "accept",
    "user-agent",
    "content-type",
    "content-length",
    "transfer-encoding",
    "expect",
    "upgrade",
    "te",
    "cookie",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-decision-id",
    "delegation_evidence",
    "traceparent",
    "x-b3-traceid",
    "licensepurpose",
    "date",
    "x-custom-thing",
    "connection",
    "set-cookie",
];

/// `name` (lower case) as a client writes it: 0 as it is, 1 as pingora writes it without its
/// case map, 2 in title case, 3 in capitals.
fn written(name: &str, case: u8) -> String {
    match case {
        0 => name.to_string(),
        1 => usual_form(&http::HeaderName::from_bytes(name.as_bytes()).unwrap()).to_string(),
        2 => name
            .split('-')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("-"),
        _ => name.to_ascii_uppercase(),
    }
}

struct Setting {
    config: crate::config::model::Config,
    pool: UpstreamPool,
    withheld: Withheld,
    uri: http::Uri,
}

/// The configurations, made once for every case: as shipped; stripping Cookie and a custom
/// header; with a Host of its own for the backend; both.
fn setting(strips: bool, host: bool) -> &'static Setting {
    static SETTINGS: std::sync::LazyLock<[Setting; 4]> = std::sync::LazyLock::new(|| {
        [(false, false), (true, false), (false, true), (true, true)].map(|(strips, host)| {
            let strip = "\n[forwarding]\nstrip_headers = [\"cookie\", \"x-custom-thing\"]\n";
            let base = match host {
                true => BASE.replace(
                    "addresses = [\"127.0.0.1:9180\"]",
                    "addresses = [\"127.0.0.1:9180\"]\nhost_header = \"backend.example\"",
                ),
                false => BASE.to_string(),
            };
            made(&format!("{base}{}", if strips { strip } else { "" }))
        })
    });
    &SETTINGS[usize::from(strips) + 2 * usize::from(host)]
}

fn made(gateway: &str) -> Setting {
    let dir = write(gateway, RULES);
    let config = crate::config::load(&dir.join("gateway.toml")).expect("the config loads");
    let _ = std::fs::remove_dir_all(&dir);
    let pool = UpstreamPool::new(config.upstreams["legacy"].clone()).unwrap();
    let withheld = Withheld::new(&config.routes[0], &config);
    Setting {
        config,
        pool,
        withheld,
        uri: "/api/containers/C1?x=1".parse().unwrap(),
    }
}

/// The head a client sent: each header's name as written and its value.
fn head(headers: &[(String, String)]) -> RequestHeader {
    let mut req = RequestHeader::build("GET", b"/api/containers/C1", Some(headers.len())).unwrap();
    for (name, value) in headers {
        req.append_header(name.clone(), value.as_str()).unwrap();
    }
    req
}

/// What pingora writes of `req`'s head.
fn wire(req: &RequestHeader) -> Vec<u8> {
    let mut buf = bytes::BytesMut::new();
    req.header_to_h1_wire(&mut buf);
    buf.to_vec()
}

/// The rewrite as it was before the plain map: pingora's head throughout.
fn reference(req: &mut RequestHeader, f: &Forwarding) -> pingora::Result<()> {
    req.set_uri(f.uri.clone());
    let forwarded_for = forwarded_for(&req.headers, f);
    let proto = forwarded_proto(&req.headers, f);
    let removed: Vec<http::HeaderName> = (req.headers.keys())
        .filter(|name| f.withheld.removes(name.as_str(), f.traced))
        .cloned()
        .collect();
    for name in removed {
        req.remove_header(&name);
    }
    if !f.own_cookies.is_empty() && req.headers.contains_key(http::header::COOKIE) {
        let kept = other_cookies(&req.headers, f.own_cookies);
        req.remove_header(&http::header::COOKIE);
        if !kept.is_empty() {
            req.insert_header(http::header::COOKIE, kept)?;
        }
    }
    for (name, value) in f.person {
        req.insert_header(name.clone(), value.as_str())?;
    }
    for (name, value) in f.told.parties(f.config) {
        req.insert_header(name.clone(), value)?;
    }
    req.insert_header(DECISION_ID_HEADER, f.told.decision_id)?;
    if let Some(host) = &f.pool.config.host_header {
        req.insert_header(http::header::HOST, host.as_str())?;
    }
    if let Some(value) = forwarded_for {
        req.insert_header(X_FORWARDED_FOR.as_str(), value)?;
    }
    req.insert_header(X_FORWARDED_PROTO.as_str(), HeaderValue::from_static(proto))
}

/// What the backend would get of a head: its wire, whether it kept its case map, and the rest of
/// what pingora keeps of it.
#[derive(Debug, PartialEq)]
struct Sent {
    wire: String,
    case: bool,
    line: String,
    end_stream: Option<bool>,
}

/// `req` rewritten for `f` three ways (the plain map allowed, not allowed, and the reference),
/// then given what is added after it through pingora's head (trace context, and a body's framing
/// when `body`); None where the rewrite failed.
fn three_ways(req: &RequestHeader, f: &Forwarding, body: bool) -> [Option<Sent>; 3] {
    [Some(true), Some(false), None].map(|plain| {
        let mut req = req.clone();
        match plain {
            Some(plain) => rewrite(&mut req, f, plain).ok()?,
            None => reference(&mut req, f).ok()?,
        }
        if body {
            frame_decided_body(&mut req, 3).unwrap();
        }
        req.insert_header(crate::telemetry::traceparent::TRACEPARENT, "00-1-2-01")
            .unwrap();
        Some(Sent {
            wire: String::from_utf8_lossy(&wire(&req)).into_owned(),
            case: req.has_case(),
            line: format!(
                "{} {} {:?}",
                req.method,
                String::from_utf8_lossy(req.raw_path()),
                req.version
            ),
            end_stream: req.send_end_stream(),
        })
    })
}

#[test]
fn a_head_as_wrk_sends_it_is_rewritten_without_its_case_map_and_written_alike() {
    let s = setting(false, false);
    let route = &s.config.routes[0];
    let f = Forwarding {
        route,
        pool: &s.pool,
        uri: &s.uri,
        withheld: &s.withheld,
        traced: false,
        told: Told::new(route, Some("EU.EORI.NL000000001"), None, "0123456789abcdef"),
        config: &s.config,
        client_addr: Some([127, 0, 0, 1].into()),
        tls: false,
        person: &[],
        own_cookies: &[],
    };
    let wrk = head(&[
        ("Host".into(), "127.0.0.1:8080".into()),
        ("Authorization".into(), "Bearer t".into()),
    ]);
    let [plain, kept, before] = three_ways(&wrk, &f, false).map(Option::unwrap);
    assert_eq!((plain.case, kept.case, before.case), (false, true, true));
    assert_eq!(plain.wire, before.wire);
    assert_eq!(kept.wire, before.wire);
    assert_eq!(
        plain.wire,
        "Host: 127.0.0.1:8080\r\nx-consumer-party-id: EU.EORI.NL000000001\r\n\
         x-decision-id: 0123456789abcdef\r\nx-forwarded-for: 127.0.0.1\r\n\
         x-forwarded-proto: http\r\ntraceparent: 00-1-2-01\r\n"
    );
    // A name pingora would write otherwise keeps the case map, and its case.
    let curl = head(&[
        ("Host".into(), "127.0.0.1:8080".into()),
        ("User-Agent".into(), "curl/8".into()),
    ]);
    let [plain, _, before] = three_ways(&curl, &f, false).map(Option::unwrap);
    assert!(plain.case);
    assert_eq!(plain, before);
    assert!(plain.wire.contains("User-Agent: curl/8\r\n"));
}

/// How pingora writes each name it knows without its case map is what `usual_form` says: a
/// pingora that wrote another would fail here, not on the wire.
#[test]
fn usual_form_is_how_pingora_writes_a_name_without_its_case() {
    use http::header::*;
    let names = [
        ACCEPT,
        ACCEPT_CHARSET,
        ACCEPT_ENCODING,
        ACCEPT_LANGUAGE,
        ACCEPT_RANGES,
        ACCESS_CONTROL_ALLOW_CREDENTIALS,
        ACCESS_CONTROL_ALLOW_HEADERS,
        ACCESS_CONTROL_ALLOW_METHODS,
        ACCESS_CONTROL_ALLOW_ORIGIN,
        ACCESS_CONTROL_EXPOSE_HEADERS,
        ACCESS_CONTROL_MAX_AGE,
        ACCESS_CONTROL_REQUEST_HEADERS,
        ACCESS_CONTROL_REQUEST_METHOD,
        AGE,
        ALLOW,
        ALT_SVC,
        AUTHORIZATION,
        CACHE_CONTROL,
        CACHE_STATUS,
        CDN_CACHE_CONTROL,
        CONNECTION,
        CONTENT_DISPOSITION,
        CONTENT_ENCODING,
        CONTENT_LANGUAGE,
        CONTENT_LENGTH,
        CONTENT_LOCATION,
        CONTENT_RANGE,
        CONTENT_SECURITY_POLICY,
        CONTENT_SECURITY_POLICY_REPORT_ONLY,
        CONTENT_TYPE,
        COOKIE,
        DNT,
        DATE,
        ETAG,
        EXPECT,
        EXPIRES,
        FORWARDED,
        FROM,
        HOST,
        IF_MATCH,
        IF_MODIFIED_SINCE,
        IF_NONE_MATCH,
        IF_RANGE,
        IF_UNMODIFIED_SINCE,
        LAST_MODIFIED,
        LINK,
        LOCATION,
        MAX_FORWARDS,
        ORIGIN,
        PRAGMA,
        PROXY_AUTHENTICATE,
        PROXY_AUTHORIZATION,
        PUBLIC_KEY_PINS,
        PUBLIC_KEY_PINS_REPORT_ONLY,
        RANGE,
        REFERER,
        REFERRER_POLICY,
        REFRESH,
        RETRY_AFTER,
        SEC_WEBSOCKET_ACCEPT,
        SEC_WEBSOCKET_EXTENSIONS,
        SEC_WEBSOCKET_KEY,
        SEC_WEBSOCKET_PROTOCOL,
        SEC_WEBSOCKET_VERSION,
        SERVER,
        SET_COOKIE,
        STRICT_TRANSPORT_SECURITY,
        TE,
        TRAILER,
        TRANSFER_ENCODING,
        UPGRADE,
        UPGRADE_INSECURE_REQUESTS,
        USER_AGENT,
        VARY,
        VIA,
        WARNING,
        WWW_AUTHENTICATE,
        X_CONTENT_TYPE_OPTIONS,
        X_DNS_PREFETCH_CONTROL,
        X_FRAME_OPTIONS,
        X_XSS_PROTECTION,
    ];
    let custom = [
        "x-decision-id",
        "x-consumer-party-id",
        "licensepurpose",
        "traceparent",
    ];
    let custom = custom.map(HeaderName::from_static);
    for name in names.iter().chain(&custom) {
        let mut req = RequestHeader::build_no_case("GET", b"/", None).unwrap();
        req.insert_header(name.clone(), "v").unwrap();
        let expected = format!("{}: v\r\n", usual_form(name));
        assert_eq!(String::from_utf8_lossy(&wire(&req)), expected);
    }
}

fn headers() -> impl Strategy<Value = Vec<(String, String)>> {
    let value = prop::sample::select(vec![
        "a",
        "b, c",
        "Bearer t",
        "session=s; theme=dark",
        "10.0.0.1",
        "https",
        "",
    ]);
    let header = (0..NAMES.len(), 0u8..4, value)
        .prop_map(|(name, case, value)| (written(NAMES[name], case), value.to_string()));
    prop::collection::vec(header, 0..10)
}

/// A person's header value: one that is not a header value fails the rewrite, every way.
fn person_value() -> impl Strategy<Value = Option<&'static str>> {
    prop::option::of(prop::sample::select(vec!["p", "not\u{7f}a value"]))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn the_backend_gets_the_same_bytes_with_or_without_the_case_map(
        headers in headers(),
        traced: bool,
        tls: bool,
        address in prop::option::of(prop::sample::select(vec!["127.0.0.1", "::1"])),
        person in person_value(),
        cookies: bool,
        broker: bool,
        (strips, host) in any::<(bool, bool)>(),
        (body, h2, end_stream) in any::<(bool, bool, bool)>(),
    ) {
        let s = setting(strips, host);
        let route = &s.config.routes[0];
        let person_headers: Vec<_> = (person.iter())
            .map(|v| (http::HeaderName::from_static("x-person"), v.to_string()))
            .collect();
        let own = ["session".to_string()];
        let f = Forwarding {
            route,
            pool: &s.pool,
            uri: &s.uri,
            withheld: &s.withheld,
            traced,
            told: Told::new(
                route,
                Some("EU.EORI.NL000000001"),
                broker.then_some("EU.EORI.NL000000002"),
                "0123456789abcdef",
            ),
            config: &s.config,
            client_addr: address.map(|a| a.parse().unwrap()),
            tls,
            person: &person_headers,
            own_cookies: if cookies { &own } else { &[] },
        };
        let mut req = head(&headers);
        if h2 {
            // An HTTP/1 client's head on its way to an HTTP/2 backend.
            req.set_version(http::Version::HTTP_2);
            req.set_send_end_stream(end_stream);
        }
        let [plain, kept, before] = three_ways(&req, &f, body);
        prop_assert_eq!(&kept, &before);
        let Some(plain) = plain else {
            prop_assert!(before.is_none());
            return Ok(());
        };
        let before = before.unwrap();
        prop_assert_eq!(&plain.wire, &before.wire);
        prop_assert_eq!(&plain.line, &before.line);
        prop_assert_eq!(plain.end_stream, before.end_stream);
        // What the configuration strips stays stripped, and the gateway's own cookie never
        // reaches the backend.
        let text = plain.wire.to_ascii_lowercase();
        let cookie_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("cookie:")).collect();
        prop_assert!(!strips || cookie_lines.is_empty(), "{}", text);
        prop_assert!(
            !cookies || cookie_lines.iter().all(|l| !l.contains("session=")),
            "{}",
            text
        );
        // The case map goes exactly where every name left was written in its usual form.
        let usual = headers.iter().all(|(name, _)| {
            let lower = name.to_ascii_lowercase();
            let parsed = http::HeaderName::from_bytes(lower.as_bytes()).unwrap();
            s.withheld.removes(&lower, traced) || usual_form(&parsed) == name
        });
        prop_assert_eq!(plain.case, !usual);
    }
}
