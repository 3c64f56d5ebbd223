//! The decision kept by the request as it came: in front of the whole sequence (`decide`), a
//! request whose head is byte for byte one decided before is given that decision again, where
//! nothing it was decided on can have changed since.
//!
//! The key is everything the sequence reads of a request: the method, the version, the target
//! as it came and as parsed, and every header in order, name and value, but those no stage and
//! no route's rule reads (`UNREAD`, less any a rule of this configuration names). What else a
//! decision depends on is judged at every hit, or ends the entry:
//! - the configuration: one cache per snapshot, so a reload starts empty;
//! - the caller: the bearer token is judged again at every hit (its times, the keys it was
//!   signed with), and must name the same party;
//! - the evidence: only a registry's evaluation from the decision cache is kept, and given only
//!   while that cache's entry still holds the very same evaluation (not expired, purged,
//!   evicted or made anew), looked up as the sequence would have looked it up;
//! - the time: nothing else a kept decision rests on depends on it.
//!
//! What is never kept: a request with a body, a head larger than `LONGEST_KEY` or described by
//! another proxy, a route for people or whose rule reads the body, a refusal (shadow mode's
//! too), the gateway's own endpoints, evidence from the header (its tokens' age and signers'
//! standing are judged at every request; such a request is not even looked up), a broker's call
//! (its consumer's assertion is checked for replay), a rule that lets the caller name the data
//! owner (its lookups are counted per request), a scheme whose parties are compared through
//! their records (3.0: records change on their own time), and any request whose steps are
//! traced.

use crate::config::model::{Auth, Route};
use crate::gateway::decision::authenticate::Callers;
use crate::gateway::decision::authorise::Evidence;
use crate::gateway::decision::decide::{decide, Asked, Decided, Forward, Next, Policy};
use crate::gateway::decision::incoming::Incoming;
use crate::gateway::decision::route::Routed;
use crate::gateway::decision::{Decision, DecisionId, Evaluated, EvidenceSource};
use crate::gateway::evidence::cache::{entry_weight, Entries};
use crate::request::query::Query;
use crate::scheme::vocabulary::{BROKER_HEADERS, EVIDENCE_HEADERS};
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use pingora::http::RequestHeader;
use prometheus::IntCounter;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Headers no stage of the sequence reads, left out of the key unless a route's rule reads
/// them: they differ from request to request (trace context, request ids) or say what the client
/// accepts back.
pub(crate) const UNREAD: [&str; 14] = [
    "accept",
    "accept-encoding",
    "accept-language",
    "baggage",
    "cache-control",
    "if-modified-since",
    "if-none-match",
    "pragma",
    "referer",
    "traceparent",
    "tracestate",
    "user-agent",
    "x-correlation-id",
    "x-request-id",
];

/// The longest any decision is kept, whatever else would let it stay.
const LONGEST: Duration = Duration::from_secs(60);

/// The longest head whose decision is kept, in the key's bytes.
const LONGEST_KEY: usize = 4096;

/// What an entry holds besides its key and its evaluation, for its weight.
const ENTRY_OVERHEAD: usize = 2048;

/// What each part the decision took from the request (a query parameter, a capture, a value
/// taken) takes beside its text: its allocations and bookkeeping.
const PART_OVERHEAD: usize = 256;

/// What an entry takes in memory, roughly: its key; what the decision took from the request
/// (the path, captures, query, upstream URI, values and mask: their text no longer than the key
/// three times over, and each part's overhead); the evaluation it keeps alive; the rest of the
/// decision.
#[allow(clippy::borrowed_box)]
fn weight(key: &Box<[u8]>, kept: &Arc<Kept>) -> u32 {
    let evaluation = kept
        .evidence
        .as_ref()
        .map_or(0, |(_, evaluated)| entry_weight(evaluated, 0) as usize);
    let parts = kept.query.len() + kept.captures.len() + kept.decision.values.len();
    let size = 4 * key.len() + PART_OVERHEAD * parts + evaluation + ENTRY_OVERHEAD;
    u32::try_from(size).unwrap_or(u32::MAX)
}

