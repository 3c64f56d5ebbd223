//! `ishare-gateway explain`: what the gateway would decide on a request, and why — the route, the
//! values taken, the mask asked, the evidence, the policy and rule that decided, the outcome and
//! its reasons. Offline by default (evidence from a file or the request's header, signatures not
//! verified); with `--registry` the evidence is verified and the registry asked as the gateway
//! would.

use crate::config;
use crate::gateway::decision::authenticate::CallerArg;
use crate::gateway::decision::dry_run::{self, DescribedRequest, Given, RegistryAnswer};
use crate::gateway::decision::log_line::to_json;
use crate::gateway::decision::route::Routed;
use crate::gateway::decision::{Caller, Decision, EvidenceSource, EvidenceUsed};
use crate::gateway::evidence::live::evidence_readers;
use crate::gateway::snapshot::{Shared, Snapshot};
use crate::scheme::jwt::AlgorithmPolicy;
use crate::scheme::mask::AccessRequest;
use crate::scheme::Timestamp;
use clap::ArgGroup;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(group(ArgGroup::new("caller").required(true).args(["as_party", "token"])))]
pub struct ExplainArgs {
    #[arg(long, default_value = "conf/gateway.toml")]
    pub config: PathBuf,
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// The path, with its query (`/api/containers/C1?fields=weight`).
    #[arg(long)]
    pub path: String,
    /// The caller: a party identifier (or, on a route for people, the person's), taken as
    /// authenticated.
    #[arg(long = "as", value_name = "PARTY_ID")]
    pub as_party: Option<String>,
    /// The caller: an access token of this gateway, validated; `-` reads it from standard input
    /// (an argument is seen by everyone who lists the processes).
    #[arg(long)]
    pub token: Option<String>,
    /// A request header, `NAME:VALUE`; repeat for more.
    #[arg(long = "header", value_name = "NAME:VALUE")]
    pub headers: Vec<String>,
    /// The request body (a route whose rule reads the body decides on it); `@FILE` reads it from a
    /// file. Give its Content-Type with --header.
    #[arg(long)]
    pub body: Option<String>,
    /// The evidence: a delegationEvidence (JSON, or a list of them for a chain), a registry's
    /// answer, or a delegation token. It stands for the header's evidence, or for the registry's
    /// answer when the registry would be asked.
    #[arg(long, conflicts_with = "registry")]
    pub evidence: Option<PathBuf>,
    /// Verify the header's evidence and ask the data owner's registry, as the gateway would.
    #[arg(long)]
    pub registry: bool,
    /// Print the decision as the decision log writes it.
    #[arg(long)]
    pub json: bool,
}

/// A snapshot of the configuration to decide under, as the gateway would run it (without its
/// decision log: nothing here is logged).
pub fn snapshot(path: &std::path::Path) -> Result<(Snapshot, AlgorithmPolicy), String> {
    let mut config =
        config::load(path).map_err(|e| format!("the configuration is not valid:\n{e}"))?;
    config.decision_log = None;
    let algorithms = AlgorithmPolicy {
        allow_rs384_rs512: config.tokens.allow_rs384_rs512,
    };
    let snap = Snapshot::build(config, None, &Shared::new(Default::default()))?;
    Ok((snap, algorithms))
}

/// Split `NAME:VALUE`.
pub fn header_arg(text: &str) -> Result<(String, String), String> {
    text.split_once(':')
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(|| format!("--header {text:?}: write NAME:VALUE"))
}

pub async fn run(args: ExplainArgs) -> Result<(), String> {
    let (snap, algorithms) = snapshot(&args.config)?;
    let headers = args
        .headers
        .iter()
        .map(|h| header_arg(h))
        .collect::<Result<Vec<_>, _>>()?;
    let caller = match (args.as_party, args.token) {
        (Some(id), _) => Some(CallerArg::As(id)),
        (None, Some(token)) if token == "-" => {
            let mut read = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut read)
                .map_err(|e| format!("--token -: standard input: {e}"))?;
            Some(CallerArg::Token(read.trim().to_string()))
        }
        (None, Some(token)) => Some(CallerArg::Token(token)),
        (None, None) => None,
    };
    let body = match args.body {
        Some(text) => Some(match text.strip_prefix('@') {
            Some(path) => std::fs::read(path).map_err(|e| format!("--body @{path}: {e}"))?,
            None => text.into_bytes(),
        }),
        None => None,
    };
    let req = DescribedRequest {
        method: args.method,
        target: args.path,
        headers,
        caller,
        body,
    };
    let now = Timestamp::now();
    let (d, routed) = if args.registry {
        let live = snap.authz.with(&snap.trust);
        dry_run::decide(&snap.policy(), &snap.tokens, &req, &live, now).await
    } else {
        let given = match &args.evidence {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let chain = dry_run::read_evidence_file(&text, &evidence_readers(&snap.config))
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                Some((chain, path.display().to_string()))
            }
            None => None,
        };
        let registry = given
            .clone()
            .map(|(chain, from)| RegistryAnswer::Evidence(chain, from));
        let source = Given {
            header: given,
            registry,
            algorithms,
            readers: evidence_readers(&snap.config),
            now,
        };
        dry_run::decide(&snap.policy(), &snap.tokens, &req, &source, now).await
    }
    .map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", to_json(&d));
    } else {
        print!("{}", report(&d, routed.as_deref()));
    }
    Ok(())
}

