//! The decision kept by the request as it came: in front of the whole sequence (`decide`), a
//! request whose head is byte for byte one decided before is given that decision again, where
//! nothing it was decided on can have changed since.
//!
//! The key is everything the sequence reads of a request: the method, the version, the target
//! as it came and as parsed, and every header in order, name and value, but those no stage and
//! no route's rule reads (`UNREAD`, less any a rule of this configuration names). The value of
//! evidence in the header (kilobytes) is held beside the key, not in it: it is compared whole at
//! a hit, not hashed, so a head that differs from a kept one only there is decided whole, and
//! its decision, if kept, takes the other's place (one entry for each head but its evidence).
//! What else a decision depends on is judged at every hit, or ends the entry:
//! - the configuration: one cache per snapshot, so a reload starts empty;
//! - the caller: the claims of the bearer token, verified when the decision was made, are kept
//!   and their times judged again at every hit (the head, and so the token, is the same byte
//!   for byte, and the key that verified it the snapshot's own);
//! - the evidence: a registry's evaluation from the decision cache is given only while that
//!   cache's entry still holds the very same evaluation (not expired, purged, evicted or made
//!   anew). It is looked up as the sequence would have looked it up where the cache counted a
//!   removal since the entry was last seen to hold it, and at one hit in eight; at the others,
//!   nothing having changed, its expiry alone is judged (`Entries::still`). A chain from the
//!   header is judged again as the sequence judges it (each token's signature as kept, its age,
//!   its signer's standing now, the registry's designation), and given only while that yields
//!   the very same evaluation (not expired, evicted or made anew). It is judged whole at the
//!   first hit of each second and whenever the trusted list or a party record that judgement
//!   read changed; at the other hits what its last whole judgement found stands, and only what
//!   depends on the time within the second is judged, each token's claims' times
//!   (`Evidence::header_stands`);
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

use crate::access_token::AccessClaims;
use crate::config::model::{Auth, Route};
use crate::gateway::decision::authenticate::Callers;
use crate::gateway::decision::authorise::{self, Evidence, Expected};
use crate::gateway::decision::decide::{decide, Asked, Decided, Forward, Next, Policy};
use crate::gateway::decision::incoming::Incoming;
use crate::gateway::decision::route::Routed;
use crate::gateway::decision::{Decision, DecisionId, Evaluated, EvidenceSource, Judged};
use crate::gateway::evidence::cache::{entry_weight, Entries, KeptOn};
use crate::scheme::mask::AccessRequest;
use crate::scheme::party_record::Aliases;
use crate::scheme::vocabulary::{BROKER_HEADERS, EVIDENCE_HEADERS};
use crate::scheme::Timestamp;
use crate::telemetry::metrics::CacheLookups;
use crate::telemetry::trace::{steps_recorded, Step};
use crate::telemetry::Metrics;
use arc_swap::ArcSwapOption;
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
pub(crate) const LONGEST: Duration = Duration::from_secs(60);

/// The longest head whose decision is kept, in the key's bytes, but for evidence in the header.
const LONGEST_KEY: usize = 4096;

/// The longest evidence in the header whose decision is kept (a token with its signer's
/// certificates is some 5 KiB).
const LONGEST_EVIDENCE: usize = 12 * 1024;

/// What an entry holds besides its key and its evaluation, for its weight.
const ENTRY_OVERHEAD: usize = 2048;

/// What a chain's judgement holds for each token besides its text: its claims and evidence
/// decoded, its signer's certificates, its step.
const JUDGEMENT_OVERHEAD: usize = 4096;

/// What each part the decision took from the request (a query parameter, a capture, a value
/// taken) takes beside its text: its allocations and bookkeeping.
const PART_OVERHEAD: usize = 256;

/// What an entry takes in memory, roughly: its key and the evidence held beside it; what the
/// decision took from the request (the path, captures, query, upstream URI, values and mask:
/// their text no longer than the key three times over, and each part's overhead); a header's
/// chain, kept beside the key, and its judgement, which keeps its verified tokens alive (each
/// about three times its text, and its chain); the evaluation it keeps alive; the rest of the
/// decision. Worked out once, when it is kept.
fn weight(key_len: usize, kept: &Kept) -> u64 {
    let grounds = kept.grounds.as_ref().map_or(0, |g| {
        let tokens = match g {
            Grounds::Header { tokens, .. } => {
                let steps = tokens.split(',').count();
                4 * tokens.len() + JUDGEMENT_OVERHEAD * steps
            }
            Grounds::Registry { .. } => 0,
        };
        entry_weight(g.evaluated(), tokens) as usize
    });
    let parts = kept.routed.query.len() + kept.routed.captures.len() + kept.decision.values.len();
    let size = 4 * key_len + PART_OVERHEAD * parts + grounds + ENTRY_OVERHEAD;
    u64::try_from(size).unwrap_or(u64::MAX)
}

