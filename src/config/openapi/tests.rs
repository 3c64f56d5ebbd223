//! A document in, the rules out, and those rules through the gateway's own loader.

use super::routes::{pattern, resource_type, route_name, unique, Pattern};
use super::*;
use crate::config::defaults::TOKEN_PATHS;
use crate::config::model::{Auth, Route, Upstream};
use crate::config::rules::{load_rules, Known};
use crate::scheme::party::PartyId;
use crate::scheme::vocabulary::CAPABILITIES_PATH;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const OWNER: &str = "EU.EORI.NL000000005";

fn defaults() -> RouteDefaults {
    RouteDefaults {
        upstream: "backend".into(),
        policy_issuer: PartyId::parse(OWNER).unwrap(),
        scheme: "iSHARE".into(),
    }
}

fn generate(doc: &str) -> Result<Generated, OpenApiError> {
    routes_from_openapi(doc, "api.yaml", &defaults())
}

/// The generated text through the loader of `policies/*.toml`, with an upstream "backend".
fn load(text: &str) -> Result<Vec<Route>, Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.toml"), text).unwrap();
    let upstream = Upstream {
        name: "backend".into(),
        addresses: vec!["127.0.0.1:8080".into()],
        tls: None,
        host_header: None,
        connect_timeout: Duration::from_secs(1),
        read_timeout: Duration::from_secs(1),
        write_timeout: Duration::from_secs(1),
        health_check: None,
    };
    let upstreams = BTreeMap::from([("backend".to_string(), upstream)]);
    let reserved: Vec<String> = std::iter::once(CAPABILITIES_PATH)
        .chain(TOKEN_PATHS)
        .map(String::from)
        .collect();
    let known = Known {
        upstreams: &upstreams,
        registries: &BTreeMap::new(),
        reserved: &reserved,
        login: false,
    };
    let mut issues = Vec::new();
    let routes = load_rules(dir.path(), &known, &mut issues);
    match issues.is_empty() {
        true => Ok(routes),
        false => Err(issues.iter().map(|i| i.to_string()).collect()),
    }
}

fn delegation(route: &Route) -> &crate::config::model::DelegationRule {
    match &route.auth {
        Auth::Delegation(rule) => rule,
        other => panic!("{} is {other:?}", route.name),
    }
}

fn texts(templates: &[crate::request::template::Template]) -> Vec<&str> {
    templates.iter().map(|t| t.as_str()).collect()
}

#[test]
fn path_templates_become_patterns_with_valid_capture_names() {
    let p = |path: &str| pattern(path).unwrap();
    assert_eq!(
        p("/pets/{petId}"),
        Pattern {
            text: "/pets/{petId}".into(),
            captures: vec![("petId".into(), "petId".into())],
        }
    );
    assert_eq!(
        p("/owners/{owner-id}/pets/{owner.id}"),
        Pattern {
            text: "/owners/{owner_id}/pets/{owner_id_2}".into(),
            captures: vec![
                ("owner-id".into(), "owner_id".into()),
                ("owner.id".into(), "owner_id_2".into()),
            ],
        }
    );
    assert_eq!(p("/").text, "/");
    assert_eq!(p("/status/").text, "/status/");
}

#[test]
fn path_templates_the_gateway_cannot_express_are_refused_with_why() {
    let e = |path: &str| pattern(path).unwrap_err();
    assert_eq!(
        e("/files/{name}.json"),
        "the segment {name}.json is not one whole parameter, and the gateway captures whole segments only"
    );
    assert_eq!(e("pets"), "it does not start with /");
    assert_eq!(e("/a//b"), "the path is not in normal form; write /a/b");
    assert_eq!(
        e("/a/{}"),
        "the segment {} is not one whole parameter, and the gateway captures whole segments only"
    );
}

#[test]
fn resource_types_come_from_the_last_literal_segment() {
    assert_eq!(resource_type("/pets/{id}").as_deref(), Some("PETS"));
    assert_eq!(
        resource_type("/stock-items").as_deref(),
        Some("STOCK_ITEMS")
    );
    assert_eq!(
        resource_type("/a/{x}/b.json/{y}").as_deref(),
        Some("B_JSON")
    );
    assert_eq!(resource_type("/{dataset}/{version}"), None);
    assert_eq!(resource_type("/"), None);
}

