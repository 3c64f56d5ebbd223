//! Decisions made with a registry's evidence, cached per rule and request: a Permit until the
//! evidence's `notOnOrAfter` (at most the configured time), a Deny briefly, an error never.
//! Concurrent misses of one key make one registry call.

use crate::config::model::DelegationSettings;
use crate::gateway::decision::authorise::RegistryAsk;
use crate::gateway::decision::{Assessed, Evaluated, KeptAs};
use crate::gateway::reject::Reject;
use crate::scheme::mask::AccessRequest;
use crate::scheme::verdict::Decision;
use crate::scheme::Timestamp;
use crate::telemetry::metrics::CacheLookups;
use crate::telemetry::Metrics;
use moka::Expiry;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a purge drops: the decisions on requests of one policy issuer, of one access subject, or
/// every one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PurgeScope {
    PolicyIssuer(String),
    AccessSubject(String),
    All,
}

impl PurgeScope {
    /// Whether a decision on a request of `policy_issuer` for `access_subject` is dropped: a
    /// party named in any case (1.9 EORIs name one party in every case; to drop more than one
    /// party's decisions where case does tell them apart is only to ask again).
    pub fn covers(&self, policy_issuer: &str, access_subject: &str) -> bool {
        match self {
            PurgeScope::PolicyIssuer(p) => p.eq_ignore_ascii_case(policy_issuer),
            PurgeScope::AccessSubject(s) => s.eq_ignore_ascii_case(access_subject),
            PurgeScope::All => true,
        }
    }

    /// Its name in metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            PurgeScope::PolicyIssuer(_) => "policy_issuer",
            PurgeScope::AccessSubject(_) => "access_subject",
            PurgeScope::All => "all",
        }
    }

    /// The scope of a purge request: a JSON object with exactly one of `policy_issuer`,
    /// `access_subject` (a non-empty string) or `all` (true).
    pub fn from_request(body: &[u8]) -> Result<PurgeScope, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Request {
            policy_issuer: Option<String>,
            access_subject: Option<String>,
            all: Option<bool>,
        }
        let r: Request = serde_json::from_slice(body).map_err(|e| {
            format!("the body is not a purge request ({e}): send one of {{\"policy_issuer\": \"…\"}}, {{\"access_subject\": \"…\"}}, {{\"all\": true}}")
        })?;
        let named = |what: &str, v: String| match v.trim().is_empty() {
            true => Err(format!("{what} is empty")),
            false => Ok(v),
        };
        match (r.policy_issuer, r.access_subject, r.all) {
            (Some(p), None, None) => Ok(PurgeScope::PolicyIssuer(named("policy_issuer", p)?)),
            (None, Some(s), None) => Ok(PurgeScope::AccessSubject(named("access_subject", s)?)),
            (None, None, Some(true)) => Ok(PurgeScope::All),
            (None, None, Some(false)) => Err("all must be true".into()),
            _ => Err("name exactly one of policy_issuer, access_subject, all".into()),
        }
    }
}

/// What a decision is cached by: a looser rule never serves a stricter one. Borrowed from the
/// request's decision: only its encoding is kept.
#[derive(Clone, Copy, Debug)]
pub struct DecisionKey<'a> {
    pub route: &'a str,
    pub request: &'a AccessRequest,
    pub registry: &'a str,
    pub path: &'a [String],
    /// The route's bound on how long the decision is cached (not part of the encoding: the
    /// route is).
    pub max_age: Option<Duration>,
}

impl<'a> DecisionKey<'a> {
    /// The key of what `ask` asks of a registry.
    pub fn of<'b: 'a>(ask: &'a RegistryAsk<'b>) -> Self {
        DecisionKey {
            route: ask.route,
            request: ask.chain.request,
            registry: ask.chain.configured.unwrap_or_default(),
            path: ask.chain.path,
            max_age: ask.max_age,
        }
    }

