//! The scheme owner as we use it: the trusted list (fetched, verified against the pinned root,
//! refreshed periodically and on an unknown root, rate-limited), party records (cached), and x5c
//! chain validations cached by chain and trusted-list generation.

use super::token_cache::TokenCache;
use super::trust::{Trust, TrustError, TrustedChain};
use super::{join, PeerClient, PeerError};
use crate::config::model::SchemeOwner;
use crate::rate::{Buckets, TokenBucket};
use crate::scheme::jwt::{self, AlgorithmPolicy};
use crate::scheme::models::{TrustedListEntry, TrustedListPayload, TrustedListPayload3};
use crate::scheme::party::PartyId;
use crate::scheme::party_record::{Aliases, Named, Party};
use crate::scheme::trust::{validate_chain, ChainError, TrustedList};
use crate::scheme::Timestamp;
use crate::telemetry::metrics::CacheLookups;
use crate::telemetry::trace::Step;
use crate::telemetry::Metrics;
use arc_swap::ArcSwapOption;
use async_trait::async_trait;
use moka::Expiry;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use serde::de::DeserializeOwned;
use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The shortest time between two refreshes of the trusted list caused by unknown roots.
const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(30);
/// How soon a request may try again to fetch a trusted list that is missing or too old.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// How long an unknown party is remembered as unknown.
const UNKNOWN_PARTY_TTL: Duration = Duration::from_secs(60);
/// How long a validated chain is reused at most.
const CHAIN_TTL: Duration = Duration::from_secs(3600);
/// The size of the party record cache (known and unknown parties), in bytes.
const PARTY_CACHE_BYTES: u64 = 32 << 20;
/// The size of the chain validation cache, in bytes.
const CHAIN_CACHE_BYTES: u64 = 16 << 20;

/// The current trusted list; a new generation invalidates cached chain validations.
pub struct TrustedListState {
    pub list: TrustedList,
    pub fetched: Instant,
    pub generation: u64,
}

/// A validated chain, as cached: valid under one generation of the trusted list.
struct CachedChain {
    trusted: Arc<TrustedChain>,
    generation: u64,
}

struct PartyExpiry {
    known: Duration,
}

impl PartyExpiry {
    /// How long `named` is kept: a party a name stands for, for the record's time; no party, or
    /// a contested name, briefly: a registry that mends its records is believed soon.
    fn lifetime(&self, named: &Named) -> Duration {
        match named {
            Named::Party(_) => self.known,
            Named::Nobody | Named::Contested => UNKNOWN_PARTY_TTL,
        }
    }
}

/// Signers not looked up yet that one certificate's tokens may name per minute: a certificate is
/// one party's, looked up once and then cached.
const SIGNER_LOOKUPS_PER_MINUTE: f64 = 6.0;
/// The most signing certificates whose lookups are counted (the least used go first).
const SIGNING_CERTIFICATES: u64 = 100_000;

impl Expiry<String, Found> for PartyExpiry {
    fn expire_after_create(&self, _k: &String, v: &Found, _at: Instant) -> Option<Duration> {
        Some(self.lifetime(&v.named))
    }

    /// A name's record replaced (3.0: a record kept under its id too) lives its own lifetime
    /// from then, not what was left of the one it replaced.
    fn expire_after_update(
        &self,
        _k: &String,
        v: &Found,
        _at: Instant,
        _left: Option<Duration>,
    ) -> Option<Duration> {
        Some(self.lifetime(&v.named))
    }
}

/// Whom a name stands for, as cached; when it leaves the cache at the latest (read before the
/// cache takes it, whose expiry counts the same lifetime from later, on the same clock: moka's
/// is `std::time::Instant`); and whether it has left it.
#[derive(Clone)]
struct Found {
    named: Named,
    until: Instant,
    /// Set by the cache's eviction listener once it no longer holds this entry: removed for
    /// room, after its expiry, or replaced.
    gone: Arc<AtomicBool>,
}

