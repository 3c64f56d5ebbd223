//! Outside input read as the scheme and the backend read it, through the binary in a 3.0 scheme:
//! numbers compared only where an exact decimal reader and a binary64 reader agree (a huge
//! exponent decides nothing, through the proxy, nginx, Envoy and AuthZEN, from a query and a
//! body), member names folded as JSON binders fold them (bodies, AuthZEN, evidence, the
//! attributes a Deny names), one rule for the characters a value may hold, and evidence tokens
//! read one way only, with every claim of the scheme and a bounded life.

use crate::support;

use serde_json::{json, Value};
use support::process::GatewayProcess;
use support::*;

const BIN: &str = "readers";
const PEP_SECRET: &str = "0123456789abcdef0123456789abcdef-readers-pep";
const HUGE: [&str; 4] = [
    "1e9223372036854775807",
    "1E9223372036854775807",
    "9.9e9223372036854775807",
    "10e9223372036854775806",
];

fn rules() -> String {
    format!(
        r#"
[[route]]
name = "amounts"
methods = ["GET", "POST"]
path = "/api/amounts/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER3}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
action = "iSHARE.READ"
evidence = ["header"]
[route.delegation.conditions]
amount = "{{query.amount}}"

[[route]]
name = "orders"
methods = ["POST"]
path = "/api/orders"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER3}"
resource_type = "CONTAINER"
identifiers = ["{{body.json./sku}}"]
action = "iSHARE.READ"
evidence = ["header"]
[route.delegation.conditions]
amount = "{{body.json./amount}}"

[[route]]
name = "attrs"
methods = ["PATCH"]
path = "/api/things/{{id}}/attrs"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER3}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
attributes = ["{{body.keys.}}"]
action = "iSHARE.READ"
evidence = ["header"]
"#
    )
}

struct Gateway {
    bed: Bed,
    gateway: GatewayProcess,
    /// http://127.0.0.1:PORT of the gateway and of its decision service
    plain: String,
    decisions: String,
    token: String,
}

/// The 3.0 testbed, and the configuration of the gateway as its Warehouse 13 with a decision
/// service on `decisions`.
async fn configured(decisions: u16) -> (Bed, std::path::PathBuf, Ports) {
    let bed = Bed::start_of(testbed_config_of(BIN, "conf/testbed-3.0.toml")).await;
    let extra = format!(
        "\n[decision_api]\naddress = \"127.0.0.1:{decisions}\"\nbearer_secret_file = \"pep.secret\"\n"
    );
    let (dir, ports) = gateway_dir(&bed, BIN, &rules(), &extra, |t| {
        t.replace(SO, SO3).replace(SP, SP3).replace(
            "[scheme_owner]\n",
            "[scheme_owner]\nscheme_version = \"3.0\"\n",
        )
    });
    std::fs::write(dir.join("pep.secret"), PEP_SECRET).unwrap();
    (bed, dir, ports)
}

/// The gateway binary on `configured`.
async fn start() -> Gateway {
    let decisions = free_port();
    let (bed, dir, ports) = configured(decisions).await;
    let mut gateway = GatewayProcess::start(BIN, &dir.join("gateway.toml"), ports.admin);
    gateway.wait_ready().await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let form = token_form(&bed.identity(CONSUMER3), SP3, None);
    let (status, answer) = status_json(request_token(&bed.http, &plain, form).await).await;
    assert_eq!(status, 200, "{answer}");
    let token = answer["access_token"].as_str().unwrap().to_string();
    Gateway {
        bed,
        gateway,
        plain,
        decisions: format!("http://127.0.0.1:{decisions}"),
        token,
    }
}

impl Gateway {
    /// Evidence the owner's registry signs for the consumer, as exactly this text: its rules
    /// (JSON text) for every container; `claims` more claims (text, after a comma).
    fn evidence(&self, rules: &str, claims: &str) -> String {
        self.evidence_of("", rules, claims)
    }

