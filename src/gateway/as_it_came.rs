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
//! - the evidence: a registry's evaluation from the decision cache is given only while that
//!   cache's entry still holds the very same evaluation (not expired, purged, evicted or made
//!   anew), looked up as the sequence would have looked it up; a chain from the header is
//!   verified and judged again at every hit as the sequence judges it (each token's signature
//!   as kept, its age, its signer's standing now, the registry's designation), and given only
//!   while that yields the very same evaluation (not expired, evicted or made anew);
//! - the time: nothing else a kept decision rests on depends on it.
//!
//! A kept decision that no longer stands is dropped and the request decided whole: its chain from
//! the header is then judged twice (its caches' lookups counted twice) for that one request.
//!
//! What is never kept: a request with a body, a head larger than `LONGEST_KEY` or described by
//! another proxy, a route for people or whose rule reads the body, a refusal (shadow mode's
//! too), the gateway's own endpoints, a broker's call (its consumer's assertion is checked for
//! replay; such a request is not even looked up), a rule that lets the caller name the data
//! owner (its lookups are counted per request), and a scheme whose parties are compared through
//! their records (3.0: records change on their own time).
//!
//! A recorded request (tracing) is looked up as any other, in a span of its own (`kept
//! decision`), so that its trace shows the path the requests not recorded take.

use crate::config::model::{Auth, Route};
use crate::gateway::decision::authenticate::Callers;
use crate::gateway::decision::authorise::{self, Evidence, Expected};
use crate::gateway::decision::decide::{decide, Asked, Decided, Forward, Next, Policy};
use crate::gateway::decision::incoming::Incoming;
use crate::gateway::decision::route::Routed;
use crate::gateway::decision::{Decision, DecisionId, Evaluated, EvidenceSource};
use crate::gateway::evidence::cache::{entry_weight, Entries};
use crate::scheme::mask::AccessRequest;
use crate::scheme::party_record::Aliases;
use crate::scheme::vocabulary::{BROKER_HEADERS, EVIDENCE_HEADERS};
use crate::scheme::Timestamp;
use crate::telemetry::metrics::CacheLookups;
use crate::telemetry::trace::{steps_recorded, Step};
use crate::telemetry::Metrics;
use opentelemetry::trace::SpanKind;
use pingora::http::RequestHeader;
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

/// The longest head whose decision is kept, in the key's bytes, but for evidence in the header.
const LONGEST_KEY: usize = 4096;

/// The longest evidence in the header whose decision is kept (a token with its signer's
/// certificates is some 5 KiB).
const LONGEST_EVIDENCE: usize = 12 * 1024;

/// What an entry holds besides its key and its evaluation, for its weight.
const ENTRY_OVERHEAD: usize = 2048;

/// What each part the decision took from the request (a query parameter, a capture, a value
/// taken) takes beside its text: its allocations and bookkeeping.
const PART_OVERHEAD: usize = 256;

/// What an entry takes in memory, roughly: its key; what the decision took from the request
/// (the path, captures, query, upstream URI, values and mask: their text no longer than the key
/// three times over, and each part's overhead); a header's chain, kept beside the key; the
/// evaluation it keeps alive; the rest of the decision.
#[allow(clippy::borrowed_box)]
fn weight(key: &Box<[u8]>, kept: &Arc<Kept>) -> u32 {
    let grounds = kept.grounds.as_ref().map_or(0, |g| {
        let tokens = match g {
            Grounds::Header { tokens, .. } => tokens.len(),
            Grounds::Registry { .. } => 0,
        };
        entry_weight(g.evaluated(), tokens) as usize
    });
    let parts = kept.routed.query.len() + kept.routed.captures.len() + kept.decision.values.len();
    let size = 4 * key.len() + PART_OVERHEAD * parts + grounds + ENTRY_OVERHEAD;
    u32::try_from(size).unwrap_or(u32::MAX)
}

/// Why no kept decision was given: the outcome of a recorded request's `kept decision` span.
#[derive(Debug)]
enum Missed {
    /// None is kept for the head.
    None,
    /// The one kept was dropped: the caller or the evidence no longer stands.
    NoLongerStands,
}

impl Missed {
    fn as_str(&self) -> &'static str {
        match self {
            Missed::None => "none",
            Missed::NoLongerStands => "no_longer_stands",
        }
    }
}

