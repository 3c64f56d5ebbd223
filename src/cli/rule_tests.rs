//! `ishare-gateway test`: rule fixtures run against the rule engine of a configuration. A fixture
//! file (`*.toml`, by default in the rules directory's `tests/`) holds cases: a request, its
//! caller, the evidence it presents or the registry's answer, and the status and reason the
//! gateway must come to. Each case is decided by the stages the proxy runs (`dry_run`), the
//! evidence evaluated without its signatures verified. A table, and JUnit XML for CI.

use super::explain::snapshot;
use crate::gateway::decision::authenticate::CallerArg;
use crate::gateway::decision::dry_run::{self, DescribedRequest, Given, RegistryAnswer};
use crate::gateway::decision::Decision;
use crate::gateway::evidence::live::evidence_readers;
use crate::gateway::snapshot::Snapshot;
use crate::scheme::jwt::AlgorithmPolicy;
use crate::scheme::vocabulary::{EVIDENCE_HEADER, EVIDENCE_HEADERS};
use crate::scheme::Timestamp;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct TestArgs {
    /// The gateway configuration whose rules are tested.
    #[arg(long, default_value = "conf/gateway.toml")]
    pub config: PathBuf,
    /// The directory of fixtures (default: `tests/` in the rules directory).
    pub dir: Option<PathBuf>,
    /// Write the results as JUnit XML to this file.
    #[arg(long)]
    pub junit: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureFile {
    #[serde(default, rename = "case")]
    cases: Vec<Case>,
}

/// One case of a fixture file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(default = "get")]
    method: String,
    /// The path, with its query.
    path: String,
    /// The caller (a party, or on a route for people the person), taken as authenticated.
    caller: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// The request body, as text (give its `content-type` in `headers`).
    body: Option<String>,
    /// Evidence presented in the `delegation_evidence` header: a file next to the fixture.
    evidence: Option<PathBuf>,
    /// The registry's answer: a file next to the fixture, or "no_policy" (404).
    registry: Option<String>,
    /// When the case is decided, in Unix seconds (default: now).
    at: Option<i64>,
    /// The status the gateway answers (200: forwarded).
    status: u16,
    /// The reason: `granted` for a permit, else the refusal's reason code.
    reason: Option<String>,
}

fn get() -> String {
    "GET".into()
}

/// What became of a case.
pub struct Result {
    pub file: String,
    pub name: String,
    /// None when it passed; else what went otherwise.
    pub failure: Option<String>,
}