#[test]
fn route_names_are_labels_from_operation_ids_or_method_and_path() {
    let op = |id: Option<&str>, method: &str, path: &str| document::Operation {
        path: path.into(),
        method: method.into(),
        operation_id: id.map(String::from),
        summary: None,
        open: false,
    };
    assert_eq!(
        route_name(&op(Some("find pet by id"), "GET", "/x")),
        "find-pet-by-id"
    );
    assert_eq!(
        route_name(&op(Some("pets.list_v2"), "GET", "/x")),
        "pets.list_v2"
    );
    assert_eq!(route_name(&op(None, "GET", "/pets/{id}")), "get-pets-id");
    assert_eq!(route_name(&op(Some("{}"), "DELETE", "/")), "delete-root");
    let mut taken = BTreeSet::new();
    assert_eq!(unique(&mut taken, "a".into()), "a");
    assert_eq!(unique(&mut taken, "a".into()), "a-2");
    assert_eq!(unique(&mut taken, "a".into()), "a-3");
}

const MIXED: &str = r#"
openapi: 3.1.0
info: {title: "Mixed\nbag", version: 2.5}
servers: [{url: "https://api.example.com/v1"}]
paths:
  /owners/{owner-id}/pets/{pet.id}:
    parameters: [{name: owner-id, in: path, required: true}]
    get: {operationId: "get pet", summary: "  A pet\n of an owner "}
    options: {operationId: petOptions}
    trace: {operationId: tracePet}
  /status:
    get: {operationId: "get pet", security: []}
  /capabilities:
    get: {operationId: capabilities}
  /{id}:
    delete: {}
  x-internal: {note: extensions are not paths}
"#;

#[test]
fn a_document_gives_one_route_per_operation_that_the_loader_accepts() {
    let g = generate(MIXED).unwrap();
    assert_eq!(g.routes, 4);
    assert_eq!(g.title, "\"Mixed\\nbag\" 2.5");
    assert_eq!(
        g.skipped,
        [
            "TRACE /owners/{owner-id}/pets/{pet.id}: TRACE echoes the request to the caller, credentials included: write its route by hand if the backend must have it",
            "GET /capabilities: the gateway serves /capabilities itself",
        ]
    );
    let routes = load(&g.text).unwrap_or_else(|e| panic!("{}\n{e:?}", g.text));
    let names: Vec<&str> = routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["get-pet", "petOptions", "get-pet-2", "delete-id"]);
    let pet = &routes[0];
    assert_eq!(pet.description, "A pet of an owner");
    assert_eq!(pet.methods, Some(vec![http::Method::GET]));
    assert_eq!(pet.pattern.as_str(), "/owners/{owner_id}/pets/{pet_id}");
    let rule = delegation(pet);
    assert_eq!(rule.policy_issuer.as_str(), OWNER);
    assert_eq!(rule.resource_type.as_str(), "PETS");
    assert_eq!(
        texts(&rule.identifiers),
        ["{path.owner_id}", "{path.pet_id}"]
    );
    assert_eq!(rule.action, None);
    assert_eq!(
        delegation(&routes[1]).action.as_deref(),
        Some("iSHARE.READ")
    );
    assert_eq!(routes[2].auth, Auth::Token);
    assert_eq!(routes[2].upstream, "backend");
    let root = delegation(&routes[3]);
    assert_eq!(root.resource_type.as_str(), "RESOURCE");
    assert_eq!(texts(&root.identifiers), ["{path.id}"]);
}