tokio::task_local! {
    /// The party records read in this task's `TrustStore::reading`.
    static READ: RefCell<RecordsRead>;
}

/// The party records a judgement read (`TrustStore::reading`), as the cache held them: whether
/// any has left it since.
#[derive(Clone, Debug, Default)]
pub struct RecordsRead {
    /// When the first of them is due to leave the cache.
    until: Option<Instant>,
    /// Each one's mark of having left it.
    gone: Vec<Arc<AtomicBool>>,
}

impl RecordsRead {
    fn add(&mut self, found: &Found) {
        self.until = Some(self.until.map_or(found.until, |u| u.min(found.until)));
        if !self.gone.iter().any(|g| Arc::ptr_eq(g, &found.gone)) {
            self.gone.push(found.gone.clone());
        }
    }

    /// Whether every record read is still cached as it was: none has left the cache (its
    /// removal told by the eviction listener), and none is due to.
    pub fn unchanged(&self) -> bool {
        self.until.is_none_or(|until| Instant::now() < until)
            && self.gone.iter().all(|g| !g.load(Ordering::Acquire))
    }
}

pub struct TrustStore {
    pub(super) peer: PeerClient,
    pub(super) config: SchemeOwner,
    algorithms: AlgorithmPolicy,
    leeway_secs: f64,
    tokens: TokenCache,
    trusted: ArcSwapOption<TrustedListState>,
    refresh_lock: tokio::sync::Mutex<()>,
    last_refresh: Mutex<Option<Instant>>,
    /// Why the last refresh failed, while the trusted list is missing or too old.
    refresh_failure: Mutex<Option<TrustError>>,
    /// When the scheme owner last answered, and whether that call worked.
    last_contact: Mutex<Option<(Instant, bool)>>,
    /// Whom each name stands for: the record of the party, none, or no one's (contested).
    /// An entry is made only where none was, or replaces one (which tells it gone): a record
    /// read holds until it is gone or due (`RecordsRead`).
    parties: moka::future::Cache<String, Found, crate::keyed::KeyedHash>,
    /// Bounds the party records fetched (cache misses), whoever makes them ask.
    /// Party records fetched: `party_lookups_per_second`, five seconds' worth at once.
    pub(super) party_lookups: TokenBucket,
    /// Per signing certificate (its leaf's fingerprint): the records of signers not looked up yet
    /// its tokens may make us fetch.
    signer_lookups: Buckets<String>,
    /// The (certificate, signer) pairs charged in the last minute: the same signer of the same
    /// certificate costs one lookup however many requests wait for it.
    signers_charged: moka::sync::Cache<(String, String), ()>,
    /// The scheme owner answered 404 at `/parties/{id}` for a party its search found: it lacks
    /// that endpoint, and parties are looked up by the search alone.
    pub(super) no_party_endpoint: AtomicBool,
    chains: moka::sync::Cache<[u8; 32], Arc<CachedChain>>,
    chains_looked_up: CacheLookups,
    parties_looked_up: CacheLookups,
    metrics: Metrics,
}

fn chain_key(x5c: &[Vec<u8>]) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for der in x5c {
        ctx.update(&(der.len() as u64).to_be_bytes());
        ctx.update(der);
    }
    let mut key = [0u8; 32];
    key.copy_from_slice(ctx.finish().as_ref());
    key
}