    /// `evidence`, with `target` more members of the policy's target (text, after a comma).
    fn evidence_of(&self, target: &str, rules: &str, claims: &str) -> String {
        let now = ishare_gateway::scheme::Timestamp::now().secs();
        let jti = uuid::Uuid::new_v4();
        let payload = format!(
            r#"{{"iss":"{AR3}","sub":"{AR3}","aud":"{CONSUMER3}","jti":"{jti}","iat":{now},"exp":{exp}{claims},"delegationEvidence":{{"notBefore":{nb},"notOnOrAfter":{na},"policyIssuer":"{OWNER3}","target":{{"accessSubject":"{CONSUMER3}"}},"policySets":[{{"policies":[{{"target":{{"resource":{{"type":"CONTAINER","identifiers":["*"],"attributes":["*"]}},"actions":["iSHARE.READ"],"environment":{{"serviceProviders":["{SP3}"]}}{target}}},"rules":{rules}}}]}}]}}}}"#,
            exp = now + 30,
            nb = now - 10,
            na = now + 600,
        );
        sign_text(self.bed.creds(AR3), &payload)
    }

    /// `method path` with the consumer's token, this evidence, and a JSON body if given.
    async fn call(
        &self,
        method: &str,
        path: &str,
        evidence: &str,
        body: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self
            .bed
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.plain))
            .bearer_auth(&self.token)
            .header("delegationEvidence", evidence);
        if let Some(body) = body {
            req = req
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        status_json(req.send().await.unwrap()).await
    }

    /// The decision service asked as nginx's auth_request asks it.
    async fn nginx(&self, path: &str, evidence: &str) -> (u16, Value) {
        let resp = self
            .bed
            .http
            .get(format!("{}/nginx", self.decisions))
            .header("X-Original-URI", path)
            .header("X-Original-Method", "GET")
            .bearer_auth(&self.token)
            .header("delegationEvidence", evidence)
            .send()
            .await
            .unwrap();
        status_json(resp).await
    }

    /// The decision service asked as Envoy's HTTP ext_authz asks it.
    async fn envoy(&self, path: &str, evidence: &str) -> (u16, Value) {
        let resp = self
            .bed
            .http
            .get(format!("{}/ext_authz{path}", self.decisions))
            .bearer_auth(&self.token)
            .header("delegationEvidence", evidence)
            .send()
            .await
            .unwrap();
        status_json(resp).await
    }

    /// An AuthZEN evaluation as this text: the answer's status and body.
    async fn authzen_text(&self, evaluation: String) -> (u16, Value) {
        let resp = self
            .bed
            .http
            .post(format!("{}/access/v1/evaluation", self.decisions))
            .bearer_auth(PEP_SECRET)
            .header("content-type", "application/json")
            .body(evaluation)
            .send()
            .await
            .unwrap();
        status_json(resp).await
    }

    /// An AuthZEN evaluation: its decision and reason.
    async fn authzen(&self, evaluation: &Value) -> (bool, String) {
        let (status, body) = self.authzen_text(evaluation.to_string()).await;
        assert_eq!(status, 200, "{body}");
        let reason = body["context"]["reason"].as_str().unwrap_or_default();
        (body["decision"] == json!(true), reason.to_string())
    }

    async fn stop(self) {
        self.gateway.terminate().await;
        self.bed.stop().await;
    }
}

fn condition(operator: &str, right: Value) -> Value {
    json!({"leftOperand": "amount", "operator": operator, "rightOperand": right})
}