/// What an entry weighs: its `weight`, which never changes while it is kept.
#[derive(Clone)]
struct ByWeight;

impl quick_cache::Weighter<Box<[u8]>, Arc<Kept>> for ByWeight {
    fn weight(&self, _key: &Box<[u8]>, kept: &Arc<Kept>) -> u64 {
        kept.weight
    }
}

/// Counts the entries evicted (or not taken in) for room, and those a decision made on the same
/// head replaced: at the same time, or on other evidence.
#[derive(Clone)]
struct Evictions(prometheus::IntCounter);

impl quick_cache::Lifecycle<Box<[u8]>, Arc<Kept>> for Evictions {
    type RequestState = ();

    fn on_evict(&self, _: &mut (), _key: Box<[u8]>, _kept: Arc<Kept>) {
        self.0.inc();
    }
}

/// How many entries a cache of `bytes` is sized for: the weight of a head with a bearer token
/// each, at least one, and no more than a million however large the configured size.
fn entries_for(bytes: u64) -> usize {
    let usual = ENTRY_OVERHEAD + 4 * 1024;
    usize::try_from(bytes / usual as u64).map_or(1 << 20, |n| n.clamp(1, 1 << 20))
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

/// Decisions kept by the request as it came: one per snapshot, never carried over to another
/// (a kept caller's token is judged again by its times alone).
pub struct AsItCame {
    /// Found by foldhash's randomly keyed hash over what the sequence reads of a head but its
    /// evidence (`Key::read`); bounded by the entries' weight (quick_cache: a lookup is a read
    /// lock and a hash probe).
    cache: quick_cache::sync::Cache<
        Box<[u8]>,
        Arc<Kept>,
        ByWeight,
        crate::keyed::KeyedHash,
        Evictions,
    >,
    /// `UNREAD` less the headers a rule of this configuration reads.
    unread: Vec<http::HeaderName>,
    /// The headers of a broker's assertion, in every name the scheme gives them.
    never: Vec<http::HeaderName>,
    /// The headers of evidence, in every name the scheme gives them.
    evidence: Vec<http::HeaderName>,
    /// Whether parties are compared through their records (3.0): delegation is then not kept.
    party_records: bool,
    /// The longest a decision is kept (`LONGEST`).
    longest: Duration,
    /// The decision cache, which a kept grant's evaluation must still be in.
    decisions: Entries,
    lookups: CacheLookups,
}

/// What a head is looked up by: everything the sequence reads of it (`read`), but the value of
/// its evidence in the header, held apart (`evidence`: sharing the head's bytes, not copied).
struct Key {
    read: Vec<u8>,
    evidence: Option<http::HeaderValue>,
}

impl Key {
    /// The value of the evidence in the header, empty where there is none.
    fn evidence(&self) -> &[u8] {
        self.evidence.as_ref().map_or(&[], |v| v.as_bytes())
    }

    /// How long the head's key would be with its evidence in it.
    fn len(&self) -> usize {
        self.read.len() + self.evidence().len()
    }
}

/// A decision as it was made, to be given again.
struct Kept {
    /// The value of the evidence in the header the decision was made on, byte for byte (empty
    /// where there was none): a hit must bring the very same.
    evidence: Box<[u8]>,
    decision: Decision,
    /// The request matched to its route, given as it is with every hit.
    routed: Arc<Routed>,
    /// The verified claims of the bearer token, which must still name their party: the head,
    /// and so the token, is the same byte for byte at every hit.
    caller: Option<Arc<AccessClaims>>,
    /// What a grant rests on.
    grounds: Option<Grounds>,
    /// When it is given no more, whatever else would let it stay (`longest` after it was made).
    until: Instant,
    /// What it weighs in the cache (`weight`).
    weight: u64,
}

/// What a kept grant rests on, judged again at every hit.
enum Grounds {
    /// A registry's evaluation, and the decision cache's key it must still be kept under.
    Registry {
        kept_on: KeptOn,
        evaluated: Arc<Evaluated>,
    },
    /// A chain from the header, as the evidence stage was asked to judge it (the header's name
    /// and tokens, the mask, the registry the route names), the evaluation it must yield again,
    /// and what the stage found when it last judged the chain whole.
    Header {
        name: &'static str,
        tokens: Box<str>,
        request: Arc<AccessRequest>,
        registry: Option<Box<str>>,
        evaluated: Arc<Evaluated>,
        judged: ArcSwapOption<Judged>,
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
            Grounds::Registry { kept_on, evaluated } => decisions.still(kept_on, evaluated).await,
            Grounds::Header {
                name,
                tokens,
                request,
                registry,
                evaluated,
                judged,
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
                let kept = (evaluated, judged);
                evidence.header_stands(tokens, &expected, kept, now).await
            }
        }
    }
}