impl TrustStore {
    pub fn new(
        peer: PeerClient,
        config: SchemeOwner,
        algorithms: AlgorithmPolicy,
        leeway: Duration,
        metrics: Metrics,
    ) -> Self {
        let lookups = f64::from(config.party_lookups_per_second.max(1));
        let counted = metrics.on_eviction("party");
        let store = TrustStore {
            parties: moka::future::Cache::builder()
                .max_capacity(PARTY_CACHE_BYTES)
                .weigher(|id: &String, found: &Found| {
                    let record = match &found.named {
                        Named::Party(r) => r.weight(),
                        Named::Nobody | Named::Contested => 0,
                    };
                    u32::try_from(id.len() + record + 64).unwrap_or(u32::MAX)
                })
                .eviction_listener(move |key, value: Found, cause| {
                    value.gone.store(true, Ordering::Release);
                    counted(key, value, cause);
                })
                .expire_after(PartyExpiry {
                    known: config.party_cache_ttl,
                })
                .build_with_hasher(crate::keyed::keyed()),
            party_lookups: TokenBucket::new(lookups, lookups * 5.0, Instant::now()),
            signer_lookups: Buckets::new(
                SIGNER_LOOKUPS_PER_MINUTE / 60.0,
                SIGNER_LOOKUPS_PER_MINUTE,
                SIGNING_CERTIFICATES,
            ),
            signers_charged: moka::sync::Cache::builder()
                .max_capacity(SIGNING_CERTIFICATES)
                .time_to_live(Duration::from_secs(60))
                .build(),
            no_party_endpoint: AtomicBool::new(false),
            chains: moka::sync::Cache::builder()
                .max_capacity(CHAIN_CACHE_BYTES)
                .weigher(|_: &[u8; 32], c: &Arc<CachedChain>| {
                    let chain = &c.trusted.chain;
                    let held = chain.leaf_der.len()
                        + chain.leaf_base64.len()
                        + chain.subject.subject.len()
                        + 512;
                    u32::try_from(held).unwrap_or(u32::MAX)
                })
                .eviction_listener(metrics.on_eviction("chain"))
                .time_to_live(CHAIN_TTL)
                .build(),
            peer,
            algorithms,
            leeway_secs: leeway.as_secs_f64(),
            tokens: TokenCache::default(),
            trusted: ArcSwapOption::empty(),
            refresh_lock: tokio::sync::Mutex::new(()),
            last_refresh: Mutex::new(None),
            refresh_failure: Mutex::new(None),
            last_contact: Mutex::new(None),
            chains_looked_up: metrics.cache_lookups("chain"),
            parties_looked_up: metrics.cache_lookups("party"),
            metrics,
            config,
        };
        if let Some(entries) = &store.config.trusted_list {
            store.trusted.store(Some(Arc::new(TrustedListState {
                list: TrustedList::new(entries.clone()),
                fetched: Instant::now(),
                generation: 1,
            })));
        }
        store
    }

    pub fn config(&self) -> &SchemeOwner {
        &self.config
    }

    /// Whether the scheme owner failed the last call made to it (it is then asked again, with
    /// backoff, until it answers).
    pub fn last_call_failed(&self) -> bool {
        matches!(
            *self.last_contact.lock().unwrap_or_else(|e| e.into_inner()),
            Some((_, false))
        )
    }