#[test]
fn the_file_says_where_it_came_from_and_what_was_left_out() {
    let text = generate(MIXED).unwrap().text;
    assert!(text.starts_with(
        "# Routes generated from \"Mixed bag\" 2.5 (api.yaml, OpenAPI 3.1.0) by `ishare-gateway routes-from-openapi`:\n"
    ), "{text}");
    for line in [
        "# - path: the document's, relative to https://api.example.com/v1.\n",
        "# - policy_issuer: EU.EORI.NL000000005 (--policy-issuer), the data owner whose policies decide.\n",
        "# The path parameter {owner-id} is the capture {owner_id} here.\n",
        "# The path parameter {pet.id} is the capture {pet_id} here.\n",
        "action = \"iSHARE.READ\"   # OPTIONS gives no action; it reads\n",
        "# Left out: TRACE /owners/{owner-id}/pets/{pet.id}: TRACE echoes",
        "# The document asks no security here: any participant with an access token.\n[[route]]\nname = \"get-pet-2\"\n",
        "resource_type = \"RESOURCE\"   # the path has no literal segment: name the type\n",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
}

#[test]
fn json_and_swagger_2_documents_are_read() {
    let json = r#"{"swagger": "2.0", "info": {"title": "T", "version": "1"}, "basePath": "/api",
        "paths": {"/orders/{id}": {"put": {"operationId": "updateOrder", "summary": "Update"}}}}"#;
    let g = generate(json).unwrap();
    assert!(g.text.contains("(api.yaml, Swagger 2.0)"), "{}", g.text);
    assert!(g.text.contains("relative to /api.\n"), "{}", g.text);
    let routes = load(&g.text).unwrap();
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].methods, Some(vec![http::Method::PUT]));
    assert_eq!(delegation(&routes[0]).resource_type.as_str(), "ORDERS");
}

#[test]
fn path_items_referring_to_components_are_followed() {
    let doc = r##"
openapi: 3.1.0
info: {title: T, version: "1"}
paths:
  /pets:
    $ref: "#/components/pathItems/pets"
    post: {operationId: addPet}
components:
  pathItems:
    pets:
      get: {operationId: listPets}
      post: {operationId: replacedPost}
"##;
    let routes = load(&generate(doc).unwrap().text).unwrap();
    let names: Vec<&str> = routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["addPet", "listPets"]);
    let elsewhere = doc.replace("#/components/pathItems/pets", "other.yaml#/pets");
    assert_eq!(
        generate(&elsewhere).unwrap_err().to_string(),
        "the path item /pets refers to other.yaml#/pets: only #/components/pathItems/NAME (itself no $ref) is followed; write the operations in place"
    );
}

#[test]
fn methods_without_an_action_are_left_out_and_a_document_of_only_those_is_refused() {
    let doc = r#"
openapi: 3.2.0
info: {title: T, version: "1"}
paths:
  /pets:
    query: {operationId: searchPets}
    additionalOperations:
      LINK: {operationId: linkPets}
"#;
    let g = generate(doc).unwrap();
    assert_eq!(
        g.skipped,
        ["LINK /pets: no action follows from LINK: write its route by hand, naming one"]
    );
    let routes = load(&g.text).unwrap();
    assert_eq!(
        routes[0].methods,
        Some(vec![http::Method::from_bytes(b"QUERY").unwrap()])
    );
    assert_eq!(
        delegation(&routes[0]).action.as_deref(),
        Some("iSHARE.READ")
    );
    let only_trace = "openapi: 3.0.0\npaths:\n  /x:\n    trace: {}\n";
    assert_eq!(
        generate(only_trace).unwrap_err().to_string(),
        "no operation can be routed: TRACE /x: TRACE echoes the request to the caller, credentials included: write its route by hand if the backend must have it"
    );
}