    /// What the cache holds instead of the key: an encoding of every field in which each string
    /// carries its length and each list its count, so that two different keys never encode
    /// alike. One allocation per entry, where the key's own strings and lists take 16. The cache
    /// finds it by its keyed hash and compares it whole: a hit hashes its few hundred bytes once
    /// and copies nothing.
    fn encoding(&self) -> Vec<u8> {
        let mut key = KeyEncoding::with_capacity(512);
        key.text(self.route);
        key.text(self.registry);
        key.list(self.path);
        key.request(self.request);
        key.0
    }
}

/// A cache key's bytes, in which each string carries its length and each list its count, so
/// that two different keys never encode alike.
pub struct KeyEncoding(pub Vec<u8>);

impl KeyEncoding {
    pub fn with_capacity(bytes: usize) -> Self {
        KeyEncoding(Vec::with_capacity(bytes))
    }

    pub fn number(&mut self, n: u64) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    pub fn flag(&mut self, b: bool) {
        self.0.push(u8::from(b));
    }

    pub fn text(&mut self, s: &str) {
        self.number(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    pub fn list(&mut self, v: &[String]) {
        self.number(v.len() as u64);
        for s in v {
            self.text(s);
        }
    }

    /// Every field of an access request: what its evaluation depends on.
    pub fn request(&mut self, r: &AccessRequest) {
        for s in [&r.policy_issuer, &r.access_subject, &r.resource_type] {
            self.text(s);
        }
        for v in [
            &r.service_providers,
            &r.identifiers,
            &r.attributes,
            &r.actions,
            &r.required_licences,
        ] {
            self.list(v);
        }
        self.number(r.operands.len() as u64);
        for (operand, value) in &r.operands {
            self.text(operand);
            self.flag(value.is_some());
            if let Some(v) = value {
                self.text(v);
            }
        }
        self.flag(r.unnamed_provider_accepted);
    }
}

/// What one entry costs beyond its value and its key's bytes: the cache's own bookkeeping
/// (entry, access-order and expiry nodes, the key's shared handle), as measured with
/// `examples/decision_cache_memory.rs`.
const ENTRY_OVERHEAD: u32 = 528;

#[derive(Clone)]
struct Cached {
    evaluated: Arc<Evaluated>,
    ttl: Duration,
    /// When it expires at the latest: read before the cache took it, whose expiry counts `ttl`
    /// from later, on the same clock (moka's is `std::time::Instant`).
    until: Instant,
    /// Its key, shared with the cache: what a decision kept elsewhere looks it up by.
    key: Arc<[u8]>,
    /// Of the request, which a purge names (shared: every hit clones the entry).
    policy_issuer: Arc<str>,
    access_subject: Arc<str>,
}

impl Cached {
    /// What the entry holds in memory, with its key of `key_len` bytes (and their allocation).
    fn weight(&self, key_len: usize) -> u32 {
        let parties = self.policy_issuer.len() + self.access_subject.len();
        entry_weight(&self.evaluated, parties + key_len + 16)
    }
}

/// What a cache entry holding `evaluated` and `more` bytes of its own (its key's among them)
/// takes in memory, roughly: the evaluation, where it was made, the evidence's source, issuers
/// and signers, the licences granted or what a Deny quotes of the evidence (a member's name, say,
/// as long as a header allows), and the cache's bookkeeping.
pub fn entry_weight(evaluated: &Evaluated, more: usize) -> u32 {
    let used = &evaluated.evidence;
    let issuers: usize = (used.issuers.iter().chain(&used.signers))
        .map(|i| i.len() + 24)
        .sum();
    let outcome: usize = match &evaluated.evaluation.decision {
        // The licences twice: the evaluation's, and its terms' with their headers' values.
        Decision::Permit(p) => {
            let licences: usize = (p.licences.iter())
                .flat_map(|l| l.identifiers())
                .map(|i| i.len() + 32)
                .sum();
            2 * licences + evaluated.terms.as_ref().map_or(0, |t| t.weight())
        }
        Decision::Deny(reason) => written_len(reason),
    };
    let places: usize = (evaluated.evaluation.decided_by.iter())
        .map(|place| place.part.as_deref().map_or(0, str::len) + 48)
        .sum();
    u32::try_from(outcome + places + issuers + more + 300)
        .unwrap_or(u32::MAX)
        .saturating_add(ENTRY_OVERHEAD)
}

/// The bytes `value` takes written out, counted without writing them anywhere.
fn written_len(value: &impl std::fmt::Display) -> usize {
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut count = Count(0);
    // Counting never fails.
    let _ = std::fmt::Write::write_fmt(&mut count, format_args!("{value}"));
    count.0
}

/// A decision kept elsewhere on an entry of the decision cache: where, and what it has seen of
/// the entry since.
pub struct KeptOn {
    kept_as: KeptAs,
    /// The cache's removals counted before the entry was last seen to hold the evaluation by a
    /// lookup of its own (none yet: `UNSEEN`).
    seen: AtomicU64,
    /// Its hits, for the one in `LOOKED_UP_EVERY` that looks the entry up whatever else holds.
    hits: AtomicU32,
}

impl KeptOn {
    pub fn new(kept_as: KeptAs) -> Self {
        KeptOn {
            kept_as,
            seen: AtomicU64::new(UNSEEN),
            hits: AtomicU32::new(0),
        }
    }
}

/// What `KeptOn::seen` is before its first lookup: no count of removals is.
const UNSEEN: u64 = u64::MAX;

/// Of a kept decision's hits on an entry nothing has changed since, the share that still looks
/// the entry up: its use stays known to the cache, whose eviction would otherwise take the most
/// used entries first.
const LOOKED_UP_EVERY: u32 = 8;

/// The decision cache's entries as a decision kept by the request as it came sees them
/// (`gateway::as_it_came`).
#[derive(Clone)]
pub struct Entries {
    cache: moka::future::Cache<Arc<[u8]>, Cached, crate::keyed::KeyedHash>,
    /// The cache's removals (`DecisionCache::removals`).
    removals: Arc<AtomicU64>,
    lookups: CacheLookups,
}

impl Entries {
    /// Whether the entry `on` names still holds `evaluated` (not expired, purged, evicted or
    /// made anew): then counted as the hit the whole sequence would have made.
    ///
    /// An entry changes only by its removal, which the cache counts once it is gone
    /// (`DecisionCache::removals`), or by its expiry. So where no removal was counted since a
    /// lookup of this kept decision's own last saw the entry hold the evaluation, and it has not
    /// expired, it still holds it without a lookup: but for one hit in `LOOKED_UP_EVERY` (the
    /// first among them), which looks it up.
    pub async fn still(&self, on: &KeptOn, evaluated: &Arc<Evaluated>) -> bool {
        let removals = self.removals.load(Ordering::Acquire);
        let due = (on.hits.fetch_add(1, Ordering::Relaxed)).is_multiple_of(LOOKED_UP_EVERY);
        let unchanged =
            removals == on.seen.load(Ordering::Acquire) && Instant::now() < on.kept_as.until;
        if unchanged && !due {
            self.lookups.count(true);
            return true;
        }
        match self.cache.get(&*on.kept_as.key).await {
            Some(cached) if Arc::ptr_eq(&cached.evaluated, evaluated) => {
                // Seen after `removals` were counted: a removal since is counted after them.
                on.seen.store(removals, Ordering::Release);
                self.lookups.count(true);
                true
            }
            _ => false,
        }
    }
}

struct ByDecision;

impl Expiry<Arc<[u8]>, Cached> for ByDecision {
    fn expire_after_create(&self, _k: &Arc<[u8]>, v: &Cached, _at: Instant) -> Option<Duration> {
        Some(v.ttl)
    }
}

pub struct DecisionCache {
    cache: moka::future::Cache<Arc<[u8]>, Cached, crate::keyed::KeyedHash>,
    /// Entries removed (purged, evicted for room or not taken in, replaced, or removed after
    /// their expiry), counted by the eviction listener once each is gone (a listener that
    /// panicked would be switched off by moka: it only counts). An entry is made only where
    /// none was, so an entry seen holds what it held until one of these or its expiry.
    removals: Arc<AtomicU64>,
    permit_ttl: Duration,
    deny_ttl: Duration,
    /// Purges so far: a decision made while one ran is not cached, as its registry call may
    /// have been answered before the policy was withdrawn.
    purges: AtomicU64,
    lookups: CacheLookups,
}

impl DecisionCache {
    pub fn new(settings: &DelegationSettings, metrics: Metrics) -> Self {
        let removals = Arc::new(AtomicU64::new(0));
        let counted = metrics.on_eviction("decision");
        let counting = removals.clone();
        DecisionCache {
            cache: moka::future::Cache::<Arc<[u8]>, Cached>::builder()
                .max_capacity(settings.cache_size)
                .weigher(|k, v| v.weight(k.len()))
                .eviction_listener(move |key, value, cause| {
                    counting.fetch_add(1, Ordering::AcqRel);
                    counted(key, value, cause);
                })
                .expire_after(ByDecision)
                .build_with_hasher(crate::keyed::keyed()),
            removals,
            permit_ttl: settings.cache_ttl,
            deny_ttl: settings.deny_cache_ttl,
            purges: AtomicU64::new(0),
            lookups: metrics.cache_lookups("decision"),
        }
    }

    /// A handle on the cache's entries, for decisions kept elsewhere on one of them.
    pub fn entries(&self) -> Entries {
        Entries {
            cache: self.cache.clone(),
            removals: self.removals.clone(),
            lookups: self.lookups.clone(),
        }
    }

    /// The cached evaluation for `key`, or the one the future `decide` makes (then cached unless
    /// it failed); `cache_hit` says which. A hit looks the key's encoding up and no more: the
    /// registry call's future (tens of kilobytes of state, which every hit would otherwise
    /// allocate and move) is made and boxed only on a miss.
    pub async fn get_or_decide<F>(
        &self,
        key: DecisionKey<'_>,
        decide: impl FnOnce() -> F,
    ) -> Result<Assessed, Reject>
    where
        F: Future<Output = Result<Evaluated, Reject>>,
    {
        let encoded = key.encoding();
        if let Some(cached) = self.cache.get(encoded.as_slice()).await {
            self.lookups.count(true);
            return Ok(Self::assessed(&cached, true));
        }
        let mut hit = true;
        let shared: Arc<[u8]> = encoded.into();
        let purges = self.purges.load(Ordering::Acquire);
        let result = Box::pin(self.cache.try_get_with(shared.clone(), async {
            hit = false;
            let evaluated = decide().await?;
            let ttl = match &evaluated.evaluation.decision {
                Decision::Permit(p) => {
                    let left = (p.not_on_or_after - Timestamp::now().secs()).max(0) as u64;
                    self.permit_ttl.min(Duration::from_secs(left))
                }
                Decision::Deny(_) => self.deny_ttl,
            };
            let ttl = key.max_age.map_or(ttl, |max| ttl.min(max));
            let ttl = match self.purges.load(Ordering::Acquire) == purges {
                true => ttl,
                false => Duration::ZERO,
            };
            let now = Instant::now();
            Ok::<_, Reject>(Cached {
                evaluated: Arc::new(evaluated),
                ttl,
                until: now.checked_add(ttl).unwrap_or(now),
                key: shared.clone(),
                policy_issuer: key.request.policy_issuer.as_str().into(),
                access_subject: key.request.access_subject.as_str().into(),
            })
        }))
        .await;
        // A purge that began while it was being made, and whose walk over the entries ended
        // before the cache took it, has not dropped it: dropped here (or another decision made
        // since under the same key, which is only asked again).
        if !hit && self.purges.load(Ordering::Acquire) != purges {
            self.cache.remove(&*shared).await;
        }
        self.lookups.count(hit);
        result
            .map(|c| Self::assessed(&c, hit))
            .map_err(|e| (*e).clone())
    }

    /// Drop every decision `scope` covers; how many were dropped. A decision being made meanwhile
    /// is answered to those waiting for it, and not cached.
    pub async fn purge(&self, scope: &PurgeScope) -> u64 {
        self.purges.fetch_add(1, Ordering::AcqRel);
        let covered: Vec<Arc<Arc<[u8]>>> = self
            .cache
            .iter()
            .filter(|(_, v)| scope.covers(&v.policy_issuer, &v.access_subject))
            .map(|(k, _)| k)
            .collect();
        let mut dropped = 0;
        for k in covered {
            if self.cache.remove(&**k).await.is_some() {
                dropped += 1;
            }
        }
        // Each removal is counted by the eviction listener; once more here, so that no decision
        // kept on a purged entry stands after the purge whenever the listener runs.
        self.removals.fetch_add(1, Ordering::AcqRel);
        dropped
    }

    fn assessed(cached: &Cached, cache_hit: bool) -> Assessed {
        Assessed {
            evaluated: cached.evaluated.clone(),
            cache_hit,
            kept_as: Some(KeptAs {
                key: cached.key.clone(),
                until: cached.until,
            }),
            judged: None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gateway::decision::authorise::no_policy;
    use crate::gateway::decision::EvidenceSource;

    fn denied() -> Evaluated {
        no_policy(EvidenceSource::Registry {
            registry: "EU.EORI.NL000000004".into(),
        })
    }

    #[test]
    fn an_entry_weighs_what_a_deny_quotes_of_the_evidence() {
        use crate::scheme::verdict::{DecidedBy, DenyReason, Evaluation};
        let member = "m".repeat(60_000);
        let quoting = Evaluated::new(
            Evaluation {
                decision: Decision::Deny(DenyReason::NotUnderstood {
                    member: member.clone(),
                }),
                decided_by: vec![DecidedBy {
                    part: Some(member.into()),
                    ..DecidedBy::default()
                }],
            },
            denied().evidence,
        );
        let plain = entry_weight(&denied(), 0);
        assert!(plain < 2_000, "{plain}");
        assert!(entry_weight(&quoting, 0) > 120_000);
    }

    /// Delegation settings for a decision cache of `size` bytes.
    pub(crate) fn settings(size: u64) -> DelegationSettings {
        DelegationSettings {
            registry_timeout: Duration::from_secs(1),
            cache_ttl: Duration::from_secs(60),
            deny_cache_ttl: Duration::from_secs(60),
            cache_size: size,
            header_evidence_max_age: Duration::from_secs(60),
            registry_calls_per_minute: 600,
            ignored_members: Default::default(),
        }
    }

    fn request(identifier: String) -> AccessRequest {
        AccessRequest {
            policy_issuer: "EU.EORI.NL000000005".into(),
            access_subject: "EU.EORI.NL000000001".into(),
            service_providers: vec!["EU.EORI.NL000000003".into()],
            resource_type: "CONTAINER".into(),
            identifiers: vec![identifier],
            attributes: vec!["*".into()],
            actions: vec!["iSHARE.READ".into()],
            ..AccessRequest::default()
        }
    }

    fn key(request: &AccessRequest) -> DecisionKey<'_> {
        DecisionKey {
            route: "read",
            request,
            registry: "",
            path: &[],
            max_age: None,
        }
    }

    #[tokio::test]
    async fn the_cache_holds_no_more_bytes_than_its_size_and_counts_what_it_evicts() {
        let metrics = Metrics::new();
        let cache = DecisionCache::new(&settings(64 << 10), metrics.clone());
        for i in 0..2000 {
            let asked = request(format!("{i:0>250}"));
            let decision = cache
                .get_or_decide(key(&asked), || async { Ok(denied()) })
                .await;
            assert!(decision.is_ok());
        }
        cache.cache.run_pending_tasks().await;
        assert!(cache.cache.weighted_size() <= 64 << 10);
        let evicted = metrics
            .cache_evictions
            .with_label_values(&["decision"])
            .get();
        assert!(evicted > 1000, "{evicted} evicted");
        // Keys that differ only in where a string ends are different keys.
        let c1 = request("C1".into());
        let mut split = c1.clone();
        split.identifiers = vec!["C".into(), "1".into()];
        assert_ne!(key(&split).encoding(), key(&c1).encoding());
        let mut moved = c1.clone();
        moved.attributes = vec!["*".into(), "C1".into()];
        moved.identifiers = vec![];
        assert_ne!(key(&moved).encoding(), key(&c1).encoding());
        // Every part of the key counts: the route, the registry and the delegation path.
        let other_route = DecisionKey {
            route: "write",
            ..key(&c1)
        };
        let other_registry = DecisionKey {
            registry: "EU.EORI.NL000000004",
            ..key(&c1)
        };
        let path = ["EU.EORI.NL000000002".to_string()];
        let other_path = DecisionKey {
            path: &path,
            ..key(&c1)
        };
        for other in [other_route, other_registry, other_path] {
            assert_ne!(other.encoding(), key(&c1).encoding(), "{other:?}");
        }
        // And the values conditions compare, absent or given, and what a route accepts.
        let mut located = c1.clone();
        located.operands.insert("requesterLocation".into(), None);
        let mut in_nl = c1.clone();
        in_nl
            .operands
            .insert("requesterLocation".into(), Some("NL".into()));
        let mut unnamed = c1.clone();
        unnamed.unnamed_provider_accepted = true;
        let encodings = [&c1, &located, &in_nl, &unnamed].map(|r| key(r).encoding());
        for (i, a) in encodings.iter().enumerate() {
            assert!(encodings[i + 1..].iter().all(|b| a != b), "{i}");
        }
    }

    #[tokio::test]
    async fn a_purge_drops_what_it_covers_and_a_decision_made_meanwhile_is_not_kept() {
        let cache = DecisionCache::new(&settings(1 << 20), Metrics::new());
        let (c1, c2) = (request("C1".into()), request("C2".into()));
        let mut other = request("C1".into());
        other.access_subject = "EU.EORI.NL000000002".into();
        for r in [&c1, &c2, &other] {
            let decided = cache.get_or_decide(key(r), || async { Ok(denied()) }).await;
            assert!(decided.is_ok_and(|e| !e.cache_hit));
        }
        let subject = PurgeScope::AccessSubject("EU.EORI.NL000000001".into());
        assert_eq!(cache.purge(&subject).await, 2);
        let cache = &cache;
        let hit = |r| async move {
            let d = cache.get_or_decide(key(r), || async { Ok(denied()) }).await;
            d.is_ok_and(|e| e.cache_hit)
        };
        assert!(hit(&other).await, "another subject's decision stays");
        // A purge while C1 is being decided: the decision answers, and is asked again after.
        let purge = PurgeScope::All;
        let during = cache.get_or_decide(key(&c1), || async {
            cache.purge(&purge).await;
            Ok(denied())
        });
        assert!(during.await.is_ok());
        assert!(!hit(&c1).await, "decided during a purge, yet cached");
        assert!(hit(&c1).await);
    }

    /// Whether the kept decision `on` stands at each of a run of hits (as many as make two
    /// lookups due).
    async fn stands(entries: &Entries, on: &KeptOn, evaluated: &Arc<Evaluated>) -> Vec<bool> {
        let mut stood = Vec::new();
        for _ in 0..2 * LOOKED_UP_EVERY {
            stood.push(entries.still(on, evaluated).await);
        }
        stood
    }

    /// A decision kept on its entry, and the evaluation it keeps.
    async fn kept(cache: &DecisionCache, r: &AccessRequest) -> (KeptOn, Arc<Evaluated>) {
        let decided = cache.get_or_decide(key(r), || async { Ok(denied()) });
        let assessed = decided.await.expect("decided");
        (KeptOn::new(assessed.kept_as.unwrap()), assessed.evaluated)
    }

    /// A decision kept on an entry stands while the cache holds it unchanged, and at no hit
    /// once the entry is purged, made anew or expired, the hits on an unchanged entry that look
    /// it up and those that do not alike; nor one made while a purge ran.
    #[tokio::test]
    async fn a_kept_decision_stands_on_its_entry_until_the_cache_changes_it() {
        let mut short = settings(1 << 20);
        short.deny_cache_ttl = Duration::from_millis(300);
        let cache = DecisionCache::new(&short, Metrics::new());
        let entries = cache.entries();
        let every = vec![true; 2 * LOOKED_UP_EVERY as usize];
        let none = vec![false; every.len()];
        let (c1, c2) = (request("C1".into()), request("C2".into()));
        let (on, evaluated) = kept(&cache, &c1).await;
        assert_eq!(stands(&entries, &on, &evaluated).await, every);
        // Purged, then made anew: the kept evaluation is not the entry's.
        cache.purge(&PurgeScope::All).await;
        assert_eq!(stands(&entries, &on, &evaluated).await, none);
        kept(&cache, &c1).await;
        assert_eq!(stands(&entries, &on, &evaluated).await, none);
        // Expired, nothing else having changed: the first hit after is one that looks nothing
        // up.
        let (on, evaluated) = kept(&cache, &c2).await;
        assert_eq!(stands(&entries, &on, &evaluated).await, every);
        assert!(entries.still(&on, &evaluated).await);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(stands(&entries, &on, &evaluated).await, none);
        // Made while a purge ran: answered, and never given again.
        let purge = PurgeScope::All;
        let during = cache.get_or_decide(key(&c2), || async {
            cache.purge(&purge).await;
            Ok(denied())
        });
        let assessed = during.await.expect("decided");
        let on = KeptOn::new(assessed.kept_as.unwrap());
        assert_eq!(stands(&entries, &on, &assessed.evaluated).await, none);
    }

    /// A decision kept on an entry the cache evicts for room, while nothing else it counts
    /// happens, does not stand after.
    #[tokio::test]
    async fn a_kept_decision_does_not_stand_once_its_entry_is_evicted_for_room() {
        let metrics = Metrics::new();
        let cache = DecisionCache::new(&settings(64 << 10), metrics.clone());
        let entries = cache.entries();
        let (on, evaluated) = kept(&cache, &request("C1".into())).await;
        // Seen once: the first hit looks it up.
        assert!(entries.still(&on, &evaluated).await);
        // Other decisions, each asked for more often than it, take its room.
        let mut others = 0..5000;
        while cache.cache.contains_key(&*on.kept_as.key) {
            let asked = request(format!("{:0>250}", others.next().expect("C1 evicted")));
            for _ in 0..4 {
                kept(&cache, &asked).await;
            }
            cache.cache.run_pending_tasks().await;
        }
        let evicted = metrics.cache_evictions.with_label_values(&["decision"]);
        assert!(evicted.get() > 0);
        assert_eq!(stands(&entries, &on, &evaluated).await, vec![false; 16]);
    }

    #[tokio::test]
    async fn failures_are_not_cached_and_concurrent_misses_decide_once() {
        let cache = DecisionCache::new(&settings(1 << 20), Metrics::new());
        let c1 = request("C1".into());
        let failed = cache
            .get_or_decide(key(&c1), || async { Err(Reject::Internal) })
            .await;
        assert!(failed.is_err());
        let calls = std::sync::atomic::AtomicU32::new(0);
        let decide = || async {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(denied())
        };
        let all = futures::future::join_all((0..20).map(|_| cache.get_or_decide(key(&c1), decide)));
        let all = all.await;
        assert!(all.iter().all(Result::is_ok));
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 1);
        // One of them decided; the others say they had it from the cache.
        let hits = all
            .iter()
            .filter(|e| e.as_ref().is_ok_and(|e| e.cache_hit))
            .count();
        assert_eq!(hits, 19);
    }
}