impl AsItCame {
    /// A cache of at most `bytes` (by its entries' estimated size), each decision kept no longer
    /// than `longest`, for the routes `routes`.
    pub fn new(
        bytes: u64,
        longest: Duration,
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
            cache: quick_cache::sync::Cache::with(
                entries_for(bytes),
                bytes,
                ByWeight,
                crate::keyed::keyed(),
                Evictions(metrics.evictions("request")),
            ),
            unread,
            never: names(&BROKER_HEADERS),
            evidence: names(&EVIDENCE_HEADERS),
            party_records,
            longest,
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
            let given = self.given(key, (callers, evidence), now, started);
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
        let mut decided = decide(policy, Asked::Request(incoming), callers, evidence, now).await;
        // Kept with a grant on the chain, and nowhere else: it holds the chain's tokens.
        let judged = (decided.decision.assessed.as_mut()).and_then(|a| a.judged.take());
        let Some(key) = key else { return decided };
        let asked = (incoming.header(), &key);
        let Some(kept) = self.keepable(&decided, judged, asked, callers, now) else {
            return decided;
        };
        // The room for evidence is for decisions on it: any other head is no longer than
        // `LONGEST_KEY` whole.
        let on_header = matches!(kept.grounds, Some(Grounds::Header { .. }));
        if on_header || key.len() <= LONGEST_KEY {
            self.cache
                .insert(key.read.into_boxed_slice(), Arc::new(kept));
        }
        decided
    }

    /// Everything the sequence reads of the request's head, in one buffer, and the value of its
    /// evidence in the header apart; None for a head no decision of which is kept (a broker's
    /// assertion in it, longer than `LONGEST_KEY` but for its evidence, evidence longer than
    /// `LONGEST_EVIDENCE` or in more than one header, which the evidence stage refuses).
    fn key(&self, req: &RequestHeader) -> Option<Key> {
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
        let mut evidence = None;
        for (name, value) in &req.headers {
            if self.never.contains(name) {
                return None;
            }
            if self.unread.contains(name) {
                continue;
            }
            field(&mut key, name.as_str().as_bytes());
            if self.evidence.contains(name) {
                if evidence.is_some() || value.len() > LONGEST_EVIDENCE {
                    return None;
                }
                // Its place in the head, its value held apart (no value's length is this).
                key.extend_from_slice(&u32::MAX.to_le_bytes());
                evidence = Some(value.clone());
            } else {
                field(&mut key, value.as_bytes());
            }
            if key.len() > LONGEST_KEY {
                return None;
            }
        }
        (key.len() <= LONGEST_KEY).then_some(Key {
            read: key,
            evidence,
        })
    }