/// The decision as a person reads it.
pub fn report(d: &Decision, routed: Option<&Routed>) -> String {
    let mut out = String::new();
    let mut line = |label: &str, text: String| {
        let _ = writeln!(out, "{label:<12}{text}");
    };
    line("request", format!("{} {}", d.method, d.path));
    line("route", route_text(d, routed));
    if let Some(c) = &d.caller {
        line("caller", caller_text(c));
    }
    for (i, v) in d.values.iter().enumerate() {
        let label = if i == 0 { "values" } else { "" };
        let from = match v.template.contains('{') {
            true => format!(" (from {})", v.template),
            false => String::new(),
        };
        line(label, format!("{:<16}{}{from}", v.name, v.value));
    }
    if let Some(m) = &d.mask {
        line("mask", mask_text(m));
    }
    if let Some(a) = &d.assessed {
        line(
            "evidence",
            evidence_text(&a.evaluated.evidence, a.cache_hit),
        );
    }
    if !d.decided_by().is_empty() {
        let places: Vec<String> = d.decided_by().iter().map(ToString::to_string).collect();
        line("decided by", places.join(", "));
    }
    line("outcome", outcome_text(d, routed));
    out
}

/// The route that took the request, its file and whether its decisions are enforced; or none.
fn route_text(d: &Decision, routed: Option<&Routed>) -> String {
    let Some(r) = routed else {
        return "none".into();
    };
    let source = r.route.source.display();
    let mode = match d.mode {
        crate::config::model::Mode::Enforce => "enforced",
        crate::config::model::Mode::Shadow => "SHADOW: decided and logged, not enforced",
    };
    format!("{} ({source}), {mode}", r.route.name)
}

/// Who called: a party or a person, and whom it acts for.
fn caller_text(c: &Caller) -> String {
    let kind = match c.kind {
        crate::gateway::decision::CallerKind::Party => "party",
        crate::gateway::decision::CallerKind::Person => "person",
    };
    let acting = c
        .acting_for
        .as_ref()
        .map(|a| format!(", acting for {a}"))
        .unwrap_or_default();
    format!("{kind} {}{acting}", c.id)
}

/// The mask asked: who may do what to which resources of whose, at which service providers,
/// under which licences.
fn mask_text(m: &AccessRequest) -> String {
    format!(
        "{} may {} {} [{}] attributes [{}] of {} at {}{}",
        m.access_subject,
        m.actions.join(", "),
        m.resource_type,
        m.identifiers.join(", "),
        m.attributes.join(", "),
        m.policy_issuer,
        m.service_providers.join(", "),
        match m.required_licences.is_empty() {
            true => String::new(),
            false => format!(", licences {}", m.required_licences.join(", ")),
        }
    )
}

/// Where the evidence came from, who issued its policies and whether it came from the cache.
fn evidence_text(e: &EvidenceUsed, cache_hit: bool) -> String {
    let source = match &e.source {
        EvidenceSource::Header => "the delegation_evidence header, verified".to_string(),
        EvidenceSource::Registry { registry } => format!("the registry {registry}"),
        EvidenceSource::Given { from } => from.clone(),
    };
    let cached = if cache_hit { ", from the cache" } else { "" };
    let issuers = match e.issuers.is_empty() {
        true => "no policy".to_string(),
        false => format!("issued by {}", e.issuers.join(" → ")),
    };
    let signers = match e.signers.is_empty() {
        true => String::new(),
        false => format!(", signed by {}", e.signers.join(" → ")),
    };
    format!("{source}: {issuers}{signers}{cached}")
}

/// What came of the request: refused, with the refusal's row and stage, or forwarded, and where.
fn outcome_text(d: &Decision, routed: Option<&Routed>) -> String {
    match (&d.refusal, d.outcome) {
        (Some(reject), o) => {
            let row = reject.row();
            let shadow = match o {
                crate::telemetry::metrics::Outcome::ShadowDenied => {
                    " (shadow mode: forwarded all the same)"
                }
                _ => "",
            };
            format!(
                "refused {} {} at the {} stage{shadow}: {}",
                row.status,
                row.reason,
                d.stage.as_str(),
                row.description
            )
        }
        (None, _) => match (&d.grant, routed) {
            (Some(_), Some(r)) => format!(
                "permitted: forwarded to {} as {}",
                r.route.upstream, r.upstream_uri
            ),
            (_, Some(r)) => format!(
                "forwarded to {} as {} (the route needs no evidence)",
                r.route.upstream, r.upstream_uri
            ),
            (_, None) => "no route".into(),
        },
    }
}