pub async fn run(args: TestArgs) -> std::result::Result<bool, String> {
    let (snap, algorithms) = snapshot(&args.config)?;
    let dir = args
        .dir
        .unwrap_or_else(|| snap.config.rules_dir.join("tests"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("the fixtures {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("no fixtures (*.toml) in {}", dir.display()));
    }
    let mut results = Vec::new();
    for file in &files {
        results.extend(run_file(&snap, algorithms, file).await);
    }
    print!("{}", table(&results));
    if let Some(path) = &args.junit {
        std::fs::write(path, junit(&results)).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(results.iter().all(|r| r.failure.is_none()))
}

async fn run_file(snap: &Snapshot, algorithms: AlgorithmPolicy, file: &Path) -> Vec<Result> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let whole = |failure: String| {
        vec![Result {
            file: name.clone(),
            name: "(the file)".into(),
            failure: Some(failure),
        }]
    };
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return whole(e.to_string()),
    };
    let fixtures: FixtureFile = match toml::from_str(&text) {
        Ok(f) => f,
        Err(e) => return whole(e.to_string()),
    };
    if fixtures.cases.is_empty() {
        return whole("no [[case]]".into());
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let mut results = Vec::new();
    for case in fixtures.cases {
        let failure = match decide(snap, algorithms, base, &case).await {
            Ok(d) => compare(&case, &d),
            Err(e) => Some(e),
        };
        results.push(Result {
            file: name.clone(),
            name: case.name,
            failure,
        });
    }
    results
}

/// The case decided.
async fn decide(
    snap: &Snapshot,
    algorithms: AlgorithmPolicy,
    base: &Path,
    case: &Case,
) -> std::result::Result<Decision, String> {
    let read = |p: &Path| -> std::result::Result<(Vec<_>, String), String> {
        let path = base.join(p);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let chain = dry_run::read_evidence_file(&text, &evidence_readers(&snap.config))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok((chain, p.display().to_string()))
    };
    let header = case.evidence.as_deref().map(read).transpose()?;
    let registry = match case.registry.as_deref() {
        None => None,
        Some("no_policy") => Some(RegistryAnswer::NoPolicy),
        Some(p) => {
            let (chain, from) = read(Path::new(p))?;
            Some(RegistryAnswer::Evidence(chain, from))
        }
    };
    let mut headers: Vec<(String, String)> = case
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    if header.is_some()
        && !case
            .headers
            .keys()
            .any(|n| EVIDENCE_HEADERS.iter().any(|e| n.eq_ignore_ascii_case(e)))
    {
        headers.push((EVIDENCE_HEADER.into(), "presented".into()));
    }
    let now = case.at.map_or_else(Timestamp::now, Timestamp::from_secs);
    let source = Given {
        header,
        registry,
        algorithms,
        readers: evidence_readers(&snap.config),
        now,
    };
    let req = DescribedRequest {
        method: case.method.clone(),
        target: case.path.clone(),
        headers,
        caller: case.caller.clone().map(CallerArg::As),
        body: case.body.clone().map(String::into_bytes),
    };
    dry_run::decide(&snap.policy(), &snap.tokens, &req, &source, now)
        .await
        .map(|(d, _)| d)
        .map_err(|e| e.to_string())
}

/// What went otherwise than the case expects, naming the stage that decided.
fn compare(case: &Case, d: &Decision) -> Option<String> {
    let (status, reason) = (d.status(), d.reason);
    let reason_ok = case.reason.as_deref().is_none_or(|r| r == reason);
    if status == case.status && reason_ok {
        return None;
    }
    let expected = format!("{} {}", case.status, case.reason.as_deref().unwrap_or(""));
    let place = match d.decided_by().is_empty() {
        true => String::new(),
        false => {
            let places: Vec<String> = d.decided_by().iter().map(ToString::to_string).collect();
            format!(", by {}", places.join(", "))
        }
    };
    Some(format!(
        "expected {}, got {status} {reason}: the {} stage decided otherwise{place}{}",
        expected.trim_end(),
        d.stage.as_str(),
        d.description
            .as_deref()
            .map(|t| format!(" ({t})"))
            .unwrap_or_default()
    ))
}

fn table(results: &[Result]) -> String {
    let mut out = String::new();
    for r in results {
        let verdict = if r.failure.is_none() { "ok  " } else { "FAIL" };
        out.push_str(&format!("{verdict}  {:<24} {}\n", r.file, r.name));
        if let Some(f) = &r.failure {
            out.push_str(&format!("      {f}\n"));
        }
    }
    let failed = results.iter().filter(|r| r.failure.is_some()).count();
    out.push_str(&format!(
        "{} passed, {failed} failed\n",
        results.len() - failed
    ));
    out
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The results as JUnit XML: a test suite, a test case per fixture case, a failure per failing one.
pub fn junit(results: &[Result]) -> String {
    let failed = results.iter().filter(|r| r.failure.is_some()).count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"rules\" tests=\"{}\" failures=\"{failed}\">\n",
        results.len()
    );
    for r in results {
        let (class, name) = (xml(&r.file), xml(&r.name));
        match &r.failure {
            None => out.push_str(&format!("<testcase classname=\"{class}\" name=\"{name}\"/>\n")),
            Some(f) => out.push_str(&format!(
                "<testcase classname=\"{class}\" name=\"{name}\"><failure message=\"{}\"/></testcase>\n",
                xml(f)
            )),
        }
    }
    out.push_str("</testsuite>\n</testsuites>\n");
    out
}
