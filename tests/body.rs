//! Rules that read the JSON body, through the binary: values taken by pointer, one decision per
//! element of an array, the body read one way only (duplicate members, escapes, byte order marks,
//! trailing values, other types and encodings, deep nesting, numbers beyond integers refused), and
//! the backend given exactly the bytes decided on, over HTTP/1.1 (by length or chunked, with
//! `Expect: 100-continue`) and HTTP/2, or nothing at all.

use crate::support;

use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use support::process::GatewayProcess;
use support::*;

const BIN: &str = "body";
/// The AuthZEN callers' bearer secret.
const PEP_SECRET: &str = "0123456789abcdef0123456789abcdef-body-pep";

/// A POST route at `path` whose rule takes its identifiers from the body at `pointer` (`extra`:
/// more keys of the route).
fn body_route(name: &str, path: &str, pointer: &str, extra: &str) -> String {
    format!(
        r#"
[[route]]
name = "{name}"
methods = ["POST"]
path = "{path}"
upstream = "echo"
{extra}
[route.delegation]
policy_issuer = "{OWNER}"
resource_type = "CONTAINER"
identifiers = ["{{body.json.{pointer}}}"]
action = "iSHARE.READ"
"#
    )
}

/// Routes whose rules read the body, and the shipped NGSI-LD example in front of the echo
/// backend. The registry lets the consumer read every container but SECRET-1, and the carrier
/// read and update every container (conf/testbed-policies.json).
fn rules() -> String {
    let ngsi_ld = std::fs::read_to_string(repo().join("policies/ngsi-ld.toml"))
        .unwrap()
        .replace("upstream = \"legacy\"", "upstream = \"echo\"");
    [
        body_route("create", "/entities", "/id", ""),
        body_route("small", "/small", "/id", "max_body_bytes = 1024"),
        body_route("batch", "/batch", "/*/id", "max_body_elements = 3"),
        body_route("nested", "/nested", "/entities/*/id", ""),
        ngsi_ld,
    ]
    .concat()
}

struct Gateway {
    bed: Bed,
    gateway: GatewayProcess,
    /// http://127.0.0.1:PORT of the decision service, and the port of its gRPC listener
    decisions: String,
    grpc: u16,
    /// http://127.0.0.1:PORT
    plain: String,
    /// https://127.0.0.1:PORT
    tls: String,
    token: String,
    log: PathBuf,
    dir: PathBuf,
}

async fn start() -> Gateway {
    start_with("").await
}

/// `start`, with `server` as more keys of `[server]`.
async fn start_with(server: &str) -> Gateway {
    let bed = Bed::start(BIN).await;
    let dir = scratch_dir(BIN);
    let ports = Ports::free();
    let log = dir.join("decisions.log");
    let (decisions, grpc) = (free_port(), free_port());
    std::fs::write(dir.join("policies/rules.toml"), rules()).unwrap();
    std::fs::write(dir.join("pep.secret"), PEP_SECRET).unwrap();
    let extra = format!(
        "{server}\n[decision_log]\npath = \"{}\"\n\n[decision_api]\naddress = \"127.0.0.1:{decisions}\"\ngrpc_address = \"127.0.0.1:{grpc}\"\nbearer_secret_file = \"pep.secret\"\n",
        log.display()
    );
    let config = dir.join("gateway.toml");
    std::fs::write(&config, gateway_toml(&bed, &ports, &extra)).unwrap();
    let mut gateway = GatewayProcess::start(BIN, &config, ports.admin);
    gateway.wait_ready().await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let token = access_token(&bed.http, &plain, &bed.identity(CONSUMER)).await;
    Gateway {
        bed,
        gateway,
        decisions: format!("http://127.0.0.1:{decisions}"),
        grpc,
        tls: format!("https://127.0.0.1:{}", ports.tls),
        plain,
        token,
        log,
        dir,
    }
}

impl Gateway {
    /// `POST path` as these bytes over plain TCP, with a bearer token, `headers` and `body`
    /// (a Content-Length of its length unless `headers` frame it): the status and JSON answer.
    async fn raw(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Value) {
        let addr = self.plain.trim_start_matches("http://");
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n",
            self.token
        );
        let framed = headers.iter().any(|(n, _)| {
            n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding")
        });
        if !framed {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        let answer = raw_request(&self.plain, &bytes).await;
        let status = answer
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .unwrap_or_default();
        (status, raw_body(&answer))
    }

