//! `ishare-gateway routes-from-openapi` on real public OpenAPI documents (tests/fixtures/openapi):
//! the rules it writes pass `ishare-gateway check` as they are and hold every operation of the
//! documents; existing files are kept unless forced; bad input is an error, never a panic.

use ishare_gateway::config::model::{Auth, DelegationRule, Route};
use ishare_gateway::testbed::pki::TestPki;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OWNER: &str = "EU.EORI.NL000000005";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openapi")
        .join(name)
}

fn binary(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `routes-from-openapi DOCUMENT --policy-issuer OWNER` with more arguments.
fn generate(document: &Path, more: &[&str]) -> Output {
    let mut args = vec![
        "routes-from-openapi",
        document.to_str().unwrap(),
        "--policy-issuer",
        OWNER,
    ];
    args.extend(more);
    binary(&args)
}

/// A directory with key material from the test PKI, an empty policies/ and a gateway.toml with
/// the upstream "backend" and the rules in policies/.
fn gateway_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    let pki = TestPki::shared();
    let party = pki.party("EU.EORI.NL000000003");
    let gateway = r#"
[identity]
party_id = "EU.EORI.NL000000003"
key = "id.key.pem"
certificate_chain = "id.chain.pem"

[[listener]]
address = "127.0.0.1:8080"

[scheme_owner]
url = "https://127.0.0.1:9100"
party_id = "EU.EORI.NL000000000"
root_certificate = "root.pem"

[[upstream]]
name = "backend"
addresses = ["127.0.0.1:9180"]

[rules]
directory = "policies"
"#;
    for (name, text) in [
        ("id.key.pem", party.key_pem.as_str()),
        ("id.chain.pem", party.chain_pem.as_str()),
        ("root.pem", pki.root_pem()),
        ("gateway.toml", gateway),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// The operations of a document as (METHOD, path), counted from the document itself.
fn operations(document: &Path) -> Vec<(String, String)> {
    const METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    let doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(document).unwrap()).unwrap();
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_mapping().unwrap() {
        for (method, _) in item.as_mapping().unwrap() {
            let method = method.as_str().unwrap();
            if METHODS.contains(&method) {
                out.push((method.to_uppercase(), path.as_str().unwrap().to_string()));
            }
        }
    }
    out
}

fn rule(route: &Route) -> &DelegationRule {
    match &route.auth {
        Auth::Delegation(rule) => rule,
        other => panic!("{} is {other:?}", route.name),
    }
}

/// (name, method, path pattern, resource type, identifiers) of a delegated route.
fn summary(route: &Route) -> (&str, String, &str, &str, Vec<&str>) {
    let methods = route.methods.as_ref().unwrap();
    assert_eq!(methods.len(), 1, "{}", route.name);
    let rule = rule(route);
    assert_eq!(rule.policy_issuer.as_str(), OWNER);
    assert_eq!(rule.action, None, "{}", route.name);
    (
        route.name.as_str(),
        methods[0].to_string(),
        route.pattern.as_str(),
        rule.resource_type.as_str(),
        rule.identifiers.iter().map(|t| t.as_str()).collect(),
    )
}

#[test]
fn generated_rules_pass_check_as_they_are_and_hold_every_operation() {
    let dir = gateway_dir();
    let policies = dir.path().join("policies");
    for (document, file) in [
        ("petstore-expanded.yaml", "petstore.toml"),
        ("uspto.yaml", "uspto.toml"),
    ] {
        let out = policies.join(file);
        let run = generate(&fixture(document), &["--output", out.to_str().unwrap()]);
        assert!(run.status.success(), "{document}: {}", stderr(&run));
    }
    let config = dir.path().join("gateway.toml");
    let check = binary(&["check", "--config", config.to_str().unwrap()]);
    let printed = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{printed}{}", stderr(&check));
    assert!(
        printed.contains(": ok (1 listeners, 1 upstreams, 7 routes from "),
        "{printed}"
    );

    let routes = ishare_gateway::config::load(&config).unwrap().routes;
    let from = |file: &str| -> Vec<&Route> {
        routes
            .iter()
            .filter(|r| r.source == policies.join(file))
            .collect()
    };
    let (petstore, uspto) = (from("petstore.toml"), from("uspto.toml"));
    assert_eq!(
        petstore.len(),
        operations(&fixture("petstore-expanded.yaml")).len()
    );
    assert_eq!(uspto.len(), operations(&fixture("uspto.yaml")).len());
    assert_eq!(
        petstore.iter().map(|r| summary(r)).collect::<Vec<_>>(),
        [
            ("findPets", "GET".into(), "/pets", "PETS", vec!["*"]),
            ("addPet", "POST".into(), "/pets", "PETS", vec!["*"]),
            // operationId "find pet by id": a metrics label
            (
                "find-pet-by-id",
                "GET".into(),
                "/pets/{id}",
                "PETS",
                vec!["{path.id}"]
            ),
            (
                "deletePet",
                "DELETE".into(),
                "/pets/{id}",
                "PETS",
                vec!["{path.id}"]
            ),
        ]
    );
    assert_eq!(
        uspto.iter().map(|r| summary(r)).collect::<Vec<_>>(),
        [
            ("list-data-sets", "GET".into(), "/", "RESOURCE", vec!["*"]),
            (
                "list-searchable-fields",
                "GET".into(),
                "/{dataset}/{version}/fields",
                "FIELDS",
                vec!["{path.dataset}", "{path.version}"]
            ),
            (
                "perform-search",
                "POST".into(),
                "/{dataset}/{version}/records",
                "RECORDS",
                vec!["{path.dataset}", "{path.version}"]
            ),
        ]
    );
    assert!(routes.iter().all(|r| r.upstream == "backend"));
    assert_eq!(uspto[0].description, "List available data sets");
    assert_eq!(
        uspto[2].description,
        "Provides search capability for the data set with the given search criteria."
    );
}

#[test]
fn the_rules_go_to_standard_output_with_a_header_naming_the_document() {
    let run = generate(&fixture("petstore-expanded.yaml"), &["--upstream", "pets"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let text = String::from_utf8(run.stdout.clone()).unwrap();
    assert!(text.starts_with("# Routes generated from \"Swagger Petstore\" 1.0.0 (petstore-expanded.yaml, OpenAPI 3.0.0)"), "{text}");
    assert!(
        text.contains("# - upstream: \"pets\" must be an [[upstream]] of gateway.toml"),
        "{text}"
    );
    assert_eq!(text.matches("[[route]]").count(), 4, "{text}");
    assert_eq!(text.matches("upstream = \"pets\"").count(), 4, "{text}");
    assert_eq!(
        stderr(&run),
        "4 routes from \"Swagger Petstore\" 1.0.0 (petstore-expanded.yaml)\n"
    );
}

#[test]
fn an_existing_output_file_is_kept_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("api.toml");
    std::fs::write(&out, "# hand-written\n").unwrap();
    let args = ["--output", out.to_str().unwrap()];
    let refused = generate(&fixture("petstore-expanded.yaml"), &args);
    assert!(!refused.status.success());
    assert_eq!(
        stderr(&refused),
        format!(
            "error: {} exists: pass --force to replace it\n",
            out.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "# hand-written\n");
    let forced = generate(
        &fixture("petstore-expanded.yaml"),
        &[&args[..], &["--force"]].concat(),
    );
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(
        std::fs::read_to_string(&out)
            .unwrap()
            .matches("[[route]]")
            .count(),
        4
    );
}

#[test]
fn bad_input_is_an_error_with_a_message_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let missing = dir.path().join("missing.yaml");
    let cases = [
        (
            missing.clone(),
            format!("error: cannot read {}: ", missing.display()),
        ),
        (
            write("k8s.yaml", "kind: Deployment\nspec: {}\n"),
            "not an OpenAPI document".into(),
        ),
        (
            write("broken.json", "{\"openapi\": \"3.0.0\",\n"),
            "not JSON: ".into(),
        ),
        (
            write("empty.yaml", "openapi: 3.0.0\npaths: {}\n"),
            "the document has no paths".into(),
        ),
        (
            write(
                "mixed.yaml",
                "openapi: 3.0.0\npaths:\n  /files/{name}.json:\n    get: {}\n",
            ),
            "the path /files/{name}.json cannot be a route's path".into(),
        ),
        (fixture("LICENSE"), "error: ".into()),
    ];
    for (document, expected) in cases {
        let run = generate(&document, &[]);
        let message = stderr(&run);
        assert_eq!(
            run.status.code(),
            Some(1),
            "{}: {message}",
            document.display()
        );
        assert!(
            message.contains(&expected),
            "{}: {message}",
            document.display()
        );
        assert!(!message.contains("panicked"), "{message}");
        assert!(run.stdout.is_empty());
    }
    let no_owner = binary(&[
        "routes-from-openapi",
        fixture("uspto.yaml").to_str().unwrap(),
    ]);
    assert_eq!(no_owner.status.code(), Some(2));
    assert!(
        stderr(&no_owner).contains("--policy-issuer <PARTY>"),
        "{}",
        stderr(&no_owner)
    );
    let bad_owner = binary(&[
        "routes-from-openapi",
        fixture("uspto.yaml").to_str().unwrap(),
        "--policy-issuer",
        "the owner",
    ]);
    assert_eq!(bad_owner.status.code(), Some(2));
    assert!(
        stderr(&bad_owner).contains("contains white space"),
        "{}",
        stderr(&bad_owner)
    );
}

#[test]
fn documents_too_large_or_nested_too_deep_are_refused_before_they_are_parsed() {
    let dir = tempfile::tempdir().unwrap();
    let head = "openapi: 3.0.0\ninfo: {title: Deep, version: '1'}\npaths:\n  /a:\n    get: {}\n";
    // 200 KB of nesting, which took YAML's scanner minutes.
    let deep = dir.path().join("deep.yaml");
    let nesting = 100_000;
    std::fs::write(
        &deep,
        format!(
            "{head}x-deep: {}{}\n",
            "[".repeat(nesting),
            "]".repeat(nesting)
        ),
    )
    .unwrap();
    let run = generate(&deep, &[]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    assert_eq!(
        stderr(&run),
        format!("error: {}: line 6: more than 64 brackets ([ or {{) open at once: a document nested this deep is not read (reading it takes time growing with the square of its depth)\n", deep.display())
    );
    assert!(run.stdout.is_empty());

    let large = dir.path().join("large.yaml");
    std::fs::write(&large, format!("{head}# {}\n", "x".repeat(8 << 20))).unwrap();
    let run = generate(&large, &[]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    assert_eq!(
        stderr(&run),
        format!(
            "error: {}: larger than 8 MiB: no document that big is read\n",
            large.display()
        )
    );
    assert!(run.stdout.is_empty());

    // Nesting as deep as real documents go is read.
    let nested = dir.path().join("nested.yaml");
    std::fs::write(
        &nested,
        format!("{head}x-nested: {}{}\n", "[".repeat(64), "]".repeat(64)),
    )
    .unwrap();
    let run = generate(&nested, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(stderr(&run), "1 routes from \"Deep\" 1 (nested.yaml)\n");
    assert!(String::from_utf8_lossy(&run.stdout).contains("[[route]]\nname = \"get-a\""));
}