/// Evidence the owner's registry signs, every container, with `rules` as text.
fn rules_text(rules: &[Value]) -> String {
    Value::Array(rules.to_vec()).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_past_any_bound_decides_nothing_through_every_interface() {
    let g = start().await;
    let permit_below = rules_text(&[
        json!({"effect": "Permit", "conditions": condition("lessThan", json!("1000"))}),
    ]);
    let deny_above = rules_text(&[
        json!({"effect": "Permit"}),
        json!({"effect": "Deny", "conditions": condition("greaterThan", json!(1000))}),
    ]);
    for rules in [&permit_below, &deny_above] {
        let evidence = g.evidence(rules, "");
        let (status, body) = g
            .call("GET", "/api/amounts/C1?amount=999", &evidence, None)
            .await;
        assert_eq!(status, 200, "{rules}: {body}");
        for huge in HUGE {
            let path = format!("/api/amounts/C1?amount={huge}");
            let (status, body) = g.call("GET", &path, &evidence, None).await;
            assert_refused(status, &body, (403, "condition_operand_type"));
            let (status, body) = g.nginx(&path, &evidence).await;
            assert_refused(status, &body, (403, "condition_operand_type"));
            let (status, body) = g.envoy(&path, &evidence).await;
            assert_refused(status, &body, (403, "condition_operand_type"));
            let body = format!(r#"{{"sku":"C1","amount":"{huge}"}}"#);
            let (status, answer) = g.call("POST", "/api/orders", &evidence, Some(&body)).await;
            assert_refused(status, &answer, (403, "condition_operand_type"));
            let evaluation = json!({
                "subject": {"type": "party", "id": CONSUMER3},
                "resource": {"type": "CONTAINER", "id": "C1", "properties": {"policy_issuer": OWNER3}},
                "action": {"name": "iSHARE.READ"},
                "context": {"delegation_evidence": evidence, "conditions": {"amount": huge}},
            });
            assert_eq!(
                g.authzen(&evaluation).await,
                (false, "condition_operand_type".to_string()),
                "{huge}"
            );
        }
        // A number binary64 reads as another: no order, where the two readers disagree.
        for (amount, status) in [("999.99999999999999999", 403), ("999.5", 200)] {
            let path = format!("/api/amounts/C1?amount={amount}");
            let (got, body) = g.call("GET", &path, &evidence, None).await;
            assert_eq!(got, status, "{amount}: {body}");
        }
    }
    // Text a reader takes for the number a Permit excludes is not other text.
    let not_zero =
        rules_text(&[json!({"effect": "Permit", "conditions": condition("notEqual", json!("0"))})]);
    let evidence = g.evidence(&not_zero, "");
    for (amount, refusal) in [
        ("00", (403, "condition_operand_type")),
        ("%2B0", (403, "condition_operand_type")),
        (".0", (403, "condition_operand_type")),
        ("0.0e5", (403, "condition_operand_type")),
        ("0x0", (403, "condition_operand_type")),
        ("0.", (400, "ambiguous_request")),
    ] {
        let path = format!("/api/amounts/C1?amount={amount}");
        let (status, body) = g.call("GET", &path, &evidence, None).await;
        assert_refused(status, &body, refusal);
    }
    let (status, body) = g
        .call("GET", "/api/amounts/C1?amount=1", &evidence, None)
        .await;
    assert_eq!(status, 200, "{body}");
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_a_binder_folds_together_are_one_member_of_a_body_and_of_authzen() {
    let g = start().await;
    let evidence = g.evidence(r#"[{"effect":"Permit"}]"#, "");
    let (status, body) = g
        .call(
            "POST",
            "/api/orders",
            &evidence,
            Some(r#"{"sku":"C1","amount":"1"}"#),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for twice in [
        "{\"sku\":\"C1\",\"\u{17F}ku\":\"SECRET-1\",\"amount\":\"1\"}",
        "{\"sku\":\"C1\",\"SKU\":\"SECRET-1\",\"amount\":\"1\"}",
        "{\"sku\":\"C1\",\"amount\":\"1\",\"\u{131}d\":\"a\",\"id\":\"b\"}",
        "{\"sku\":\"C1\",\"amount\":\"1\",\"\u{130}d\":\"a\",\"id\":\"b\"}",
        "{\"sku\":\"C1\",\"amount\":\"1\",\"kind\":\"a\",\"\u{212A}ind\":\"b\"}",
    ] {
        let (status, body) = g.call("POST", "/api/orders", &evidence, Some(twice)).await;
        assert_refused(status, &body, (400, "body_duplicate_member"));
        // AuthZEN reads its whole request one way only, the body it carries too.
        let evaluation = format!(
            r#"{{"subject":{{"type":"party","id":"{CONSUMER3}"}},"resource":{{"type":"CONTAINER","id":"-","properties":{{"route":"orders","body":{twice}}}}},"action":{{"name":"iSHARE.READ"}},"context":{{"delegation_evidence":"{evidence}"}}}}"#
        );
        let (status, body) = g.authzen_text(evaluation).await;
        assert_refused(status, &body, (400, "duplicate_member"));
    }
    let evaluation = json!({
        "subject": {"type": "party", "id": CONSUMER3},
        "resource": {"type": "CONTAINER", "id": "-", "properties": {"route": "orders", "body": {"sku": "C1", "amount": "1"}}},
        "action": {"name": "iSHARE.READ"},
        "context": {"delegation_evidence": evidence},
    });
    assert_eq!(g.authzen(&evaluation).await, (true, "granted".to_string()));
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_attribute_is_denied_in_every_spelling_a_binder_reads_as_it() {
    let g = start().await;
    let deny_secret = r#"[{"effect":"Permit"},{"effect":"Deny","target":{"resource":{"attributes":["secret"]}}}]"#;
    let evidence = g.evidence(deny_secret, "");
    let path = "/api/things/C1/attrs";
    let (status, body) = g
        .call("PATCH", path, &evidence, Some(r#"{"temp":1}"#))
        .await;
    assert_eq!(status, 200, "{body}");
    for (patch, refusal) in [
        (r#"{"temp":1,"secret":2}"#, (403, "denied_by_rule")),
        (r#"{"temp":1,"SECRET":2}"#, (403, "denied_by_rule")),
        (r#"{"temp":1,"Secret":2}"#, (403, "denied_by_rule")),
        (
            "{\"temp\":1,\"\u{17F}ecret\":2}",
            (400, "ambiguous_request"),
        ),
        // serde_json built with raw_value reads this object as {"secret":2}.
        (
            r#"{"$serde_json::private::RawValue":"{\"secret\":2}"}"#,
            (400, "body_duplicate_member"),
        ),
    ] {
        let (status, body) = g.call("PATCH", path, &evidence, Some(patch)).await;
        assert_refused(status, &body, refusal);
    }
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_character_is_never_a_value_a_rule_reads() {
    let g = start().await;
    let permit_but_secret = r#"[{"effect":"Permit"},{"effect":"Deny","target":{"resource":{"identifiers":["SECRET-1"]}}}]"#;
    let evidence = g.evidence(permit_but_secret, "");
    let order = |sku: &str| json!({"sku": sku, "amount": "1"}).to_string();
    for (sku, status, reason) in [
        ("C1", 200, ""),
        ("SECRET-1", 403, "denied_by_rule"),
        ("SECRET-1\u{1}", 400, "request_value_control"),
        ("SECRET-1\u{0}", 400, "request_value_control"),
        ("\u{0}SECRET-1", 400, "request_value_control"),
        ("SECRET-1\u{7F}", 400, "request_value_control"),
        ("SECRET-1\u{9F}", 400, "request_value_control"),
        ("SECRET-1\t", 400, "request_value_control"),
        ("SECRET-1\u{A0}", 400, "ambiguous_request"),
        ("SECRET-1\u{2028}", 400, "ambiguous_request"),
    ] {
        let (got, body) = g
            .call("POST", "/api/orders", &evidence, Some(&order(sku)))
            .await;
        assert_eq!(got, status, "{sku:?}: {body}");
        if status != 200 {
            assert_eq!(body["reason"], reason, "{sku:?}: {body}");
        }
    }
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_in_evidence_is_held_to_its_text() {
    let g = start().await;
    let path = "/api/amounts/C1?amount=0.099999999999999999995";
    let with = |right: &str| {
        let rules = format!(
            r#"[{{"effect":"Permit","conditions":{{"leftOperand":"amount","operator":"lessThan","rightOperand":{right}}}}}]"#
        );
        g.evidence(&rules, "")
    };
    let (status, body) = g
        .call("GET", path, &with("0.09999999999999999999"), None)
        .await;
    assert_refused(status, &body, (403, "malformed_evidence"));
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("0.09999999999999999999"),
        "{body}"
    );
    // An integer beyond binary64 that reads as another, likewise; one it holds is compared.
    let big = "/api/amounts/C1?amount=18446744073709552000";
    let (status, body) = g
        .call("GET", big, &with("18446744073709551617.0"), None)
        .await;
    assert_refused(status, &body, (403, "malformed_evidence"));
    let (status, body) = g.call("GET", path, &with("0.1"), None).await;
    assert_refused(status, &body, (403, "condition_operand_type"));
    let (status, body) = g
        .call("GET", "/api/amounts/C1?amount=0.05", &with("0.1"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_naming_a_member_twice_or_a_second_evidence_is_no_evidence() {
    let g = start().await;
    let permit = r#"[{"effect":"Permit"}]"#;
    let ok = g
        .call("GET", "/api/amounts/C1", &g.evidence(permit, ""), None)
        .await;
    assert_eq!(ok.0, 200, "{}", ok.1);
    for rules in [
        r#"[{"effect":"Deny","effect":"Permit"}]"#,
        r#"[{"effect":"Deny","Effect":"Permit"}]"#,
        r#"[{"effect":"Permit","conditions":{"leftOperand":"amount","operator":"equal","rightOperand":"1"},"conditions":{"anyOf":[]}}]"#,
    ] {
        let (status, body) = g
            .call(
                "GET",
                "/api/amounts/C1?amount=2",
                &g.evidence(rules, ""),
                None,
            )
            .await;
        assert_refused(status, &body, (403, "malformed_evidence"));
    }
    let aud_twice = g.evidence(permit, &format!(r#","aud":"{SP3}""#));
    let (status, body) = g.call("GET", "/api/amounts/C1", &aud_twice, None).await;
    assert_refused(status, &body, (403, "malformed_evidence"));
    for claims in [
        r#","delegation_evidence":{"policyIssuer":"x"}"#.to_string(),
        format!(r#","delegationEvidence":{{"policyIssuer":"{OWNER3}"}}"#),
    ] {
        let second = g.evidence(permit, &claims);
        let (status, body) = g.call("GET", "/api/amounts/C1", &second, None).await;
        assert!(status == 403, "{claims}: {body}");
        assert!(
            ["evidence_member_not_understood", "malformed_evidence"]
                .contains(&body["reason"].as_str().unwrap()),
            "{claims}: {body}"
        );
    }
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_null_where_a_member_of_evidence_belongs_is_not_its_absence() {
    let g = start().await;
    let permit = r#"[{"effect":"Permit"}]"#;
    for (target, rules) in [
        (r#","context":null"#, permit),
        ("", r#"[{"effect":"Permit","target":null}]"#),
        ("", r#"[{"effect":"Permit","conditions":null}]"#),
    ] {
        let nulled = g.evidence_of(target, rules, "");
        let (status, body) = g.call("GET", "/api/amounts/C1", &nulled, None).await;
        assert_eq!(status, 403, "{target}{rules}: {body}");
    }
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_from_the_body_is_held_to_the_rules_of_one_from_the_path() {
    let g = start().await;
    let permit_but_secret = r#"[{"effect":"Permit"},{"effect":"Deny","target":{"resource":{"identifiers":["SECRET-1","9007199254740992"]}}}]"#;
    let evidence = g.evidence(permit_but_secret, "");
    let order = |sku: &str| json!({"sku": sku, "amount": "1"}).to_string();
    for sku in ["SECRET-1.", "SECRET%2D1", "C1/../SECRET-1", "./SECRET-1"] {
        let (status, body) = g
            .call("POST", "/api/orders", &evidence, Some(&order(sku)))
            .await;
        assert_refused(status, &body, (400, "ambiguous_request"));
    }
    // As the path refuses a trailing dot and an encoded percent sign.
    for path in ["/api/amounts/SECRET-1.", "/api/amounts/SECRET%252D1"] {
        let (status, body) = g.call("GET", path, &evidence, None).await;
        assert_refused(status, &body, (400, "ambiguous_request"));
    }
    // An integer JavaScript reads as another is no value to decide on.
    let (status, body) = g
        .call(
            "POST",
            "/api/orders",
            &evidence,
            Some(r#"{"sku":9007199254740993,"amount":"1"}"#),
        )
        .await;
    assert_refused(status, &body, (400, "body_value_inexact"));
    let (status, body) = g
        .call(
            "POST",
            "/api/orders",
            &evidence,
            Some(r#"{"sku":9007199254740991,"amount":"1"}"#),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // A body on a GET is refused: the backend might read it, the decision did not.
    let (status, body) = g
        .call(
            "GET",
            "/api/amounts/C1",
            &evidence,
            Some(r#"{"id":"SECRET-1"}"#),
        )
        .await;
    assert_refused(status, &body, (400, "ambiguous_request"));
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_carries_every_claim_of_the_scheme_and_lives_no_longer_than_it_may_be_old() {
    let g = start().await;
    let now = ishare_gateway::scheme::Timestamp::now().secs();
    let payload = |drop: &str, exp: i64| {
        let mut claims = json!({
            "iss": AR3, "sub": AR3, "aud": CONSUMER3, "jti": uuid::Uuid::new_v4().to_string(),
            "iat": now, "exp": exp,
            "delegationEvidence": {
                "notBefore": now - 10, "notOnOrAfter": now + 600, "policyIssuer": OWNER3,
                "target": {"accessSubject": CONSUMER3},
                "policySets": [{"policies": [{
                    "target": {"resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]},
                        "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP3]}},
                    "rules": [{"effect": "Permit"}]}]}]
            }
        });
        claims.as_object_mut().unwrap().remove(drop);
        sign_text(g.bed.creds(AR3), &claims.to_string())
    };
    let (status, body) = g
        .call("GET", "/api/amounts/C1", &payload("", now + 30), None)
        .await;
    assert_eq!(status, 200, "{body}");
    for drop in ["iat", "aud", "jti", "sub"] {
        let (status, body) = g
            .call("GET", "/api/amounts/C1", &payload(drop, now + 30), None)
            .await;
        assert_refused(status, &body, (403, "malformed_evidence"));
        assert!(
            body["error_description"].as_str().unwrap().contains(drop),
            "{drop}: {body}"
        );
    }
    for exp in [now + 10 * 365 * 86400, i64::MAX / 2] {
        let (status, body) = g
            .call("GET", "/api/amounts/C1", &payload("", exp), None)
            .await;
        assert_refused(status, &body, (403, "evidence_lifetime_too_long"));
    }
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_warns_of_a_pointer_to_one_element_of_an_array() {
    let (bed, dir, _) = configured(free_port()).await;
    let indexed = rules().replace("{body.json./sku}", "{body.json./items/0/sku}");
    std::fs::write(dir.join("policies/rules.toml"), indexed).unwrap();
    let out = binary_output(&[
        "check",
        "--config",
        dir.join("gateway.toml").to_str().unwrap(),
    ]);
    let said = printed(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("the body pointer /items/0/sku decides on one element of an array"),
        "{said}"
    );
    bed.stop().await;
}