    /// `raw` with `Content-Type: application/json`.
    async fn json(&self, path: &str, body: &[u8]) -> (u16, Value) {
        self.raw(path, &[("Content-Type", "application/json")], body)
            .await
    }

    async fn stop(self) {
        self.gateway.terminate().await;
        let _ = std::fs::remove_dir_all(&self.dir);
        self.bed.stop().await;
    }
}

/// The echo backend's answer shows exactly `body` received, framed by its length, by POST.
#[track_caller]
fn forwarded_exactly((status, echo): &(u16, Value), body: &[u8]) {
    let text = std::str::from_utf8(body).unwrap();
    assert_eq!(
        (
            *status,
            echo["method"].as_str(),
            echo["body"].as_str(),
            echo["headers"]["content-length"].as_str(),
            echo["headers"].get("transfer-encoding"),
        ),
        (
            200,
            Some("POST"),
            Some(text),
            Some(body.len().to_string().as_str()),
            None
        ),
        "{echo}"
    );
}

/// A refusal's description names the element of the body's array that was refused.
#[track_caller]
fn names_element(description: &Value, index: usize) {
    let start = format!("element {index} of the body's array");
    assert!(
        description.as_str().is_some_and(|d| d.starts_with(&start)),
        "{description}"
    );
}

/// A refusal of the gateway (status and reason), which names its decision: nothing was forwarded.
#[track_caller]
fn refused((status, body): &(u16, Value), expected: (u16, &str)) {
    assert_refused(*status, body, expected);
    assert!(body["decision_id"].is_string(), "{body}");
    assert!(body.get("method").is_none(), "the backend answered: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_from_the_body_decides_and_the_backend_gets_the_bytes_decided_on() {
    let g = start().await;
    let body = br#"{"id": "C1", "type": "Container"}"#;
    forwarded_exactly(&g.json("/entities", body).await, body);
    // Any JSON type, with its charset.
    for content_type in ["application/ld+json", "application/json; charset=utf-8"] {
        let answer = g
            .raw("/entities", &[("Content-Type", content_type)], body)
            .await;
        forwarded_exactly(&answer, body);
    }
    let denied = g.json("/entities", br#"{"id": "SECRET-1"}"#).await;
    refused(&denied, (403, "denied_by_rule"));
    let line = decision_log_line(&g.log, denied.1["decision_id"].as_str().unwrap()).await;
    assert_eq!(
        (line["reason"].as_str(), line["values"][2]["value"].as_str()),
        (Some("denied_by_rule"), Some("SECRET-1")),
        "{line}"
    );
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_read_two_ways_is_refused_and_never_forwarded() {
    let g = start().await;
    let deep = format!(
        r#"{{"id": "C1", "x": {}{}}}"#,
        "[".repeat(70),
        "]".repeat(70)
    );
    let cases: Vec<(&[u8], (u16, &str))> = vec![
        (
            br#"{"id":"C1","id":"SECRET-1"}"#,
            (400, "body_duplicate_member"),
        ),
        (
            br#"{"id":"C1","\u0069d":"SECRET-1"}"#,
            (400, "body_duplicate_member"),
        ),
        (
            br#"{"id":"C1","x":{"a":1,"a":2}}"#,
            (400, "body_duplicate_member"),
        ),
        // Names equal but for case, which a backend may bind without case.
        (
            br#"{"id":"C1","Id":"SECRET-1"}"#,
            (400, "body_duplicate_member"),
        ),
        (
            br#"{"id":"C1","\u0049D":"SECRET-1"}"#,
            (400, "body_duplicate_member"),
        ),
        // JSON-LD that makes another member the entity's id.
        (
            br#"{"@context":{"ident":"@id","id":null},"id":"C1","ident":"SECRET-1"}"#,
            (400, "body_json_ld_keyword"),
        ),
        (
            br#"{"id":"C1","@id":"SECRET-1"}"#,
            (400, "body_json_ld_keyword"),
        ),
        (b"\xEF\xBB\xBF{\"id\":\"C1\"}", (400, "body_not_utf8")),
        (b"{\"id\":\"C1\",\"x\":\"\xff\"}", (400, "body_not_utf8")),
        (
            br#"{"id":"C1"}{"id":"SECRET-1"}"#,
            (400, "body_trailing_data"),
        ),
        (br#"{"id":"C1"} garbage"#, (400, "body_trailing_data")),
        (br#"{"id":"C1""#, (400, "body_not_json")),
        (br#"{"id":"C1","n":1e400}"#, (400, "body_not_json")),
        (deep.as_bytes(), (400, "body_too_deep")),
        (
            br#"{"id":123456789012345678901234567890}"#,
            (400, "body_value_unresolved"),
        ),
        (br#"{"id":1.0}"#, (400, "body_value_unresolved")),
        (br#"{"id":null}"#, (400, "body_value_unresolved")),
        (br#"{"id":{"nested":"C1"}}"#, (400, "body_value_unresolved")),
        (br#"{"name":"C1"}"#, (400, "body_value_unresolved")),
        (b"", (400, "body_missing")),
        // A _method member, which some frameworks run as the method.
        (
            br#"{"id":"C1","_method":"DELETE"}"#,
            (400, "ambiguous_request"),
        ),
    ];
    for (body, expected) in cases {
        let answer = g.json("/entities", body).await;
        refused(&answer, expected);
    }
    let ok = br#"{"id":"C1"}"#;
    for (headers, expected) in [
        (
            vec![("Content-Type", "text/plain")],
            (415, "body_not_json_type"),
        ),
        (vec![], (415, "body_not_json_type")),
        (
            vec![("Content-Type", "application/json; charset=utf-16")],
            (415, "body_not_json_type"),
        ),
        (
            vec![
                ("Content-Type", "application/json"),
                ("Content-Type", "application/json"),
            ],
            (415, "body_not_json_type"),
        ),
        (
            vec![
                ("Content-Type", "application/json"),
                ("Content-Encoding", "gzip"),
            ],
            (415, "body_encoded"),
        ),
    ] {
        let answer = g.raw("/entities", &headers, ok).await;
        refused(&answer, expected);
    }
    let line = decision_log_line(
        &g.log,
        g.json("/entities", br#"{"id":"A","id":"B"}"#).await.1["decision_id"]
            .as_str()
            .unwrap(),
    )
    .await;
    assert_eq!(line["reason"], "body_duplicate_member", "{line}");
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_element_of_an_array_is_decided_and_all_must_be_granted() {
    let g = start().await;
    let two = br#"[{"id":"A","type":"Container"},{"id":"B"}]"#;
    forwarded_exactly(&g.json("/batch", two).await, two);
    let nested = br#"{"entities":[{"id":"A"},{"id":"B"}]}"#;
    forwarded_exactly(&g.json("/nested", nested).await, nested);
    let denied = g
        .json("/batch", br#"[{"id":"A"},{"id":"SECRET-1"},{"id":"B"}]"#)
        .await;
    refused(&denied, (403, "denied_by_rule"));
    names_element(&denied.1["error_description"], 1);
    let line = decision_log_line(&g.log, denied.1["decision_id"].as_str().unwrap()).await;
    assert_eq!(line["reason"], "denied_by_rule", "{line}");
    for (path, body, expected) in [
        ("/batch", &b"[]"[..], (400, "body_no_elements")),
        ("/nested", br#"{"entities":[]}"#, (400, "body_no_elements")),
        (
            "/batch",
            br#"[{"id":"A"},{"id":"B"},{"id":"C"},{"id":"D"}]"#,
            (413, "body_too_many_elements"),
        ),
        ("/batch", br#"{"id":"A"}"#, (400, "body_value_unresolved")),
        (
            "/batch",
            br#"[{"id":"A"},{"name":"B"}]"#,
            (400, "body_value_unresolved"),
        ),
        (
            "/nested",
            br#"{"entities":{"id":"A"}}"#,
            (400, "body_value_unresolved"),
        ),
    ] {
        let answer = g.json(path, body).await;
        refused(&answer, expected);
    }
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_is_bounded_and_forwarded_as_read_whatever_its_framing() {
    let g = start().await;
    // Over the route's bound, declared or not.
    let large = format!(r#"{{"id":"C1","pad":"{}"}}"#, "x".repeat(2000));
    refused(
        &g.json("/small", large.as_bytes()).await,
        (413, "body_too_large"),
    );
    let chunked = |body: &[u8], trailer: &str| {
        let mut out = Vec::new();
        for chunk in body.chunks(7) {
            out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("0\r\n{trailer}\r\n").as_bytes());
        out
    };
    let te = [
        ("Content-Type", "application/json"),
        ("Transfer-Encoding", "chunked"),
    ];
    let answer = g.raw("/small", &te, &chunked(large.as_bytes(), "")).await;
    refused(&answer, (413, "body_too_large"));
    // Chunked, with a trailer: the backend gets the bytes decided on, by their length.
    let body = br#"{"id":"C1","type":"Container"}"#;
    let answer = g
        .raw("/entities", &te, &chunked(body, "X-Id: SECRET-1\r\n"))
        .await;
    forwarded_exactly(&answer, body);
    assert!(answer.1["headers"].get("x-id").is_none(), "{}", answer.1);
    // A Content-Length beside Transfer-Encoding is dropped (RFC 9112 §6.1): the chunked body is
    // the one decided on and the one forwarded, by its own length.
    let both = [
        ("Content-Type", "application/json"),
        ("Transfer-Encoding", "chunked"),
        ("Content-Length", "11"),
    ];
    let answer = g.raw("/entities", &both, &chunked(body, "")).await;
    forwarded_exactly(&answer, body);
    let smuggled = br#"{"id":"C1"}{"id":"SECRET-1"}"#;
    let answer = g.raw("/entities", &both, &chunked(smuggled, "")).await;
    refused(&answer, (400, "body_trailing_data"));
    // Bytes after the declared length are another request, not part of the body.
    let mut pipelined = body.to_vec();
    pipelined.extend_from_slice(b"GET /entities HTTP/1.1\r\n\r\n");
    let (status, echo) = g
        .raw(
            "/entities",
            &[
                ("Content-Type", "application/json"),
                ("Content-Length", &body.len().to_string()),
            ],
            &pipelined,
        )
        .await;
    forwarded_exactly(&(status, echo), body);
    // Expect: 100-continue is answered before the body is read.
    let addr = g.plain.trim_start_matches("http://").to_string();
    let head = format!(
        "POST /entities HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
        g.token,
        body.len()
    );
    let answer = expect_continue(&addr, head.as_bytes(), body).await;
    let echo = raw_body(answer.rsplit_once("HTTP/1.1 200").map_or("", |(_, a)| a));
    forwarded_exactly(&(200, echo), body);
    // Over HTTP/2 the same.
    let h2 = h2_client(&g.bed.keys.ca_file);
    let send = |body: &'static [u8]| {
        h2.post(format!("{}/entities", g.tls))
            .bearer_auth(&g.token)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let answer = status_json(send(body).await.unwrap()).await;
    forwarded_exactly(&answer, body);
    let answer = status_json(send(br#"{"id":"C1","id":"SECRET-1"}"#).await.unwrap()).await;
    refused(&answer, (400, "body_duplicate_member"));
    g.stop().await;
}

/// A route whose rule reads the body reads it only for a caller who may call: a request without a
/// valid token, or with a Host that is none, is answered at once, without a `100 Continue` and without any of
/// its body sent (a stranger makes the gateway hold no body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_is_read_only_once_a_caller_who_may_call_is_found() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let g = start().await;
    let addr = g.plain.trim_start_matches("http://").to_string();
    let forged = format!("{}x", g.token);
    let bearer = |token: &str| format!("Authorization: Bearer {token}\r\n");
    for (host, extra, expected) in [
        (addr.as_str(), bearer(&forged), (401, "invalid_token")),
        (addr.as_str(), String::new(), (401, "missing_token")),
        ("not a host", bearer(&g.token), (400, "invalid_host")),
    ] {
        let head = format!(
            "POST /entities HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
        );
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains("decision_id") {
            let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk))
                .await
                .expect("an answer without the body sent")
                .unwrap();
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&chunk[..n]);
        }
        let answer = String::from_utf8_lossy(&answer).to_string();
        let status = format!("HTTP/1.1 {}", expected.0);
        assert!(answer.starts_with(&status), "{expected:?}: {answer}");
        assert_eq!(raw_body(&answer)["reason"], expected.1, "{answer}");
    }
    g.stop().await;
}

/// Send `head`, wait for `100 Continue`, then send `body`: everything answered.
async fn expect_continue(addr: &str, head: &[u8], body: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head).await.unwrap();
    let mut interim = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut interim))
        .await
        .expect("a 100 Continue before the body is sent")
        .unwrap();
    let interim = String::from_utf8_lossy(&interim[..n]).to_string();
    assert!(interim.starts_with("HTTP/1.1 100"), "{interim}");
    stream.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    format!("{interim}{}", String::from_utf8_lossy(&answer))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_sends_the_body_and_it_is_decided_as_the_proxy_decides_it() {
    let g = start().await;
    let bearer = format!("Bearer {}", g.token);
    let http = reqwest::Client::new();
    let check = |body: &'static [u8], extra: &[(&'static str, &'static str)]| {
        let mut req = http
            .post(format!("{}/ext_authz/entities", g.decisions))
            .header("authorization", &bearer)
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in extra {
            req = req.header(*name, *value);
        }
        req.send()
    };
    let (status, _) = status_json(check(br#"{"id":"C1"}"#, &[]).await.unwrap()).await;
    assert_eq!(status, 200);
    for (body, extra, expected) in [
        (
            &br#"{"id":"SECRET-1"}"#[..],
            &[][..],
            (403, "denied_by_rule"),
        ),
        (
            br#"{"id":"C1","id":"SECRET-1"}"#,
            &[],
            (400, "body_duplicate_member"),
        ),
        (
            br#"{"id":"C1"} {"id":"SECRET-1"}"#,
            &[],
            (400, "body_trailing_data"),
        ),
        (
            br#"{"id":"C1"}"#,
            &[("x-envoy-auth-partial-body", "true")],
            (413, "body_partial"),
        ),
        (b"", &[], (400, "body_unseen")),
        (
            br#"{"id":"C1"}"#,
            &[("content-encoding", "gzip")],
            (415, "body_encoded"),
        ),
    ] {
        let (status, answer) = status_json(check(body, extra).await.unwrap()).await;
        assert_refused(status, &answer, expected);
    }
    // Over gRPC, the body as bytes or as text.
    use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;
    use envoy_types::pb::envoy::service::auth::v3::{
        attribute_context, check_response, AttributeContext, CheckRequest,
    };
    let mut client = AuthorizationClient::connect(format!("http://127.0.0.1:{}", g.grpc))
        .await
        .unwrap();
    let request = |raw: &[u8], text: &str, partial: bool| {
        let mut headers = std::collections::HashMap::from([
            ("authorization".to_string(), bearer.clone()),
            ("content-type".to_string(), "application/json".to_string()),
        ]);
        if partial {
            headers.insert("x-envoy-auth-partial-body".into(), "true".into());
        }
        CheckRequest {
            attributes: Some(AttributeContext {
                request: Some(attribute_context::Request {
                    http: Some(attribute_context::HttpRequest {
                        method: "POST".into(),
                        path: "/entities".into(),
                        host: "api.example".into(),
                        headers,
                        body: text.into(),
                        raw_body: raw.to_vec(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }
    };
    for (req, code, status) in [
        (request(br#"{"id":"C1"}"#, "", false), 0, 200),
        (request(b"", r#"{"id":"C1"}"#, false), 0, 200),
        (request(br#"{"id":"SECRET-1"}"#, "", false), 7, 403),
        (request(br#"{"id":"C1"}"#, "", true), 8, 413),
    ] {
        let answer = client.check(req).await.unwrap().into_inner();
        assert_eq!(answer.status.as_ref().unwrap().code, code, "{answer:?}");
        let got = match &answer.http_response {
            Some(check_response::HttpResponse::DeniedResponse(d)) => {
                d.status.as_ref().unwrap().code
            }
            Some(check_response::HttpResponse::OkResponse(_)) => 200,
            _ => 0,
        };
        assert_eq!(got, status, "{answer:?}");
    }
    g.stop().await;
}

#[test]
fn explain_and_rule_tests_decide_on_a_described_body() {
    let (text, _) = support::shipped::shipped_offline(BIN);
    let dir = scratch_dir(BIN);
    let config = dir.join("gateway.toml");
    std::fs::write(&config, text).unwrap();
    let evidence = repo().join("policies/tests/evidence/consumer-manages-ngsi-ld-containers.json");
    let explain = |path: &str, body: &str| {
        let out = binary_output(&[
            "explain",
            "--config",
            config.to_str().unwrap(),
            "--method",
            "POST",
            "--path",
            path,
            "--as",
            CONSUMER,
            "--header",
            "content-type:application/ld+json",
            "--body",
            body,
            "--evidence",
            evidence.to_str().unwrap(),
            "--json",
        ]);
        let line: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", printed(&out)));
        line
    };
    let created = explain(
        "/ngsi-ld/v1/entities",
        r#"{"id":"urn:ngsi-ld:Container:C1","type":"Container"}"#,
    );
    assert_eq!(created["reason"], "granted", "{created}");
    assert_eq!(
        created["mask"]["identifiers"][0], "urn:ngsi-ld:Container:C1",
        "{created}"
    );
    let twice = explain(
        "/ngsi-ld/v1/entities",
        r#"{"id":"urn:ngsi-ld:Container:C1","type":"Container","id":"urn:ngsi-ld:Container:SECRET-1"}"#,
    );
    assert_eq!(
        (twice["stage"].as_str(), twice["reason"].as_str()),
        (Some("route"), Some("body_duplicate_member")),
        "{twice}"
    );
    // A body from a file: every element of a batch decided on.
    let batch = dir.join("batch.json");
    std::fs::write(
        &batch,
        r#"[{"id":"urn:ngsi-ld:Container:C1","type":"Container"},{"id":"urn:ngsi-ld:Container:SECRET-1","type":"Container"}]"#,
    )
    .unwrap();
    let denied = explain(
        "/ngsi-ld/v1/entityOperations/upsert",
        &format!("@{}", batch.display()),
    );
    assert_eq!(
        (denied["outcome"].as_str(), denied["reason"].as_str()),
        (Some("denied"), Some("denied_by_rule")),
        "{denied}"
    );
    names_element(&denied["description"], 1);
    // The shipped rule tests of ngsi-ld.toml, whose cases carry bodies.
    let out = binary_output(&["test", "--config", config.to_str().unwrap()]);
    let said = printed(&out);
    assert!(out.status.success(), "{said}");
    let ngsi_ld: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("ngsi-ld.toml"))
        .collect();
    assert!(
        ngsi_ld.len() >= 10 && ngsi_ld.iter().all(|l| l.starts_with("ok ")),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_ngsi_ld_routes_forward_only_what_every_entity_grants() {
    let g = start().await;
    let carrier = access_token(&g.bed.http, &g.plain, &g.bed.identity(SP2)).await;
    let upsert = |token: &str, body: &'static [u8]| {
        g.bed
            .http
            .post(format!("{}/ngsi-ld/v1/entityOperations/upsert", g.tls))
            .bearer_auth(token)
            .header("content-type", "application/ld+json")
            .body(body)
            .send()
    };
    // The carrier may update containers: every entity of the batch is one, and the batch goes.
    let batch = br#"[{"id":"urn:ngsi-ld:Container:C1","type":"CONTAINER"},{"id":"urn:ngsi-ld:Container:C2","type":"CONTAINER","temperature":{"type":"Property","value":4}}]"#;
    let answer = status_json(upsert(&carrier, batch).await.unwrap()).await;
    forwarded_exactly(&answer, batch);
    assert_eq!(answer.1["path"], "/ngsi-ld/v1/entityOperations/upsert");
    // One entity of another type refuses the whole batch: nothing reaches the broker.
    let mixed = br#"[{"id":"urn:ngsi-ld:Container:C1","type":"CONTAINER"},{"id":"urn:ngsi-ld:Building:B1","type":"BUILDING"}]"#;
    let answer = status_json(upsert(&carrier, mixed).await.unwrap()).await;
    refused(&answer, (403, "denied_by_rule"));
    names_element(&answer.1["error_description"], 1);
    // The consumer may only read: its upsert is refused.
    let one = br#"[{"id":"urn:ngsi-ld:Container:C1","type":"CONTAINER"}]"#;
    let answer = status_json(upsert(&g.token, one).await.unwrap()).await;
    assert_eq!(answer.0, 403, "{}", answer.1);
    assert!(answer.1.get("method").is_none(), "{}", answer.1);
    // A patch names its attributes by the body's members; the registry grants no "Container".
    let patch = g
        .bed
        .http
        .patch(format!(
            "{}/ngsi-ld/v1/entities/urn:ngsi-ld:Container:C1/attrs",
            g.tls
        ))
        .bearer_auth(&carrier)
        .header("content-type", "application/json")
        .body(r#"{"temperature":{"type":"Property","value":5}}"#)
        .send()
        .await
        .unwrap();
    let answer = status_json(patch).await;
    refused(&answer, (403, "denied_by_rule"));
    let line = decision_log_line(&g.log, answer.1["decision_id"].as_str().unwrap()).await;
    assert_eq!(line["mask"]["attributes"][0], "temperature", "{line}");
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authzen_evaluation_with_the_body_is_decided_by_the_routes_own_rule() {
    let g = start().await;
    let http = reqwest::Client::new();
    let evaluate = |route: &str, body: Value| {
        let evaluation = serde_json::json!({
            "subject": {"type": "party", "id": CONSUMER},
            "resource": {"type": "CONTAINER", "id": "batch",
                         "properties": {"route": route, "body": body}},
            "action": {"name": "iSHARE.READ"},
        });
        http.post(format!("{}/access/v1/evaluation", g.decisions))
            .bearer_auth(PEP_SECRET)
            .json(&evaluation)
            .send()
    };
    let answer = |route: &'static str, body: Value| async move {
        let (status, answer) = status_json(evaluate(route, body).await.unwrap()).await;
        assert_eq!(status, 200, "{answer}");
        (
            answer["decision"].as_bool(),
            answer["context"]["reason"].as_str().map(str::to_string),
            answer,
        )
    };
    let (decision, reason, _) =
        answer("batch", serde_json::json!([{"id": "A"}, {"id": "B"}])).await;
    assert_eq!((decision, reason.as_deref()), (Some(true), Some("granted")));
    let denied = serde_json::json!([{"id": "A"}, {"id": "SECRET-1"}]);
    let (decision, reason, whole) = answer("batch", denied).await;
    assert_eq!(
        (decision, reason.as_deref()),
        (Some(false), Some("denied_by_rule")),
        "{whole}"
    );
    names_element(&whole["context"]["description"], 1);
    for (route, body, expected) in [
        ("batch", serde_json::json!([]), "body_no_elements"),
        (
            "create",
            serde_json::json!({"name": "C1"}),
            "body_value_unresolved",
        ),
        (
            "create",
            serde_json::json!({"id": 1.5}),
            "body_value_unresolved",
        ),
    ] {
        let (decision, reason, whole) = answer(route, body).await;
        assert_eq!(
            (decision, reason.as_deref()),
            (Some(false), Some(expected)),
            "{whole}"
        );
    }
    // A route whose rule reads the path cannot be evaluated on a body alone.
    let path_route = evaluate(
        "ngsi-ld-attrs-patch",
        serde_json::json!({"temperature": {}}),
    );
    let (status, whole) = status_json(path_route.await.unwrap()).await;
    assert_refused(status, &whole, (400, "invalid_evaluation"));
    assert!(
        whole["error_description"]
            .as_str()
            .is_some_and(|m| m.contains("reads the path")),
        "{whole}"
    );
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_read_to_decide_keeps_the_body_deadline_and_minimum_rate() {
    let g = start_with("body_deadline = \"1s\"\nbody_min_rate = 1\n").await;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = g.plain.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /entities HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 40\r\nConnection: close\r\n\r\n{{\"id\":",
        g.token
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // The rest never comes: within the deadline (1 s, and a second per byte received), refused.
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    let _ = tokio::time::timeout(Duration::from_secs(15), read).await;
    let answer = String::from_utf8_lossy(&answer).to_string();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_refused(400, &raw_body(&answer), (400, "unreadable_body"));
    assert!(started.elapsed() < Duration::from_secs(10), "{answer}");
    g.stop().await;
}
