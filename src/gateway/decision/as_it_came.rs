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
//! - the evidence: only a registry's evaluation from the decision cache is kept, and only until
//!   that cache's entry ends (its `until`) and while no entry of it has gone before its time (a
//!   purge, the bound on memory: `DecisionCache::removals`);
//! - the time: nothing else a kept decision rests on depends on it.
//!
//! What is never kept: a request with a body or described by another proxy, a route for people
//! or whose rule reads the body, a refusal (shadow mode's too), the gateway's own endpoints,
//! evidence from the header (its tokens' age and signers' standing are judged at every request),
//! a broker's call (its consumer's assertion is checked for replay), a rule that lets the caller
//! name the data owner (its lookups are counted per request), a scheme whose parties are
//! compared through their records (3.0: records change on their own time), and any request
//! whose steps are traced.

use super::authenticate::Callers;
use super::authorise::Evidence;
use super::decide::{decide, Asked, Decided, Forward, Next, Policy};
use super::incoming::Incoming;
use super::route::Routed;
use super::{Decision, DecisionId, EvidenceSource};
use crate::config::model::{Auth, Route};
use crate::request::query::Query;
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use pingora::http::RequestHeader;
use prometheus::IntCounter;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Headers no stage of the sequence reads, left out of the key unless a route's rule reads
/// them: they differ from request to request (trace context, request ids) or say what the client
/// accepts back.
const UNREAD: [&str; 14] = [
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

/// What an entry holds besides its key, for its weight.
const ENTRY_OVERHEAD: usize = 2048;

/// What an entry takes in memory, roughly: its key, and the decision with its path.
#[allow(clippy::borrowed_box)]
fn weight(key: &Box<[u8]>, kept: &Arc<Kept>) -> u32 {
    let size = key.len() + kept.path.len() + ENTRY_OVERHEAD;
    u32::try_from(size).unwrap_or(u32::MAX)
}

/// Decisions kept by the request as it came.
pub struct AsItCame {
    cache: moka::sync::Cache<Box<[u8]>, Arc<Kept>>,
    /// `UNREAD` less the headers a rule of this configuration reads.
    unread: Vec<&'static str>,
    /// Whether parties are compared through their records (3.0): delegation is then not kept.
    party_records: bool,
    /// The decision cache's count of entries gone before their time.
    removals: Arc<AtomicU64>,
    hits: IntCounter,
    misses: IntCounter,
    /// A kept grant is a decision-cache hit as the sequence would have counted it.
    decision_hits: IntCounter,
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
    /// A grant, counted as a decision-cache hit.
    granted: bool,
    until: Instant,
    /// `removals` when the decision began.
    removals: u64,
}

impl AsItCame {
    /// A cache of at most `bytes` (by its entries' estimated size) for the routes `routes`.
    pub fn new(
        bytes: u64,
        routes: &[Arc<Route>],
        party_records: bool,
        removals: Arc<AtomicU64>,
        metrics: &Metrics,
    ) -> Self {
        let read: Vec<&str> = routes.iter().flat_map(|r| r.header_names()).collect();
        let unread = UNREAD
            .into_iter()
            .filter(|h| !read.iter().any(|r| r.eq_ignore_ascii_case(h)))
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
            party_records,
            removals,
            hits: counter("request", "hit"),
            misses: counter("request", "miss"),
            decision_hits: counter("decision", "hit"),
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
            false => Some(self.key(incoming.header())),
        };
        if let Some(key) = &key {
            if let Some(decided) = self.given(key, incoming.header(), callers, now, started) {
                self.hits.inc();
                return decided;
            }
            self.misses.inc();
        }
        let removals = self.removals.load(Ordering::Acquire);
        let decided = decide(policy, Asked::Request(incoming), callers, evidence, now).await;
        if let Some(kept) = key.and_then(|k| Some((k, self.keepable(&decided, removals)?))) {
            self.cache
                .insert(kept.0.into_boxed_slice(), Arc::new(kept.1));
        }
        decided
    }

    /// Everything the sequence reads of the request's head, in one buffer.
    fn key(&self, req: &RequestHeader) -> Vec<u8> {
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
            if !self.unread.contains(&name.as_str()) {
                field(&mut key, name.as_str().as_bytes());
                field(&mut key, value.as_bytes());
            }
        }
        key
    }

    /// The decision kept for `key`, if it still holds: its evidence still the decision cache's,
    /// and the bearer token still valid and naming the same party.
    fn given(
        &self,
        key: &[u8],
        req: &RequestHeader,
        callers: &dyn Callers,
        now: Timestamp,
        started: Instant,
    ) -> Option<Decided> {
        let kept = self.cache.get(key)?;
        if Instant::now() >= kept.until || self.removals.load(Ordering::Acquire) != kept.removals {
            self.cache.invalidate(key);
            return None;
        }
        if let Some(caller) = &kept.caller {
            match callers.party(req, now) {
                Ok(party) if party == *caller => {}
                _ => return None,
            }
        }
        if kept.granted {
            self.decision_hits.inc();
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

    /// What of `decided` may be given again, and until when; None where it may not be.
    fn keepable(&self, decided: &Decided, removals: u64) -> Option<Kept> {
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
        let longest = Instant::now() + LONGEST;
        let (caller, until, granted) = match (&route.auth, d.reason) {
            (Auth::Public, "public") => (None, longest, false),
            (Auth::Token, "authenticated") => (Some(d.caller_id()?.to_string()), longest, false),
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
                let until = assessed.kept_until?.min(longest);
                (Some(d.caller_id()?.to_string()), until, true)
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
            granted,
            until,
            removals,
        })
    }
}