/// Decisions kept by the request as it came.
pub struct AsItCame {
    /// Found by foldhash's randomly keyed hash, cheap over a head with kilobytes of evidence.
    cache: moka::sync::Cache<Box<[u8]>, Arc<Kept>, crate::keyed::KeyedHash>,
    /// `UNREAD` less the headers a rule of this configuration reads.
    unread: Vec<http::HeaderName>,
    /// The headers of a broker's assertion, in every name the scheme gives them.
    never: Vec<http::HeaderName>,
    /// The headers of evidence, in every name the scheme gives them.
    evidence: Vec<http::HeaderName>,
    /// Whether parties are compared through their records (3.0): delegation is then not kept.
    party_records: bool,
    /// The decision cache, which a kept grant's evaluation must still be in.
    decisions: Entries,
    lookups: CacheLookups,
}

/// A decision as it was made, to be given again.
struct Kept {
    decision: Decision,
    /// The request matched to its route, given as it is with every hit.
    routed: Arc<Routed>,
    /// The party the bearer token named, which it must name again.
    caller: Option<String>,
    /// What a grant rests on.
    grounds: Option<Grounds>,
}

/// What a kept grant rests on, judged again at every hit.
enum Grounds {
    /// A registry's evaluation, and the decision cache's key it must still be kept under.
    Registry {
        kept_as: Arc<[u8]>,
        evaluated: Arc<Evaluated>,
    },
    /// A chain from the header, as the evidence stage was asked to judge it (the header's name
    /// and tokens, the mask, the registry the route names), and the evaluation it must yield
    /// again.
    Header {
        name: &'static str,
        tokens: Box<str>,
        request: Arc<AccessRequest>,
        registry: Option<Box<str>>,
        evaluated: Arc<Evaluated>,
    },
}

impl Grounds {
    fn evaluated(&self) -> &Arc<Evaluated> {
        match self {
            Grounds::Registry { evaluated, .. } | Grounds::Header { evaluated, .. } => evaluated,
        }
    }

    /// Whether the grant still stands, judged as the sequence judges its evidence at `now` for
    /// `caller`: the very same evaluation comes of it.
    async fn stand(
        &self,
        caller: &str,
        decisions: &Entries,
        evidence: &dyn Evidence,
        now: Timestamp,
    ) -> bool {
        match self {
            Grounds::Registry { kept_as, evaluated } => decisions.still(kept_as, evaluated).await,
            Grounds::Header {
                name,
                tokens,
                request,
                registry,
                evaluated,
            } => {
                // Parties compare as written where delegation is kept (`party_records`).
                let aliases = Aliases::default();
                let expected = Expected {
                    request,
                    caller,
                    registry: registry.as_deref(),
                    header: name,
                    aliases: &aliases,
                };
                match evidence.header(tokens, &expected, now).await {
                    Ok(assessed) => Arc::ptr_eq(&assessed.evaluated, evaluated),
                    Err(_) => false,
                }
            }
        }
    }
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
        let names = |names: &[&str]| {
            (names.iter())
                .filter_map(|h| http::HeaderName::from_bytes(h.as_bytes()).ok())
                .collect()
        };
        AsItCame {
            cache: moka::sync::Cache::builder()
                .max_capacity(bytes)
                .weigher(weight)
                .time_to_live(LONGEST)
                .eviction_listener(metrics.on_eviction("request"))
                .build_with_hasher(crate::keyed::keyed()),
            unread,
            never: names(&BROKER_HEADERS),
            evidence: names(&EVIDENCE_HEADERS),
            party_records,
            decisions,
            lookups: metrics.cache_lookups("request"),
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
        let key = match incoming.described() || incoming.has_body() {
            true => None,
            false => self.key(incoming.header()),
        };
        if let Some(key) = &key {
            // A recorded request's lookup is a span of its own: its trace shows the path the
            // requests not recorded take.
            let step = steps_recorded()
                .then(|| Step::start(SpanKind::Internal, || "kept decision", Vec::new));
            let given = self.given(key, incoming.header(), (callers, evidence), now, started);
            let given = match &step {
                Some(step) => step.within(given).await,
                None => given.await,
            };
            if let Some(step) = step {
                step.end(|| {
                    (
                        given.as_ref().map_or_else(Missed::as_str, |_| "given"),
                        false,
                    )
                });
            }
            self.lookups.count(given.is_ok());
            if let Ok(decided) = given {
                return decided;
            }
        }
        let decided = decide(policy, Asked::Request(incoming), callers, evidence, now).await;
        let Some(key) = key else { return decided };
        let Some(kept) = self.keepable(&decided, incoming.header()) else {
            return decided;
        };
        // The room for evidence is for decisions on it: any other head is no longer than
        // `LONGEST_KEY` whole.
        let on_header = matches!(kept.grounds, Some(Grounds::Header { .. }));
        if on_header || key.len() <= LONGEST_KEY {
            self.cache.insert(key.into_boxed_slice(), Arc::new(kept));
        }
        decided
    }