/// Decisions kept by the request as it came.
pub struct AsItCame {
    cache: moka::sync::Cache<Box<[u8]>, Arc<Kept>>,
    /// `UNREAD` less the headers a rule of this configuration reads.
    unread: Vec<http::HeaderName>,
    /// The headers of evidence and a broker's assertion, in every name the scheme gives them.
    never: Vec<http::HeaderName>,
    /// Whether parties are compared through their records (3.0): delegation is then not kept.
    party_records: bool,
    /// The decision cache, which a kept grant's evaluation must still be in.
    decisions: Entries,
    hits: IntCounter,
    misses: IntCounter,
}

/// A decision as it was made, to be given again.
struct Kept {
    decision: Decision,
    route: Arc<Route>,
    path: String,
    captures: BTreeMap<String, String>,
    query: Query,
    upstream_uri: http::Uri,
    /// The party the bearer token named, which it must name again.
    caller: Option<String>,
    /// A grant's evaluation, and the decision cache's key it must still be kept under.
    evidence: Option<(Arc<[u8]>, Arc<Evaluated>)>,
}

impl AsItCame {
    /// A cache of at most `bytes` (by its entries' estimated size) for the routes `routes`.
    pub fn new(
        bytes: u64,
        routes: &[Arc<Route>],
        party_records: bool,
        decisions: Entries,
        metrics: &Metrics,
    ) -> Self {
        let read: Vec<&str> = routes.iter().flat_map(|r| r.header_names()).collect();
        let unread = UNREAD
            .into_iter()
            .filter(|h| !read.iter().any(|r| r.eq_ignore_ascii_case(h)))
            .map(http::HeaderName::from_static)
            .collect();
        let never = (EVIDENCE_HEADERS.iter().chain(&BROKER_HEADERS))
            .filter_map(|h| http::HeaderName::from_bytes(h.as_bytes()).ok())
            .collect();
        let counter = |cache, result| metrics.cache.with_label_values(&[cache, result]);
        AsItCame {
            cache: moka::sync::Cache::builder()
                .max_capacity(bytes)
                .weigher(weight)
                .time_to_live(LONGEST)
                .eviction_listener(metrics.on_eviction("request"))
                .build(),
            unread,
            never,
            party_records,
            decisions,
            hits: counter("request", "hit"),
            misses: counter("request", "miss"),
        }
    }

    /// Decide `incoming` as `decide` does, giving a kept decision where there is one.
    pub async fn decide(
        &self,
        policy: &Policy<'_>,
        incoming: &mut dyn Incoming,
        callers: &dyn Callers,
        evidence: &dyn Evidence,
        now: Timestamp,
    ) -> Decided {
        let started = Instant::now();
        let key = match incoming.described()
            || incoming.has_body()
            || crate::telemetry::trace::steps_recorded()
        {
            true => None,
            false => self.key(incoming.header()),
        };
        if let Some(key) = &key {
            if let Some(decided) = self
                .given(key, incoming.header(), callers, now, started)
                .await
            {
                self.hits.inc();
                return decided;
            }
            self.misses.inc();
        }
        let decided = decide(policy, Asked::Request(incoming), callers, evidence, now).await;
        if let Some(kept) = key.and_then(|k| Some((k, self.keepable(&decided)?))) {
            self.cache
                .insert(kept.0.into_boxed_slice(), Arc::new(kept.1));
        }
        decided
    }