    /// The decision kept for `key`, if it still holds: the bearer token's claims still valid,
    /// and the evidence still yielding the very same evaluation.
    async fn given(
        &self,
        key: &Key,
        (callers, evidence): (&dyn Callers, &dyn Evidence),
        now: Timestamp,
        started: Instant,
    ) -> Result<Decided, Missed> {
        let kept = self.cache.get(&key.read[..]).ok_or(Missed::None)?;
        // Another head's, but for its evidence: kept until a decision on this one replaces it.
        if *kept.evidence != *key.evidence() {
            return Err(Missed::None);
        }
        let key = &key.read[..];
        if started >= kept.until {
            self.drop_kept(key, &kept);
            return Err(Missed::None);
        }
        if let Some(caller) = &kept.caller {
            if !callers.stands(caller, now) {
                self.drop_kept(key, &kept);
                return Err(Missed::NoLongerStands);
            }
        }
        if let Some(grounds) = &kept.grounds {
            let caller = kept.caller.as_ref().map_or("", |c| c.sub.as_str());
            if !grounds.stand(caller, &self.decisions, evidence, now).await {
                self.drop_kept(key, &kept);
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

    /// Drop `kept`, the entry of `key`, unless another took its place since it was looked up.
    fn drop_kept(&self, key: &[u8], kept: &Arc<Kept>) {
        self.cache
            .remove_if(key, |current| Arc::ptr_eq(current, kept));
    }

    /// Drop the entries past their `longest`, which no hit would give (and so no hit drops);
    /// how many.
    pub fn sweep(&self) -> usize {
        let (before, now) = (self.cache.len(), Instant::now());
        self.cache.retain(|_, kept| now < kept.until);
        before.saturating_sub(self.cache.len())
    }

    /// What of `decided`, made on `req` (looked up by `key`) at `now`, may be given again, with
    /// what the evidence stage found judging its chain (`judged`); None where nothing may.
    fn keepable(
        &self,
        decided: &Decided,
        judged: Option<Arc<Judged>>,
        (req, key): (&RequestHeader, &Key),
        callers: &dyn Callers,
        now: Timestamp,
    ) -> Option<Kept> {
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
            (Auth::Token, "authenticated") => (Some(credential(d, req, callers, now)?), None),
            (Auth::Delegation(rule), "granted") => {
                let assessed = d.assessed.as_ref()?;
                let broker = d.caller.as_ref()?.acting_for.is_some();
                if broker || rule.caller_names_owner || self.party_records {
                    return None;
                }
                let evaluated = assessed.evaluated.clone();
                let grounds = match &evaluated.evidence.source {
                    EvidenceSource::Registry { .. } => Grounds::Registry {
                        kept_on: KeptOn::new(assessed.kept_as.clone()?),
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
                            judged: ArcSwapOption::new(judged),
                        }
                    }
                    EvidenceSource::Given { .. } => return None,
                };
                (Some(credential(d, req, callers, now)?), Some(grounds))
            }
            _ => return None,
        };
        let mut decision = d.clone();
        if let Some(assessed) = decision.assessed.as_mut() {
            assessed.cache_hit = true;
        }
        let mut kept = Kept {
            evidence: key.evidence().into(),
            decision,
            routed: routed.clone(),
            caller,
            grounds,
            until: Instant::now().checked_add(self.longest)?,
            weight: 0,
        };
        kept.weight = weight(key.len(), &kept);
        Some(kept)
    }
}

/// The verified claims behind the caller of `d`, made on `req`: they must name that very party.
fn credential(
    d: &Decision,
    req: &RequestHeader,
    callers: &dyn Callers,
    now: Timestamp,
) -> Option<Arc<AccessClaims>> {
    let claims = callers.credential(req, now)?;
    (claims.sub == d.caller_id()?).then_some(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::evidence::cache::DecisionCache;
    use proptest::prelude::*;

    /// What the sequence reads of a head: what its key must tell apart.
    #[derive(Debug, Default, PartialEq)]
    struct Read {
        method: Vec<u8>,
        version: u8,
        scheme: Vec<u8>,
        authority: Vec<u8>,
        target: Vec<u8>,
        raw_path: Vec<u8>,
        headers: Vec<(Vec<u8>, Vec<u8>)>,
    }

    /// `req`'s `Read`, from the head itself: every header but those `kept` leaves unread.
    fn read_of(kept: &AsItCame, req: &RequestHeader) -> Read {
        Read {
            method: req.method.as_str().into(),
            version: 2,
            scheme: req.uri.scheme_str().unwrap_or_default().into(),
            authority: req.uri.authority().map_or("", |a| a.as_str()).into(),
            target: req.uri.path_and_query().map_or("", |p| p.as_str()).into(),
            raw_path: req.raw_path().into(),
            headers: (req.headers.iter())
                .filter(|(name, _)| !kept.unread.contains(name))
                .map(|(name, value)| (name.as_str().into(), value.as_bytes().into()))
                .collect(),
        }
    }

    /// The `Read` a key holds, taken back out of its bytes.
    fn decoded(key: &Key) -> Read {
        let mut at = &key.read[..];
        let length = |at: &mut &[u8]| {
            let (len, rest) = at.split_at(4);
            *at = rest;
            u32::from_le_bytes(len.try_into().unwrap())
        };
        let field = |at: &mut &[u8]| {
            let len = length(at) as usize;
            let (bytes, rest) = at.split_at(len);
            *at = rest;
            bytes.to_vec()
        };
        let method = field(&mut at);
        let version = at[0];
        at = &at[1..];
        let mut read = Read {
            method,
            version,
            scheme: field(&mut at),
            authority: field(&mut at),
            target: field(&mut at),
            raw_path: field(&mut at),
            headers: Vec::new(),
        };
        let mut evidence_taken = false;
        while !at.is_empty() {
            let name = field(&mut at);
            let value = match at[..4] == u32::MAX.to_le_bytes() {
                true => {
                    at = &at[4..];
                    let evidence = EVIDENCE_HEADERS
                        .iter()
                        .any(|e| name == e.to_lowercase().as_bytes());
                    assert!(evidence, "evidence apart after {name:?}");
                    assert!(!evidence_taken, "evidence apart twice");
                    evidence_taken = true;
                    key.evidence().to_vec()
                }
                false => field(&mut at),
            };
            read.headers.push((name, value));
        }
        assert_eq!(evidence_taken, key.evidence.is_some());
        read
    }

    fn kept() -> AsItCame {
        let settings = crate::gateway::evidence::cache::tests::settings(1 << 20);
        let metrics = Metrics::new();
        let decisions = DecisionCache::new(&settings, metrics.clone()).entries();
        AsItCame::new(1 << 20, LONGEST, &[], false, decisions, &metrics)
    }

    fn head() -> impl Strategy<Value = RequestHeader> {
        let names = prop::sample::select(vec![
            "host",
            "authorization",
            "delegation_evidence",
            "delegationEvidence",
            "service_consumer_assertion",
            "accept",
            "x-a",
            "x-b",
        ]);
        // Values that look like the key's own lengths and its mark for evidence held apart.
        let value = prop_oneof![
            prop::collection::vec(
                prop::sample::select(vec![0x20u8, b'a', 0xff, 0x80, b'\t']),
                0..12
            ),
            Just(vec![0xff; 4]),
            Just(vec![]),
        ];
        let targets = ["/a", "/a?b=%00", "http://h:1/a", "*", "/%ff%ff"].map(String::from);
        let long = format!("/{}", "a".repeat(3000));
        let targets = prop::sample::select([targets.to_vec(), vec![long]].concat());
        let methods = prop::sample::select(vec!["GET", "POST", "X-Y"]);
        let headers = prop::collection::vec((names, value), 0..6);
        (methods, targets, headers).prop_map(|(method, target, headers)| {
            let mut req = RequestHeader::build(method, target.as_bytes(), None).unwrap();
            for (name, value) in headers {
                let value = http::HeaderValue::from_bytes(&value).unwrap();
                req.append_header(name, value).unwrap();
            }
            req
        })
    }

    proptest! {
        /// A head's key holds everything the sequence reads of it, and nothing can be taken for
        /// it: the head's `Read` is taken back out of the key alone, so two heads with one key
        /// read the same. Heads with a broker's assertion, evidence in two headers, or longer than
        /// `LONGEST_KEY` but for their evidence, have none.
        #[test]
        fn a_key_tells_apart_every_two_heads_the_sequence_reads_apart(req in head()) {
            let kept = kept();
            let names = |names: &[&str]| {
                (req.headers.iter())
                    .filter(|(n, _)| names.iter().any(|m| n.as_str().eq_ignore_ascii_case(m)))
                    .count()
            };
            // The target is in the key twice, as it came and as parsed: past `LONGEST_KEY`.
            let long = req.raw_path().len() >= 3000;
            let refused = names(&BROKER_HEADERS) > 0 || names(&EVIDENCE_HEADERS) > 1 || long;
            match kept.key(&req) {
                Some(key) => {
                    prop_assert!(!refused);
                    prop_assert_eq!(decoded(&key), read_of(&kept, &req));
                }
                None => prop_assert!(refused),
            }
        }
    }
}