    /// Everything the sequence reads of the request's head, in one buffer; None for a head no
    /// decision of which is kept (a broker's assertion in it, longer than `LONGEST_KEY` but for
    /// its evidence, evidence longer than `LONGEST_EVIDENCE`).
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
        let mut evidence = 0;
        for (name, value) in &req.headers {
            if self.never.contains(name) {
                return None;
            }
            if self.unread.contains(name) {
                continue;
            }
            if self.evidence.contains(name) {
                evidence += value.len();
            }
            field(&mut key, name.as_str().as_bytes());
            field(&mut key, value.as_bytes());
            if evidence > LONGEST_EVIDENCE || key.len() - evidence > LONGEST_KEY {
                return None;
            }
        }
        (key.len() - evidence <= LONGEST_KEY).then_some(key)
    }

    /// The decision kept for `key`, if it still holds: the bearer token still valid and naming
    /// the same party, and the evidence still yielding the very same evaluation.
    async fn given(
        &self,
        key: &[u8],
        req: &RequestHeader,
        (callers, evidence): (&dyn Callers, &dyn Evidence),
        now: Timestamp,
        started: Instant,
    ) -> Result<Decided, Missed> {
        let kept = self.cache.get(key).ok_or(Missed::None)?;
        if let Some(caller) = &kept.caller {
            match callers.party(req, now) {
                Ok(party) if party == *caller => {}
                _ => {
                    self.cache.invalidate(key);
                    return Err(Missed::NoLongerStands);
                }
            }
        }
        if let Some(grounds) = &kept.grounds {
            let caller = kept.caller.as_deref().unwrap_or_default();
            if !grounds.stand(caller, &self.decisions, evidence, now).await {
                self.cache.invalidate(key);
                return Err(Missed::NoLongerStands);
            }
        }
        let mut decision = kept.decision.clone();
        decision.id = DecisionId::next();
        decision.at = SystemTime::now();
        decision.decided_in = Some(started.elapsed());
        Ok(Decided {
            decision,
            routed: Some(kept.routed.clone()),
            next: Next::Forward(Forward {
                person: None,
                method_field: None,
            }),
        })
    }

    /// What of `decided`, made on `req`, may be given again; None where nothing may.
    fn keepable(&self, decided: &Decided, req: &RequestHeader) -> Option<Kept> {
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
        let (caller, grounds) = match (&route.auth, d.reason) {
            (Auth::Public, "public") => (None, None),
            (Auth::Token, "authenticated") => (Some(d.caller_id()?.to_string()), None),
            (Auth::Delegation(rule), "granted") => {
                let assessed = d.assessed.as_ref()?;
                let broker = d.caller.as_ref()?.acting_for.is_some();
                if broker || rule.caller_names_owner || self.party_records {
                    return None;
                }
                let evaluated = assessed.evaluated.clone();
                let grounds = match &evaluated.evidence.source {
                    EvidenceSource::Registry { .. } => Grounds::Registry {
                        kept_as: assessed.kept_as.clone()?,
                        evaluated,
                    },
                    EvidenceSource::Header => {
                        // As the evidence stage read it from this very head.
                        let (name, tokens) =
                            authorise::header(&req.headers, EVIDENCE_HEADERS).ok()??;
                        Grounds::Header {
                            name,
                            tokens: tokens.into(),
                            request: d.mask.clone()?,
                            registry: rule.registry.as_deref().map(Into::into),
                            evaluated,
                        }
                    }
                    EvidenceSource::Given { .. } => return None,
                };
                (Some(d.caller_id()?.to_string()), Some(grounds))
            }
            _ => return None,
        };
        let mut decision = d.clone();
        if let Some(assessed) = decision.assessed.as_mut() {
            assessed.cache_hit = true;
        }
        Some(Kept {
            decision,
            routed: routed.clone(),
            caller,
            grounds,
        })
    }
}