    /// Everything the sequence reads of the request's head, in one buffer; None for a head no
    /// decision of which is kept (evidence in it, a broker's assertion, longer than
    /// `LONGEST_KEY`).
    fn key(&self, req: &RequestHeader) -> Option<Vec<u8>> {
        fn field(key: &mut Vec<u8>, bytes: &[u8]) {
            let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            key.extend_from_slice(&len.to_le_bytes());
            key.extend_from_slice(bytes);
        }
        let mut key = Vec::with_capacity(512);
        field(&mut key, req.method.as_str().as_bytes());
        let version = match req.version {
            http::Version::HTTP_09 => 0,
            http::Version::HTTP_10 => 1,
            http::Version::HTTP_11 => 2,
            http::Version::HTTP_2 => 3,
            http::Version::HTTP_3 => 4,
            _ => 5,
        };
        key.push(version);
        field(
            &mut key,
            req.uri.scheme_str().unwrap_or_default().as_bytes(),
        );
        let authority = req.uri.authority().map_or("", |a| a.as_str());
        field(&mut key, authority.as_bytes());
        let target = req.uri.path_and_query().map_or("", |p| p.as_str());
        field(&mut key, target.as_bytes());
        field(&mut key, req.raw_path());
        for (name, value) in &req.headers {
            if self.never.contains(name) {
                return None;
            }
            if !self.unread.contains(name) {
                field(&mut key, name.as_str().as_bytes());
                field(&mut key, value.as_bytes());
                if key.len() > LONGEST_KEY {
                    return None;
                }
            }
        }
        (key.len() <= LONGEST_KEY).then_some(key)
    }

    /// The decision kept for `key`, if it still holds: its evaluation still the decision
    /// cache's, and the bearer token still valid and naming the same party.
    async fn given(
        &self,
        key: &[u8],
        req: &RequestHeader,
        callers: &dyn Callers,
        now: Timestamp,
        started: Instant,
    ) -> Option<Decided> {
        let kept = self.cache.get(key)?;
        if let Some(caller) = &kept.caller {
            match callers.party(req, now) {
                Ok(party) if party == *caller => {}
                _ => {
                    self.cache.invalidate(key);
                    return None;
                }
            }
        }
        if let Some((kept_as, evaluated)) = &kept.evidence {
            if !self.decisions.still(kept_as, evaluated).await {
                self.cache.invalidate(key);
                return None;
            }
        }
        let mut decision = kept.decision.clone();
        decision.id = DecisionId::next();
        decision.at = SystemTime::now();
        decision.decided_in = Some(started.elapsed());
        Some(Decided {
            decision,
            routed: Some(Routed {
                route: kept.route.clone(),
                path: kept.path.clone(),
                captures: kept.captures.clone(),
                query: kept.query.clone(),
                upstream_uri: kept.upstream_uri.clone(),
                body: None,
            }),
            next: Next::Forward(Forward {
                person: None,
                method_field: None,
            }),
        })
    }

    /// What of `decided` may be given again; None where nothing may.
    fn keepable(&self, decided: &Decided) -> Option<Kept> {
        let d = &decided.decision;
        let routed = decided.routed.as_ref()?;
        let route = &routed.route;
        match &decided.next {
            Next::Forward(Forward {
                person: None,
                method_field: None,
            }) => {}
            _ => return None,
        }
        if route.login || route.body.is_some() || routed.body.is_some() || d.refusal.is_some() {
            return None;
        }
        let (caller, evidence) = match (&route.auth, d.reason) {
            (Auth::Public, "public") => (None, None),
            (Auth::Token, "authenticated") => (Some(d.caller_id()?.to_string()), None),
            (Auth::Delegation(rule), "granted") => {
                let assessed = d.assessed.as_ref()?;
                let from_registry = matches!(
                    assessed.evaluated.evidence.source,
                    EvidenceSource::Registry { .. }
                );
                let broker = d.caller.as_ref()?.acting_for.is_some();
                if !from_registry || broker || rule.caller_names_owner || self.party_records {
                    return None;
                }
                let evidence = (assessed.kept_as.clone()?, assessed.evaluated.clone());
                (Some(d.caller_id()?.to_string()), Some(evidence))
            }
            _ => return None,
        };
        let mut decision = d.clone();
        if let Some(assessed) = decision.assessed.as_mut() {
            assessed.cache_hit = true;
        }
        Some(Kept {
            decision,
            route: route.clone(),
            path: routed.path.clone(),
            captures: routed.captures.clone(),
            query: routed.query.clone(),
            upstream_uri: routed.upstream_uri.clone(),
            caller,
            evidence,
        })
    }
}