    fn contact(&self, ok: bool) {
        *self.last_contact.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), ok));
    }

    fn count(&self, endpoint: &str, outcome: &str) {
        self.metrics
            .scheme_owner_calls
            .with_label_values(&[endpoint, outcome])
            .inc();
    }

    async fn token(&self) -> Result<Arc<str>, PeerError> {
        self.tokens
            .get(
                &self.peer,
                &join(&self.config.url, crate::scheme::vocabulary::TOKEN_PATH),
                self.config.party_id.as_str(),
            )
            .await
    }

    /// GET a signed answer of the scheme owner and verify it: signature, chain to the pinned root
    /// (or the offline trusted list), issued by the scheme owner to us, unexpired.
    pub(super) async fn fetch<T: DeserializeOwned>(
        &self,
        endpoint: &str,
        path: &str,
        query: &[(&str, &str)],
        member: &str,
    ) -> Result<T, TrustError> {
        let span = Step::start(
            SpanKind::Client,
            || format!("scheme_owner {endpoint}"),
            || {
                let mut attributes = vec![
                    KeyValue::new("ishare.peer.party_id", self.config.party_id.to_string()),
                    KeyValue::new("ishare.endpoint", endpoint.to_string()),
                ];
                attributes.extend(super::url_attributes(&join(&self.config.url, path)));
                attributes
            },
        );
        let work = async {
            let token = self.token().await?;
            let url = join(&self.config.url, path);
            let answer = self
                .peer
                .get_signed(&url, query, Some(&token), member)
                .await;
            if let Err(PeerError::Status { status: 401, .. }) = &answer {
                self.tokens
                    .forget(
                        &join(&self.config.url, crate::scheme::vocabulary::TOKEN_PATH),
                        self.config.party_id.as_str(),
                    )
                    .await;
            }
            let jwt = answer?;
            self.verify(&jwt)
        };
        let result = span.within(work).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(TrustError::Unavailable(PeerError::Status { status: 404, .. })) => "not_found",
            Err(e) => e.code(),
        };
        span.end(|| (outcome, !matches!(outcome, "ok" | "not_found")));
        self.count(endpoint, outcome);
        self.contact(!matches!(
            result,
            Err(TrustError::Unavailable(
                PeerError::Timeout { .. } | PeerError::Unreachable { .. }
            ))
        ));
        result
    }

    fn verify<T: DeserializeOwned>(&self, token: &str) -> Result<T, TrustError> {
        let bad = |e: String| TrustError::Untrustworthy(e);
        let now = Timestamp::now();
        let decoded = jwt::decode(token, self.algorithms).map_err(|e| bad(e.to_string()))?;
        decoded.verify_signature().map_err(|e| bad(e.to_string()))?;
        let anchors = match (&self.config.root_fingerprint, &self.config.trusted_list) {
            (Some(fp), _) => TrustedList::pinned(fp),
            (None, Some(entries)) => TrustedList::new(entries.clone()),
            (None, None) => {
                return Err(bad(
                    "no trust anchor for the scheme owner is configured".into()
                ))
            }
        };
        let chain = validate_chain(&decoded.x5c, &anchors, now).map_err(|e| bad(e.to_string()))?;
        let so = &self.config.party_id;
        if decoded.str_claim("iss") != Some(so.as_str()) || !chain.names(so) {
            return Err(bad(format!(
                "the answer is not signed by the scheme owner {so}"
            )));
        }
        if decoded.audience_includes(self.peer.identity().party_id().as_str()) == Some(false) {
            return Err(bad("the answer is addressed to another party".into()));
        }
        if decoded
            .time_claim("exp")
            .is_some_and(|exp| now.as_f64() > exp + self.leeway_secs)
        {
            return Err(bad("the answer has expired".into()));
        }
        decoded.claims_as().map_err(|e| bad(e.to_string()))
    }

    /// The current trusted list, fetched first if there is none yet.
    /// A list older than three refresh intervals is no longer used: trust fails closed while
    /// the scheme owner cannot be reached, rather than trusting a CA it may have withdrawn. Requests
    /// try a refresh at most every RETRY_AFTER_FAILURE.
    pub async fn trusted_list(&self) -> Result<Arc<TrustedListState>, TrustError> {
        let current = self.trusted.load_full();
        if let Some(state) = &current {
            if self.config.trusted_list.is_some() || state.fetched.elapsed() <= self.max_age() {
                return Ok(state.clone());
            }
        }
        let recently_tried = self
            .last_refresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|t| t.elapsed() < RETRY_AFTER_FAILURE);
        if recently_tried {
            // Tell why: the scheme owner unreachable (unavailable) or its answer unusable.
            let failure = self
                .refresh_failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            return Err(failure.unwrap_or_else(|| {
                TrustError::Untrustworthy(match current {
                    Some(s) => format!(
                        "the trusted list is {} s old and could not be refreshed",
                        s.fetched.elapsed().as_secs()
                    ),
                    None => "the trusted list could not be fetched yet".into(),
                })
            }));
        }
        // Boxed: a fetch's state is kilobytes, and every caller's future would otherwise carry
        // it on the path that finds the list fresh.
        Box::pin(self.refresh()).await
    }

    fn max_age(&self) -> Duration {
        self.config.refresh * 3
    }

    /// Fetch the trusted list now (one fetch at a time; waiters share its result).
    pub async fn refresh(&self) -> Result<Arc<TrustedListState>, TrustError> {
        if self.config.trusted_list.is_some() {
            return self
                .trusted
                .load_full()
                .ok_or_else(|| TrustError::Untrustworthy("no trusted list".into()));
        }
        let started = Instant::now();
        let _guard = self.refresh_lock.lock().await;
        if let Some(state) = self.trusted.load_full() {
            if state.fetched >= started {
                return Ok(state);
            }
        }
        *self.last_refresh.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        let fetched = self.fetch_trusted_list().await;
        *self
            .refresh_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = fetched.as_ref().err().cloned();
        let entries = fetched?;
        let generation = self.trusted.load().as_ref().map_or(1, |s| s.generation + 1);
        let state = Arc::new(TrustedListState {
            list: TrustedList::new(entries),
            fetched: Instant::now(),
            generation,
        });
        self.trusted.store(Some(state.clone()));
        self.metrics.trusted_list_age.set(0);
        tracing::info!(
            entries = state.list.len(),
            generation,
            "trusted list refreshed"
        );
        if let Some(problem) = self.own_chain_problem(&state.list) {
            tracing::error!("{problem}");
        }
        Ok(state)
    }

    /// The trusted list as the scheme owner's version writes it: `/trusted_list` with
    /// `trusted_list_token`, or 3.0's `/trustedList` with `trustedListToken`. A 404 where the
    /// other version's path answers is a scheme owner of another version than configured: the
    /// error says so, and which setting to change.
    async fn fetch_trusted_list(&self) -> Result<Vec<TrustedListEntry>, TrustError> {
        let camel = self.config.scheme_version.camel_case();
        let fetched = self.fetch_trusted_list_as(camel).await;
        let Err(TrustError::Unavailable(PeerError::Status {
            url, status: 404, ..
        })) = &fetched
        else {
            return fetched;
        };
        if self.fetch_trusted_list_as(!camel).await.is_err() {
            return fetched;
        }
        let hint = match camel {
            false => "the scheme owner appears to speak 3.0 (its /trustedList answers): set [scheme_owner] scheme_version = \"3.0\"",
            true => "the scheme owner appears to speak a version before 3.0 (its /trusted_list answers): set [scheme_owner] scheme_version to it (\"1.9\", \"2.0\", \"2.1\" or \"2.2\")",
        };
        Err(TrustError::Unavailable(PeerError::Status {
            url: url.clone(),
            status: 404,
            body: hint.into(),
        }))
    }

    /// The trusted list at 3.0's path and member (`camel`), or at those of the versions before.
    async fn fetch_trusted_list_as(
        &self,
        camel: bool,
    ) -> Result<Vec<TrustedListEntry>, TrustError> {
        use crate::scheme::vocabulary::{member, TRUSTED_LIST_PATH, TRUSTED_LIST_PATH_3};
        if camel {
            let payload: TrustedListPayload3 = self
                .fetch(
                    "trusted_list",
                    TRUSTED_LIST_PATH_3,
                    &[],
                    member::TRUSTED_LIST_3,
                )
                .await?;
            return Ok(payload.trusted_list.into_iter().map(Into::into).collect());
        }
        let payload: TrustedListPayload = self
            .fetch("trusted_list", TRUSTED_LIST_PATH, &[], member::TRUSTED_LIST)
            .await?;
        Ok(payload.trusted_list)
    }

    /// Refresh because a root was unknown, at most once per MIN_REFRESH_INTERVAL.
    async fn refresh_for_unknown_root(&self) -> Option<Arc<TrustedListState>> {
        let allowed = self
            .last_refresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none_or(|t| t.elapsed() >= MIN_REFRESH_INTERVAL);
        if !allowed || self.config.trusted_list.is_some() {
            return None;
        }
        self.refresh().await.ok()
    }

    /// Whether we can decide now: a trusted list not older than three refresh intervals that
    /// trusts our own chain. A scheme owner that failed a call is not a reason: what is known
    /// still decides, and the gateway asks it again on its own (`last_call_failed`). The reasons
    /// when not.
    pub fn readiness(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        match self.trusted.load().as_ref() {
            None => problems.push(
                match &*self
                    .refresh_failure
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                {
                    Some(failure) => format!("no trusted list yet: {failure}"),
                    None => "no trusted list yet".to_string(),
                },
            ),
            Some(s)
                if self.config.trusted_list.is_none() && s.fetched.elapsed() > self.max_age() =>
            {
                problems.push(format!(
                    "the trusted list is {} s old",
                    s.fetched.elapsed().as_secs()
                ))
            }
            Some(s) => problems.extend(self.own_chain_problem(&s.list)),
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Why participants would refuse our own client assertions: our chain is not trusted under the
    /// scheme owner's trusted list.
    fn own_chain_problem(&self, list: &TrustedList) -> Option<String> {
        validate_chain(self.peer.identity().chain_der(), list, Timestamp::now())
            .err()
            .map(|e| {
                format!("the gateway's own certificate chain is not trusted under the scheme owner's trusted list: {e}")
            })
    }

    /// Whether parties are named through the participant registry's records (3.0: ids and
    /// `alsoKnownAs`). Before 3.0 records have no aliases, nothing is looked up for names, and ids
    /// compare as written.
    pub fn resolves_aliases(&self) -> bool {
        self.config.scheme_version.camel_case()
    }

    /// Each of `names` looked up by itself (3.0): the parties a decision is about — the data
    /// owner, the caller, the gateway, a signer. A name that is no party identifier stays as
    /// written.
    pub async fn look_up(&self, names: &[&str], aliases: &mut Aliases) -> Result<(), TrustError> {
        if !self.resolves_aliases() {
            return Ok(());
        }
        for name in names {
            if aliases.looked_up(name) {
                continue;
            }
            if let Ok(id) = PartyId::parse(name) {
                let record = self.party(&id).await?;
                aliases.found(name, record.as_ref());
            }
        }
        Ok(())
    }

    /// Each of `names` that the record of one of the parties `listed_by` (found in this
    /// decision) lists, looked up by itself to confirm whom it names (3.0). Only names those
    /// records list are looked up — the parties a comparison can be about — never one a caller
    /// or a signer made up: those compare as written.
    pub async fn confirm(
        &self,
        names: &[&str],
        listed_by: &[&str],
        aliases: &mut Aliases,
    ) -> Result<(), TrustError> {
        if !self.resolves_aliases() {
            return Ok(());
        }
        for name in names.iter().copied() {
            if !aliases.needs_lookup(name, listed_by) {
                continue;
            }
            let record = match PartyId::parse(name) {
                Ok(id) => self.party(&id).await?,
                Err(_) => None,
            };
            aliases.found(name, record.as_ref());
        }
        Ok(())
    }

    /// Whether the record of `id` (or that it is unknown) is cached.
    pub fn knows(&self, id: &str) -> bool {
        self.parties.contains_key(id)
    }

    /// Update the age gauge; called periodically.
    pub fn report_age(&self) {
        // An offline trusted list (configured, not fetched) is never too old.
        let max_age = match self.config.trusted_list {
            Some(_) => i64::MAX,
            None => i64::try_from(self.max_age().as_secs()).unwrap_or(i64::MAX),
        };
        self.metrics.trusted_list_max_age.set(max_age);
        if let Some(s) = self.trusted.load().as_ref() {
            self.metrics
                .trusted_list_age
                .set(s.fetched.elapsed().as_secs() as i64);
        }
    }
}

#[async_trait]
impl Trust for TrustStore {
    /// Validate an x5c chain against the trusted list, using the cache; an unknown root triggers a
    /// (rate-limited) refresh of the list and one more try.
    async fn chain(
        &self,
        x5c: &[Vec<u8>],
        now: Timestamp,
    ) -> Result<Result<Arc<TrustedChain>, ChainError>, TrustError> {
        let key = chain_key(x5c);
        let mut state = self.trusted_list().await?;
        if let Some(cached) = self.chains.get(&key) {
            if cached.generation == state.generation && now.secs() <= cached.trusted.chain.not_after
            {
                self.chains_looked_up.count(true);
                return Ok(Ok(cached.trusted.clone()));
            }
        }
        self.chains_looked_up.count(false);
        let mut result = validate_chain(x5c, &state.list, now);
        if matches!(result, Err(ChainError::UntrustedRoot { .. })) {
            if let Some(fresh) = Box::pin(self.refresh_for_unknown_root()).await {
                state = fresh;
                result = validate_chain(x5c, &state.list, now);
            }
        }
        Ok(result.and_then(TrustedChain::new).map(|trusted| {
            let trusted = Arc::new(trusted);
            self.chains.insert(
                key,
                Arc::new(CachedChain {
                    trusted: trusted.clone(),
                    generation: state.generation,
                }),
            );
            trusted
        }))
    }

    fn admit_lookup(&self, leaf: &str, signer: &PartyId) -> Result<(), TrustError> {
        let pair = (leaf.to_string(), signer.to_string());
        if self.knows(signer.as_str()) || self.signers_charged.contains_key(&pair) {
            return Ok(());
        }
        self.signer_lookups
            .take(leaf, Instant::now())
            .map_err(|_| TrustError::Busy)?;
        self.signers_charged.insert(pair, ());
        Ok(())
    }

    /// The party record of `id` (None when the scheme owner does not know it), cached.
    /// The record of the party `id` stands for (`Named`); an error naming it where it is
    /// contested.
    async fn party(&self, id: &PartyId) -> Result<Option<Arc<Party>>, TrustError> {
        let found = match self.parties.get(id.as_str()).await {
            Some(cached) => {
                self.parties_looked_up.count(true);
                cached
            }
            None => self.look_up_named(id).await?,
        };
        // Told to a judgement running in this task (`reading`), if one is.
        let _ = READ.try_with(|read| read.borrow_mut().add(&found));
        match found.named {
            Named::Party(record) => Ok(Some(record)),
            Named::Nobody => Ok(None),
            Named::Contested => Err(TrustError::Contested(id.to_string())),
        }
    }
}

impl TrustStore {
    /// Whom `id` stands for, asked of the scheme owner (within `party_lookups_per_second`) and
    /// kept: before 3.0 the record its lookup found, in 3.0 as `fetch_named_3` proves it.
    async fn look_up_named(&self, id: &PartyId) -> Result<Found, TrustError> {
        // A miss's future (the loader and the fetch, about 11 KB) is made and boxed only here.
        let mut hit = true;
        let result = Box::pin(self.parties.try_get_with(id.to_string(), async {
            hit = false;
            if self.party_lookups.take(Instant::now()).is_err() {
                return Err(TrustError::Busy);
            }
            let named = match self.resolves_aliases() {
                true => self.fetch_named_3(id).await?,
                false => self
                    .fetch_party(id)
                    .await?
                    .map_or(Named::Nobody, |p| Named::Party(Arc::new(p))),
            };
            Ok(self.found(named))
        }))
        .await
        .map_err(|e| (*e).clone());
        self.parties_looked_up.count(hit);
        // A 3.0 record proven by an alias is its id's record too: kept under that id, one lookup
        // serves both names.
        if let Ok(Found {
            named: Named::Party(record),
            ..
        }) = &result
        {
            if !hit && record.id != id.as_str() && self.resolves_aliases() {
                let found = self.found(Named::Party(record.clone()));
                self.parties.insert(record.id.clone(), found).await;
            }
        }
        result
    }

    /// `named` as the cache keeps it, from now.
    fn found(&self, named: Named) -> Found {
        let lifetime = PartyExpiry {
            known: self.config.party_cache_ttl,
        }
        .lifetime(&named);
        let now = Instant::now();
        Found {
            named,
            until: now.checked_add(lifetime).unwrap_or(now),
            gone: Arc::default(),
        }
    }

    /// `judge` run, and the party records it read (through `party`, in this task), which tell
    /// whether any changed since (`RecordsRead::unchanged`).
    pub async fn reading<F: Future>(judge: F) -> (F::Output, RecordsRead) {
        READ.scope(RefCell::default(), async {
            let judged = judge.await;
            (judged, READ.with(RefCell::take))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::version::SchemeVersion;
    use crate::testbed::pki::TestPki;

    const SIGNER: &str = "EU.EORI.NL000000004";
    const OWNER: &str = "EU.EORI.NL000000005";

    /// A store whose scheme owner is never asked: its records are put in its cache.
    fn store(party_cache_ttl: Duration) -> TrustStore {
        crate::tls::ensure_crypto_provider();
        let identity = TestPki::shared().party(SIGNER).signing_identity();
        let peer = PeerClient::new(reqwest::Client::new(), identity, "iSHARE");
        let config = SchemeOwner {
            url: "http://127.0.0.1:9".into(),
            party_id: PartyId::parse("EU.EORI.NL000000000").unwrap(),
            root_fingerprint: None,
            trusted_list: Some(Vec::new()),
            refresh: Duration::from_secs(3600),
            party_cache_ttl,
            timeout: Duration::from_secs(1),
            party_lookups_per_second: 1,
            scheme_version: SchemeVersion::V1_9,
        };
        TrustStore::new(
            peer,
            config,
            AlgorithmPolicy::default(),
            Duration::ZERO,
            Metrics::new(),
        )
    }

    impl TrustStore {
        async fn keep(&self, id: &str) {
            let record = Party {
                id: id.into(),
                ..Party::default()
            };
            let found = self.found(Named::Party(Arc::new(record)));
            self.parties.insert(id.to_string(), found).await;
        }
    }

    /// The records of `ids` read in one judgement.
    async fn read_records(trust: &TrustStore, ids: &[&str]) -> RecordsRead {
        let judging = async {
            for id in ids {
                let id = PartyId::parse(id).unwrap();
                assert!(trust.party(&id).await.unwrap().is_some());
            }
        };
        TrustStore::reading(judging).await.1
    }

    #[tokio::test]
    async fn records_read_stay_unchanged_until_one_leaves_the_cache_or_is_replaced() {
        const OTHER: &str = "EU.EORI.NL000000006";
        let trust = store(Duration::from_secs(3600));
        trust.keep(SIGNER).await;
        trust.keep(OWNER).await;
        let read = read_records(&trust, &[SIGNER, OWNER, SIGNER]).await;
        assert_eq!(read.gone.len(), 2, "each record once");
        assert!(read.unchanged());
        // Another party's record taken in, or removed, changes none read.
        trust.keep(OTHER).await;
        trust.parties.invalidate(OTHER).await;
        assert!(read.unchanged());
        // One read, removed: changed, though the other is still cached.
        trust.parties.invalidate(OWNER).await;
        assert!(!read.unchanged());
        trust.keep(OWNER).await;
        let read = read_records(&trust, &[SIGNER, OWNER]).await;
        assert!(read.unchanged());
        // One read, replaced by another record.
        trust.keep(SIGNER).await;
        assert!(!read.unchanged());
        // Read outside any judgement: nothing is told, and nothing fails.
        let signer = PartyId::parse(SIGNER).unwrap();
        assert!(trust.party(&signer).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn records_read_change_when_the_first_of_them_is_due_to_leave_the_cache() {
        let trust = store(Duration::from_millis(300));
        trust.keep(SIGNER).await;
        let read = read_records(&trust, &[SIGNER]).await;
        assert!(read.unchanged());
        tokio::time::sleep(Duration::from_millis(350)).await;
        // Due: changed, though the cache has not yet removed it (nor told that).
        assert!(!read.gone[0].load(Ordering::Acquire));
        assert!(!read.unchanged());
    }
}