#[test]
fn bad_documents_are_refused_with_what_is_wrong() {
    let e = |doc: &str| generate(doc).unwrap_err().to_string();
    assert!(
        e("a: [b\n").starts_with("not YAML (or JSON): "),
        "{}",
        e("a: [b\n")
    );
    assert!(
        e("{\"openapi\": ").starts_with("not JSON: EOF while parsing"),
        "{}",
        e("{\"openapi\": ")
    );
    let not_openapi = "not an OpenAPI document: it has no `openapi` (3.x) or `swagger` (2.0) field";
    assert_eq!(e("kind: Deployment\nspec: {}\n"), not_openapi);
    assert_eq!(e("just some text"), not_openapi);
    assert_eq!(e(""), not_openapi);
    assert_eq!(
        e("swagger: \"1.2\"\n"),
        "swagger: 1.2 is not supported: OpenAPI 3.x and Swagger 2.0 are"
    );
    assert_eq!(
        e("openapi: 4.0.0\n"),
        "openapi: 4.0.0 is not supported: OpenAPI 3.x and Swagger 2.0 are"
    );
    assert_eq!(
        e("openapi: 3.0.0\ninfo: {title: T}\n"),
        "the document has no paths"
    );
    assert_eq!(
        e("openapi: 3.0.0\npaths: {}\n"),
        "the document has no paths"
    );
    assert_eq!(
        e("openapi: 3.0.0\npaths:\n  /x: {parameters: []}\n"),
        "the document's paths have no operations"
    );
    assert!(
        e("openapi: 3.0.0\npaths: [/x]\n").starts_with(
            "not as the specification says at paths: invalid type: sequence, expected a map"
        ),
        "{}",
        e("openapi: 3.0.0\npaths: [/x]\n")
    );
    assert!(
        e("openapi: 3.0.0\npaths:\n  /x:\n    get: {operationId: [1]}\n").starts_with(
            "not as the specification says at paths./x.get.operationId: invalid type: sequence"
        ),
        "{}",
        e("openapi: 3.0.0\npaths:\n  /x:\n    get: {operationId: [1]}\n")
    );
    assert_eq!(
        e("openapi: 3.2.0\npaths:\n  /x:\n    additionalOperations: {\"BAD METHOD\": {}}\n"),
        "BAD METHOD /x: \"BAD METHOD\" is not an HTTP method"
    );
    assert_eq!(
        e("openapi: 3.0.0\npaths:\n  /files/{name}.json:\n    get: {}\n"),
        "the path /files/{name}.json cannot be a route's path: the segment {name}.json is not one whole parameter, and the gateway captures whole segments only"
    );
}

#[test]
fn documents_too_large_or_nested_too_deep_are_refused_unparsed() {
    let nested = |depth: usize| {
        format!(
            "openapi: 3.0.0\npaths:\n  /x:\n    get: {{}}\nx-deep: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    assert_eq!(generate(&nested(MAX_DEPTH)).unwrap().routes, 1);
    assert_eq!(
        generate(&nested(MAX_DEPTH + 1)).unwrap_err(),
        OpenApiError::TooDeep { line: 5 }
    );
    assert_eq!(
        generate(&nested(200_000)).unwrap_err().to_string(),
        "line 5: more than 64 brackets ([ or {) open at once: a document nested this deep is not read (reading it takes time growing with the square of its depth)"
    );
    let padded = |size: usize| {
        let doc = nested(1);
        format!("{doc}{}", "#".repeat(size - doc.len()))
    };
    assert_eq!(generate(&padded(MAX_BYTES)).unwrap().routes, 1);
    assert_eq!(
        generate(&padded(MAX_BYTES + 1)).unwrap_err().to_string(),
        "larger than 8 MiB: no document that big is read"
    );
}

#[test]
fn an_operation_named_as_the_gateway_counts_its_own_answers_is_renamed() {
    let g = generate("openapi: 3.0.0\npaths:\n  /t:\n    get: {operationId: token}\n  /u:\n    get: {operationId: unmatched}\n").unwrap();
    let routes = load(&g.text).unwrap_or_else(|e| panic!("{}\n{e:?}", g.text));
    let names: Vec<&str> = routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["token-2", "unmatched-2"]);
}

#[test]
fn text_from_the_document_cannot_break_out_of_a_comment_or_a_string() {
    let doc = "openapi: 3.0.0\ninfo: {title: \"x\\n[[route]]\\nname = \\\"evil\\\"\", version: \"1\\r\\n#\"}\npaths:\n  /a:\n    get: {operationId: \"a\\\"b\", summary: \"say \\\"hi\\\"\\n[x]\"}\n";
    let g = generate(doc).unwrap();
    let routes = load(&g.text).unwrap_or_else(|e| panic!("{}\n{e:?}", g.text));
    assert_eq!(routes.len(), 1, "{}", g.text);
    assert_eq!(routes[0].name, "a-b");
    assert_eq!(routes[0].description, "say \"hi\" [x]");
}
