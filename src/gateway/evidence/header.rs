//! Delegation evidence a consumer presents in the `delegationEvidence` header (`delegation_evidence`
//! before 3.0): one delegation token, or several separated by commas for a chain from the data
//! owner to the consumer. Each must be signed by a party that may issue it, be written as its
//! signer's scheme version writes evidence, and say what the scheme's rules require of its claims.
//!
//! A consumer sends the same token again and again until it expires. What a token proves by itself
//! (its signature by a chain under the trusted list) is kept, found by its signature's text (through
//! the cache's keyed hash) and used only for the very same token text, until the token, its
//! evidence or its chain expires, and only under the trusted list it was verified with. (Hashing
//! the signature alone, not the whole token of several kilobytes, is most of what a cache hit
//! saves.) What depends on the request or on the signer's standing now (its party record, its
//! role, the subjects, the token's age) is checked on every request. The chain's evaluation
//! against a request is kept too, by the tokens, how each was read and the request, for as long
//! as every step's evidence is in force: it is not made again for the next request like it.
//!
//! A grant kept on a chain (`gateway::as_it_came`) keeps what the chain's whole judgement found
//! (`Judgement`): while the trusted list, the party records that judgement read and the second
//! are the same, the chain would be judged the same, and each hit judges only what depends on
//! the time within the second: each token's claims' times.

use crate::gateway::decision::authorise::{evaluate, Expected};
use crate::gateway::decision::{Assessed, Evaluated, EvidenceSource, Judged};
use crate::gateway::evidence::cache::{entry_weight, KeyEncoding};
use crate::gateway::reject::{EvidenceRefusal, HeaderProblem, Reject};
use crate::peers::registry::RegistryClient;
use crate::peers::scheme_owner::{RecordsRead, TrustStore};
use crate::peers::trust::{Signer, Trust, TrustedChain, VerifyError};
use crate::scheme::evidence_token::{
    check_header_evidence, read_evidence_token, ClaimTimes, EvidenceToken, EvidenceTokenError,
    EvidenceTokenRules, Readers,
};
use crate::scheme::jwt::{self, AlgorithmPolicy, DecodedJwt};
use crate::scheme::mask::AccessRequest;
use crate::scheme::party::PartyId;
use crate::scheme::party_record::{Aliases, AmbiguousName, Party};
use crate::scheme::trust::{check_party, PartyError, SignerError};
use crate::scheme::vocabulary::Role;
use crate::scheme::{pieces, Timestamp};
use crate::telemetry::metrics::CacheLookups;
use crate::telemetry::Metrics;
use arc_swap::ArcSwapOption;
use moka::Expiry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most delegation tokens one header may carry: a chain from the data owner through its
/// delegates to the consumer is a few steps long.
const MAX_CHAIN: usize = 8;

/// A delegation token whose signature verified with a chain under the trusted list.
struct VerifiedToken {
    /// Which verification this is, unique in the process: its evaluations' keys name it.
    serial: u64,
    /// The token's text, compared on every hit: the key is made of its signature only.
    text: Box<str>,
    jwt: DecodedJwt,
    /// Its claims as every check of them reads them, read once.
    claims: Result<ClaimTimes, EvidenceTokenError>,
    token: EvidenceToken,
    /// Its evidence's data owner (`policyIssuer`) as a party id, parsed once.
    owner: Option<PartyId>,
    chain: Arc<TrustedChain>,
    /// Its signer's standing as last found (`check_party`): on which record, in which second.
    stood: ArcSwapOption<Stood>,
    /// The trusted list's generation it was verified under.
    generation: u64,
    /// Unix seconds: when the token, its evidence or its chain expires.
    until: i64,
    /// What it holds in memory, roughly.
    weight: u32,
}

impl VerifiedToken {
    fn new(
        serial: u64,
        text: &str,
        jwt: DecodedJwt,
        token: EvidenceToken,
        chain: Arc<TrustedChain>,
    ) -> Self {
        let until = [
            jwt.time_claim("exp").map(|e| e.floor() as i64),
            Some(token.evidence.not_on_or_after),
            Some(chain.chain.not_after),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0);
        VerifiedToken {
            serial,
            text: text.into(),
            claims: ClaimTimes::read(&jwt),
            owner: PartyId::parse(&token.evidence.policy_issuer).ok(),
            jwt,
            token,
            stood: ArcSwapOption::empty(),
            chain,
            generation: 0,
            until,
            // The text, the decoded claims and evidence, and the signature that is its key: about
            // what the text takes, twice; the claims' times, the owner's id and the block of the
            // signer's record last found standing (held weakly) in the rest.
            weight: u32::try_from(3 * text.len() + 1024).unwrap_or(u32::MAX),
        }
    }
}

/// A signer found standing: `check_party` reads the token's chain, the name it signs with, the
/// signer's record and the time in whole seconds, so the same record stands again within the
/// same second. The record is held weakly: its memory is not kept past its cache, and while this
/// is held its address cannot be another record's.
struct Stood {
    record: std::sync::Weak<Party>,
    second: i64,
}

impl VerifiedToken {
    /// `check_party` of this token's signer on `record` at `now`, judged once per record and
    /// second.
    fn signer_stands(&self, record: &Arc<Party>, now: Timestamp) -> Result<(), PartyError> {
        let second = now.secs();
        let stood = self.stood.load();
        if let Some(stood) = stood.as_deref() {
            if stood.second == second && std::ptr::eq(stood.record.as_ptr(), Arc::as_ptr(record)) {
                return Ok(());
            }
        }
        check_party(&self.chain.chain, &self.token.issuer, Some(record), now)?;
        let record = Arc::downgrade(record);
        self.stood.store(Some(Arc::new(Stood { record, second })));
        Ok(())
    }
}

/// A verified token of a chain as one request reads it: whether the registry that signed it
/// holds the delegations of the gateway (`ReadAs::designated_for_us`).
struct Step {
    token: Arc<VerifiedToken>,
    designated_for_us: bool,
    /// The party whose certificate signed it: its record's id (3.0), however the token names it.
    signer: String,
    /// Its audiences that stand for the consumer or the caller.
    addressees: Vec<String>,
}

/// A chain judged whole for one request, kept with a grant on it (`Judged`): what the
/// judgement read that can change, and what it found. While none of that changed, judging the
/// chain again for the same request finds the same, but for what depends on the time within a
/// second: each token's claims' times.
struct Judgement {
    /// The trusted list's generation every token was verified under.
    generation: u64,
    /// The party records read (the signers', the owners'): whether any changed since.
    read: RecordsRead,
    /// The second it was judged in: a signer's standing, its role and an owner's designations
    /// are judged by the second.
    second: i64,
    steps: Box<[Step]>,
    evaluation: Arc<ChainEvaluation>,
}

impl Judgement {
    /// What judging `steps` whole at `now` found, to be relied on for that request (before 3.0:
    /// the names in a chain compare as written, not through records); None where the tokens
    /// were verified under different generations of the trusted list, one is no longer kept or
    /// a step's evidence is not in force. Those three are judged by the whole second (a token is
    /// kept and evidence in force between whole seconds), so they hold for the rest of it.
    fn of(
        steps: Vec<Step>,
        evaluation: Arc<ChainEvaluation>,
        read: RecordsRead,
        now: Timestamp,
    ) -> Option<Judgement> {
        let generation = steps.first()?.token.generation;
        let kept = |s: &Step| s.token.generation == generation && now.secs() < s.token.until;
        if !steps.iter().all(kept) || !evaluation.holds_at(now) {
            return None;
        }
        Some(Judgement {
            generation,
            read,
            second: now.secs(),
            steps: steps.into_boxed_slice(),
            evaluation,
        })
    }

    /// The evaluation judging the chain again at `now` would yield, under the trusted list of
    /// `generation` and with the party records read `unchanged` (`RecordsRead::unchanged`):
    /// where the list, the records and the second are the same, and each token's claims' times
    /// hold as `check_header_evidence` judges them (to the fraction of a second). None
    /// otherwise: the chain is to be judged whole.
    fn stands(
        &self,
        (generation, unchanged): (u64, bool),
        rules: &EvidenceTokenRules,
        now: Timestamp,
    ) -> Option<&Arc<Evaluated>> {
        if generation != self.generation || !unchanged || now.secs() != self.second {
            return None;
        }
        for step in &self.steps {
            let token = &step.token;
            let (jwt, claims) = (&token.jwt, &token.claims);
            if check_header_evidence(jwt, claims, &step.addressees, rules, now).is_err() {
                return None;
            }
        }
        Some(&self.evaluation.evaluated)
    }
}

/// A chain's evaluation against one request, for as long as every step's evidence is in force:
/// within that window the evaluation does not depend on the time.
struct ChainEvaluation {
    evaluated: Arc<Evaluated>,
    /// Unix seconds: the latest `notBefore` of its steps and the earliest `notOnOrAfter`.
    from: i64,
    until: i64,
    /// Unix seconds: when it is dropped, with the first of its tokens (whose serials no later
    /// key names) if that is earlier.
    kept_until: i64,
    weight: u32,
}

impl ChainEvaluation {
    fn holds_at(&self, now: Timestamp) -> bool {
        self.from as f64 <= now.as_f64() && now.as_f64() < self.until as f64
    }
}

/// Entries kept until a time: a verified token until it expires; an evaluation until the
/// first of its tokens does.
trait Kept {
    /// Unix seconds.
    fn kept_until(&self) -> i64;
}

impl Kept for VerifiedToken {
    fn kept_until(&self) -> i64 {
        self.until
    }
}

impl Kept for ChainEvaluation {
    fn kept_until(&self) -> i64 {
        self.kept_until
    }
}

struct UntilExpiry;

impl<K, V: Kept> Expiry<K, Arc<V>> for UntilExpiry {
    fn expire_after_create(&self, _key: &K, value: &Arc<V>, _at: Instant) -> Option<Duration> {
        let left = value.kept_until() - Timestamp::now().secs();
        Some(Duration::from_secs(left.max(0) as u64))
    }
}

pub struct HeaderEvidence {
    /// Every algorithm some version signs with: which one a signer may use is its version's.
    algorithms: AlgorithmPolicy,
    readers: Readers,
    rules: EvidenceTokenRules,
    verified: moka::sync::Cache<Box<str>, Arc<VerifiedToken>, crate::keyed::KeyedHash>,
    /// The next verified token's serial.
    serials: AtomicU64,
    /// Chains evaluated, by their steps (each token's serial, how it was read) and the request.
    evaluations: moka::sync::Cache<Box<[u8]>, Arc<ChainEvaluation>, crate::keyed::KeyedHash>,
    tokens_looked_up: CacheLookups,
    evaluations_looked_up: CacheLookups,
}

impl HeaderEvidence {
    /// `cache_size`: the bytes verified tokens may take; their evaluations, some hundreds of bytes
    /// each, may take a quarter as much.
    pub fn new(
        readers: Readers,
        rules: EvidenceTokenRules,
        cache_size: u64,
        metrics: Metrics,
    ) -> Self {
        HeaderEvidence {
            algorithms: AlgorithmPolicy {
                allow_rs384_rs512: true,
            },
            readers,
            rules,
            verified: moka::sync::Cache::builder()
                .max_capacity(cache_size)
                .weigher(|_, v: &Arc<VerifiedToken>| v.weight)
                .eviction_listener(metrics.on_eviction("evidence_token"))
                .expire_after(UntilExpiry)
                .build_with_hasher(crate::keyed::keyed()),
            serials: AtomicU64::new(0),
            evaluations: moka::sync::Cache::builder()
                .max_capacity(cache_size / 4)
                .weigher(|_, v: &Arc<ChainEvaluation>| v.weight)
                .eviction_listener(metrics.on_eviction("evidence_evaluation"))
                .expire_after(UntilExpiry)
                .build_with_hasher(crate::keyed::keyed()),
            tokens_looked_up: metrics.cache_lookups("evidence_token"),
            evaluations_looked_up: metrics.cache_lookups("evidence_evaluation"),
        }
    }

    /// Evidence from the header: one delegation_token, or several separated by commas for a chain
    /// from the data owner to the consumer, evaluated against the request; and whether every
    /// token was verified before (cached). Its parties are named by the ids they stand for (3.0),
    /// the names in one token resolved as in every other: a chain's links compare as its
    /// signers' records say. Each token and its signer are judged on every request; a chain
    /// evaluated before against the same request, read the same way, is not evaluated again.
    pub async fn chain(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        registries: &RegistryClient,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<Assessed, Reject> {
        let judging = self.judge(tokens, expected, (registries, trust), now);
        let (judged, read) = TrustStore::reading(judging).await;
        let (steps, cache_hit, evaluation) = judged?;
        let evaluated = evaluation.evaluated.clone();
        // What a grant kept on the chain relies on (grants are kept where names compare as
        // written).
        let judged = match trust.resolves_aliases() {
            true => None,
            false => Judgement::of(steps, evaluation, read, now),
        };
        Ok(Assessed {
            evaluated,
            cache_hit,
            kept_as: None,
            judged: judged.map(|j| Arc::new(Judged(Box::new(j)))),
        })
    }

    /// Whether a grant kept on the chain `tokens` for `expected` still stands at `now`
    /// (`Evidence::header_stands`): on what the chain's last whole judgement found (`judged`)
    /// while nothing it read changed; otherwise the chain is judged whole again, and what that
    /// found kept in `judged` where the grant stands.
    pub async fn stands(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        (evaluated, judged): (&Arc<Evaluated>, &ArcSwapOption<Judged>),
        (registries, trust): (&RegistryClient, &TrustStore),
        now: Timestamp,
    ) -> bool {
        if let Ok(list) = trust.trusted_list().await {
            let last = judged.load();
            let last = last
                .as_deref()
                .and_then(|j| j.0.downcast_ref::<Judgement>());
            let found = last.and_then(|j| {
                let unchanged = j.read.unchanged();
                j.stands((list.generation, unchanged), &self.rules, now)
            });
            if let Some(found) = found {
                return Arc::ptr_eq(found, evaluated);
            }
        }
        // Boxed: a whole judgement's state is kilobytes, which the future of every hit that
        // relies on the last one would otherwise carry and have copied.
        let whole = Box::pin(self.chain(tokens, expected, registries, trust, now));
        match whole.await {
            Ok(assessed) if Arc::ptr_eq(&assessed.evaluated, evaluated) => {
                judged.store(assessed.judged);
                true
            }
            _ => false,
        }
    }

    /// The chain `tokens` judged whole for `expected` at `now`: its steps, whether every token
    /// was verified before, and its evaluation.
    async fn judge(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        (registries, trust): (&RegistryClient, &TrustStore),
        now: Timestamp,
    ) -> Result<(Vec<Step>, bool, Arc<ChainEvaluation>), Reject> {
        let mut aliases = expected.aliases.clone();
        let mut steps = Vec::new();
        let mut signers = Vec::new();
        let mut cached = true;
        let each = pieces(tokens.as_bytes(), b',').map(|at| tokens[at].trim());
        for (n, token) in each.filter(|t| !t.is_empty()).enumerate() {
            // Each token costs a signature check and its signer's record: a bound before any.
            if n == MAX_CHAIN {
                let header = expected.header;
                return Err(EvidenceRefusal::ChainTooLong {
                    header,
                    max: MAX_CHAIN,
                }
                .into());
            }
            let checked = self.verify(token, expected, &mut aliases, (registries, trust), now);
            let (step, signer, hit) = checked.await?;
            steps.push(step);
            signers.push(signer);
            cached &= hit;
        }
        if steps.is_empty() {
            return Err(EvidenceRefusal::Header {
                header: expected.header,
                problem: HeaderProblem::Empty,
            }
            .into());
        }
        let resolves = trust.resolves_aliases();
        if resolves {
            // Issuers and subjects by the names the request's parties' and the signers' records
            // list; service providers by the names the gateway's record lists.
            let request = expected.request;
            let mut parties = request_parties(expected, &aliases)?;
            parties.extend(signers);
            let parties: Vec<&str> = parties.iter().map(String::as_str).collect();
            let evidence = || steps.iter().map(|s| &s.token.token.evidence);
            let links: Vec<&str> = evidence()
                .flat_map(|ev| [ev.policy_issuer.as_str(), &ev.target.access_subject])
                .collect();
            let ours: Vec<&str> = request
                .service_providers
                .iter()
                .map(String::as_str)
                .collect();
            let providers: Vec<&str> = evidence().flat_map(|ev| ev.service_providers()).collect();
            trust.confirm(&links, &parties, &mut aliases).await?;
            trust.confirm(&providers, &ours, &mut aliases).await?;
        }
        let aliases = resolves.then_some(&aliases);
        let evaluation = self.evaluate(&steps, expected.request, aliases, now)?;
        Ok((steps, cached, evaluation))
    }

    /// The chain of `steps` evaluated against `request` at `now`, its parties named by the ids
    /// `aliases` gives (3.0): as evaluated before, while every step's evidence is in force.
    fn evaluate(
        &self,
        steps: &[Step],
        request: &AccessRequest,
        aliases: Option<&Aliases>,
        now: Timestamp,
    ) -> Result<Arc<ChainEvaluation>, Reject> {
        let key = evaluation_key(steps, request, aliases)?;
        if let Some(hit) = self.evaluations.get(key.as_slice()) {
            if hit.holds_at(now) {
                self.evaluations_looked_up.count(true);
                return Ok(hit);
            }
        }
        self.evaluations_looked_up.count(false);
        let mut chain = Vec::with_capacity(steps.len());
        for step in steps {
            let mut evidence = step.token.token.evidence.clone();
            evidence.read_as.designated_for_us = step.designated_for_us;
            evidence.signer = Some(step.signer.clone());
            if let Some(aliases) = aliases {
                evidence.resolve(aliases)?;
            }
            chain.push(evidence);
        }
        let evaluated = Arc::new(evaluate(&chain, request, EvidenceSource::Header, now));
        let entry = ChainEvaluation {
            evaluated: evaluated.clone(),
            from: chain
                .iter()
                .map(|ev| ev.not_before)
                .max()
                .unwrap_or(i64::MAX),
            until: chain.iter().map(|ev| ev.not_on_or_after).min().unwrap_or(0),
            kept_until: steps.iter().map(|s| s.token.until).min().unwrap_or(0),
            weight: entry_weight(&evaluated, key.len() + 48),
        };
        let entry = Arc::new(entry);
        if entry.holds_at(now) {
            self.evaluations
                .insert(key.into_boxed_slice(), entry.clone());
        }
        Ok(entry)
    }

    /// One delegation_token from the header: signed by its `iss`, which is the data owner of that
    /// evidence or an authorisation registry of that owner (or of the route's data owner); and
    /// addressed to the consumer, issued in time (the pure checks of `evidence_token`). The
    /// token as this request reads it, the signer's id, and whether its signature was verified
    /// before (cached).
    async fn verify(
        &self,
        token: &str,
        expected: &Expected<'_>,
        aliases: &mut Aliases,
        (registries, trust): (&RegistryClient, &TrustStore),
        now: Timestamp,
    ) -> Result<(Step, String, bool), Reject> {
        let (verified, hit) = self.verified_token(token, trust, now).await?;
        let (decoded, read) = (&verified.jwt, &verified.token);
        let signer = &read.issuer;
        let refused = |e: PartyError| Reject::from(EvidenceRefusal::Signer(SignerError::Party(e)));
        // The signer's standing now: its record as the scheme owner says (cached), its certificate
        // still the one registered, the party active.
        let record: Arc<Party> = trust
            .party(signer)
            .await?
            .ok_or_else(|| refused(PartyError::UnknownParty(signer.to_string())))?;
        verified.signer_stands(&record, now).map_err(refused)?;
        // The signer is the party its certificate was bound to: its record's id (3.0), however
        // the token names it; and it is read as that id is configured to be.
        let signer_id = match trust.resolves_aliases() {
            true => {
                aliases.found(signer.as_str(), Some(&record));
                if !self.readers.read_alike(signer.as_str(), &record.id) {
                    let id = record.id.clone();
                    let written = signer.clone();
                    return Err(EvidenceRefusal::SignerAlias { written, id }.into());
                }
                record.id.clone()
            }
            false => signer.to_string(),
        };
        // The data owner of this evidence: a name the signer's or the route's owner's record
        // lists stands for the id its own lookup finds; any other as written.
        let written_owner = read.evidence.policy_issuer.as_str();
        let of = [signer_id.as_str(), &expected.request.policy_issuer];
        trust.confirm(&[written_owner], &of, aliases).await?;
        let owner = aliases.id_of(written_owner)?.to_string();
        let designated_for_us = match signer_id == owner {
            true => false,
            false => {
                let signer = (signer, record.as_ref());
                let parsed = verified.owner.as_ref().filter(|id| id.as_str() == owner);
                let owner = (owner.as_str(), parsed);
                holds_for(signer, owner, expected, aliases, (registries, trust), now).await?
            }
        };
        let addressees = addressees(decoded, expected, aliases, trust).await?;
        check_header_evidence(decoded, &verified.claims, &addressees, &self.rules, now)
            .map_err(EvidenceRefusal::Token)?;
        subject_named(read, &signer_id, expected, aliases, trust).await?;
        let step = Step {
            token: verified.clone(),
            designated_for_us,
            signer: signer_id.clone(),
            addressees,
        };
        Ok((step, signer_id, hit))
    }

    /// The token decoded, with its signature verified by a chain under the current trusted list:
    /// from the cache when it was verified under this list and has not expired (then true).
    async fn verified_token(
        &self,
        token: &str,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<(Arc<VerifiedToken>, bool), Reject> {
        let generation = trust.trusted_list().await?.generation;
        let key = signature(token);
        if let Some(hit) = self.verified.get(key) {
            if *hit.text == *token && hit.generation == generation && now.secs() < hit.until {
                self.tokens_looked_up.count(true);
                return Ok((hit, true));
            }
        }
        self.tokens_looked_up.count(false);
        let decoded =
            jwt::decode(token, self.algorithms).map_err(|e| EvidenceRefusal::Token(e.into()))?;
        let read = read_evidence_token(&decoded, &self.readers).map_err(EvidenceRefusal::Token)?;
        let Signer { chain, .. } = trust
            .verify_signer(&decoded, &read.issuer, now)
            .await
            .map_err(|e| match e {
                VerifyError::Refused(e) => Reject::from(EvidenceRefusal::Signer(e)),
                VerifyError::SchemeOwner(e) => e.into(),
            })?;
        let serial = self.serials.fetch_add(1, Ordering::Relaxed);
        let verified = Arc::new(VerifiedToken {
            generation,
            ..VerifiedToken::new(serial, token, decoded, read, chain)
        });
        self.verified.insert(key.into(), verified.clone());
        Ok((verified, false))
    }
}

/// The ids of the request's parties: the data owner, the consumer, the caller and the gateway.
fn request_parties(
    expected: &Expected<'_>,
    aliases: &Aliases,
) -> Result<Vec<String>, AmbiguousName> {
    let request = expected.request;
    let mut parties = vec![
        request.policy_issuer.clone(),
        request.access_subject.clone(),
        aliases.id_of(expected.caller)?.to_string(),
    ];
    parties.extend(request.service_providers.iter().cloned());
    Ok(parties)
}

/// Where a token is kept in the cache of verified tokens: its signature (what follows its last
/// dot). Tokens that share a signature but differ elsewhere share the key; the text kept with the
/// entry tells them apart, and only a token that verifies is ever kept.
fn signature(token: &str) -> &str {
    token.rsplit_once('.').map_or(token, |(_, s)| s)
}

/// What a chain's evaluation is kept by: the request, and each step's token (its serial), how it
/// was read, and (3.0) the ids its parties stand for now.
fn evaluation_key(
    steps: &[Step],
    request: &AccessRequest,
    aliases: Option<&Aliases>,
) -> Result<Vec<u8>, AmbiguousName> {
    let mut key = KeyEncoding::with_capacity(256 + 64 * steps.len());
    key.request(request);
    key.flag(aliases.is_some());
    key.number(steps.len() as u64);
    for step in steps {
        key.number(step.token.serial);
        key.flag(step.designated_for_us);
        let Some(aliases) = aliases else { continue };
        let ev = &step.token.token.evidence;
        key.text(aliases.id_of(&ev.policy_issuer)?);
        key.text(aliases.id_of(&ev.target.access_subject)?);
        key.number(ev.service_providers().count() as u64);
        for provider in ev.service_providers() {
            key.text(aliases.id_of(provider)?);
        }
    }
    Ok(key.0)
}

/// Evidence signed by a registry, not by its data owner: the signer is a registry (in the
/// framework, or in a data space we serve in), and one the owner designated (or, for a later step of a chain, the route's data owner did, where the step's
/// own owner designated none). Whether that designation names us.
async fn holds_for(
    (signer, record): (&PartyId, &Party),
    (owner, parsed): (&str, Option<&PartyId>),
    expected: &Expected<'_>,
    aliases: &mut Aliases,
    (registries, trust): (&RegistryClient, &TrustStore),
    now: Timestamp,
) -> Result<bool, Reject> {
    let role = Role::AuthorisationRegistry.as_str();
    if !record.holds_role(role, registries.membership(), now.secs()) {
        return Err(EvidenceRefusal::IssuerNotARegistry(signer.clone()).into());
    }
    for of in [owner, &expected.request.policy_issuer] {
        // The evidence's owner as parsed with its token; the route's parsed here.
        let reparsed;
        let id = match parsed.filter(|id| id.as_str() == of) {
            Some(id) => Some(id),
            None => {
                reparsed = PartyId::parse(of).ok();
                reparsed.as_ref()
            }
        };
        let holds = registries
            .holds_delegations_of(
                expected.registry,
                id,
                (signer.as_str(), record),
                (&mut *aliases, trust),
                now,
            )
            .await?;
        if let Some(holding) = holds {
            let bound_by_route_owner =
                of != owner && registries.designates_any(owner, trust, now).await?;
            return Ok(holding.for_us && !bound_by_route_owner);
        }
    }
    Err(EvidenceRefusal::IssuerNotTheOwnersRegistry {
        issuer: signer.clone(),
        owner: owner.to_string(),
    }
    .into())
}

/// The token's `sub` names its signer or its evidence's access subject: by any name their records
/// prove (3.0), else as written.
async fn subject_named(
    token: &EvidenceToken,
    signer: &str,
    expected: &Expected<'_>,
    aliases: &mut Aliases,
    trust: &TrustStore,
) -> Result<(), Reject> {
    if !trust.resolves_aliases() {
        return token
            .check_subject(|a, b| a == b)
            .map_err(|e| EvidenceRefusal::Token(e).into());
    }
    let caller = aliases.id_of(expected.caller)?.to_string();
    let of = [signer, &expected.request.access_subject, &caller];
    let names = [
        token.subject.as_str(),
        &token.evidence.target.access_subject,
    ];
    trust.confirm(&names, &of, aliases).await?;
    for name in names.into_iter().chain([token.issuer.as_str()]) {
        // A name the records disagree on refuses, naming it.
        aliases.id_of(name)?;
    }
    token
        .check_subject(|a, b| aliases.id_of(a).ok() == aliases.id_of(b).ok())
        .map_err(|e| EvidenceRefusal::Token(e).into())
}

/// The audiences of the token that stand for the consumer or the caller, by any name their
/// records list. None of them (no `aud` too): refused.
async fn addressees(
    token: &DecodedJwt,
    expected: &Expected<'_>,
    aliases: &mut Aliases,
    trust: &TrustStore,
) -> Result<Vec<String>, Reject> {
    let addressed = [
        aliases.id_of(&expected.request.access_subject)?.to_string(),
        aliases.id_of(expected.caller)?.to_string(),
    ];
    let of: Vec<&str> = addressed.iter().map(String::as_str).collect();
    if !token.claims.contains_key("aud") {
        let missing = EvidenceTokenError::MissingClaim("aud");
        return Err(EvidenceRefusal::Token(missing).into());
    }
    let audiences: Vec<&str> = token.audiences().collect();
    trust.confirm(&audiences, &of, aliases).await?;
    let mut addressees = Vec::new();
    for audience in &audiences {
        if of.contains(&aliases.id_of(audience)?) {
            addressees.push(audience.to_string());
        }
    }
    if addressees.is_empty() {
        let mut expected = of.clone();
        expected.dedup();
        return Err(EvidenceRefusal::Token(EvidenceTokenError::NotForCaller {
            expected: expected.join(" or "),
            found: token.audience(),
        })
        .into());
    }
    Ok(addressees)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::decision::authorise::no_policy;
    use crate::scheme::party_record::Span;
    use crate::scheme::trust::{validate_chain, TrustedList};
    use crate::scheme::version::SchemeVersion;
    use crate::testbed::pki::TestPki;
    use serde_json::json;

    const AR: &str = "EU.EORI.NL000000004";
    const CONSUMER: &str = "EU.EORI.NL000000001";

    /// A token the registry `AR` signed at `now`, verified under the test PKI.
    fn verified(now: i64) -> VerifiedToken {
        signed(now, json!({"iat": now, "exp": now + 30}))
    }

    /// A token the registry `AR` signed at `now` with the claims `times` beside its own.
    fn signed(now: i64, times: serde_json::Value) -> VerifiedToken {
        let pki = TestPki::shared();
        let evidence = crate::scheme::evidence_token::tests::evidence_at(now);
        let mut claims = json!({"iss": AR, "sub": CONSUMER, "aud": CONSUMER, "jti": "j",
            "delegationEvidence": evidence});
        for (claim, value) in times.as_object().unwrap() {
            claims[claim] = value.clone();
        }
        let text = pki.party(AR).signing_identity().sign_raw(&claims).unwrap();
        let jwt = jwt::decode(&text, AlgorithmPolicy::default()).unwrap();
        let token = read_evidence_token(&jwt, &Readers::default()).unwrap();
        let trusted = TrustedList::new([pki.trusted_list_entry()]);
        let at = Timestamp::from_secs(now);
        let chain = validate_chain(&pki.party(AR).chain_der, &trusted, at).unwrap();
        let chain = Arc::new(TrustedChain::new(chain).unwrap());
        VerifiedToken::new(1, &text, jwt, token, chain)
    }

    /// The registry's 1.9 record, adhering until `until` (its certificate bound by its subject).
    fn record(until: i64) -> Arc<Party> {
        Arc::new(Party {
            id: AR.into(),
            version: SchemeVersion::V1_9,
            adherence: vec![Span {
                from: Some(0),
                until: Some(until),
            }],
            ..Party::default()
        })
    }

    #[test]
    fn a_signer_found_standing_stands_again_only_on_the_same_record_in_the_same_second() {
        let now = Timestamp::now().secs();
        let token = verified(now);
        let at = |secs| Timestamp::from_secs_f64(secs as f64 + 0.25);
        let kept = record(now + 2);
        assert_eq!(token.signer_stands(&kept, at(now)), Ok(()));
        assert_eq!(token.signer_stands(&kept, at(now + 1)), Ok(()));
        assert_eq!(token.signer_stands(&kept, at(now + 1)), Ok(()));
        // The same record a second later, its adherence ended: judged again, and refused.
        let ended = PartyError::NotActive(AR.into());
        assert_eq!(token.signer_stands(&kept, at(now + 2)), Err(ended.clone()));
        // Found standing at one second, then a new record in that second: judged on the new one.
        assert_eq!(token.signer_stands(&kept, at(now + 1)), Ok(()));
        let renewed = record(now);
        assert_eq!(token.signer_stands(&renewed, at(now + 1)), Err(ended));
        // A record of the same content is judged on its own, and stands.
        assert_eq!(token.signer_stands(&record(now + 2), at(now + 1)), Ok(()));
        // Found standing on a record since dropped: a record made then is judged on its own,
        // wherever the allocator puts it.
        let dropped = record(now + 2);
        assert_eq!(token.signer_stands(&dropped, at(now + 1)), Ok(()));
        drop(dropped);
        let made = record(now);
        let refused = token.signer_stands(&made, at(now + 1));
        assert_eq!(refused, Err(PartyError::NotActive(AR.into())));
    }

    /// The judgement of a chain of `token` (under the trusted list's generation 3) at `at`, its
    /// evaluation in force while the token's evidence is.
    fn judge_at(token: VerifiedToken, at: Timestamp) -> Option<Judgement> {
        let evidence = &token.token.evidence;
        let bounds = (evidence.not_before, evidence.not_on_or_after);
        judge_within(token, bounds, at)
    }

    #[test]
    fn a_chain_judged_whole_stands_within_its_second_on_the_same_list_and_records() {
        let now = Timestamp::now().secs();
        let at = |secs: f64| Timestamp::from_secs_f64(now as f64 + secs);
        let judged = judge_at(verified(now), at(0.5)).unwrap();
        let evaluated = &judged.evaluation.evaluated;
        let rules = EvidenceTokenRules {
            leeway_secs: 5.0,
            max_age_secs: 30.0,
        };
        let same = (3, true);
        let found = judged.stands(same, &rules, at(0.9));
        assert!(found.is_some_and(|e| Arc::ptr_eq(e, evaluated)));
        assert!(judged.stands(same, &rules, at(0.0)).is_some());
        // Another trusted list, a record read changed, the next second: judged whole.
        assert!(judged.stands((4, true), &rules, at(0.9)).is_none());
        assert!(judged.stands((3, false), &rules, at(0.9)).is_none());
        assert!(judged.stands(same, &rules, at(1.0)).is_none());
        assert!(judged.stands(same, &rules, at(-0.1)).is_none());
    }

    /// `token` judged whole at `judged` under `rules`, in one second: what was found stands at
    /// `stands`, and not at `refused`.
    fn stands_then_not(
        token: VerifiedToken,
        rules: EvidenceTokenRules,
        judged: Timestamp,
        (stands, refused): (Timestamp, Timestamp),
    ) {
        let judgement = judge_at(token, judged).unwrap();
        assert!(judgement.stands((3, true), &rules, stands).is_some());
        assert!(judgement.stands((3, true), &rules, refused).is_none());
    }

    #[test]
    fn a_chain_judged_whole_stands_only_while_its_tokens_times_hold_to_the_fraction() {
        let now = Timestamp::now().secs();
        let at = |secs: f64| Timestamp::from_secs_f64(now as f64 + secs);
        // Too old half a second into its second: issued 30 s before it, 30.5 s the longest.
        let old = signed(now, json!({"iat": now - 30, "exp": now + 2}));
        let rules = EvidenceTokenRules {
            leeway_secs: 2.0,
            max_age_secs: 30.5,
        };
        stands_then_not(old, rules, at(0.25), (at(0.4), at(0.6)));
        // Not yet valid earlier in the second it was judged in (a request that began before).
        let nbf = now as f64 + 0.5;
        let early = signed(now, json!({"iat": now, "exp": now + 30, "nbf": nbf}));
        let rules = EvidenceTokenRules {
            leeway_secs: 0.0,
            max_age_secs: 30.0,
        };
        stands_then_not(early, rules, at(0.75), (at(0.9), at(0.25)));
    }

    #[test]
    fn a_chain_is_not_relied_on_past_what_its_second_holds() {
        let now = Timestamp::now().secs();
        let at = |secs: f64| Timestamp::from_secs_f64(now as f64 + secs);
        // A token no longer kept in this second (its exp), evidence not yet in force.
        let expiring = signed(now, json!({"iat": now - 5, "exp": now}));
        assert!(judge_at(expiring, at(0.5)).is_none());
        let late = judge_at(verified(now), at(-20.0));
        assert!(late.is_none(), "before the evidence's notBefore");
        assert!(judge_at(verified(now), at(0.5)).is_some());
    }

    /// `judge_at`, the evaluation in force from `from` to `until` (whole seconds, as evidence's
    /// bounds are).
    fn judge_within(
        token: VerifiedToken,
        (from, until): (i64, i64),
        at: Timestamp,
    ) -> Option<Judgement> {
        let evaluation = Arc::new(ChainEvaluation {
            evaluated: Arc::new(no_policy(EvidenceSource::Header)),
            from,
            until,
            kept_until: token.until,
            weight: 0,
        });
        let step = Step {
            token: Arc::new(VerifiedToken {
                generation: 3,
                ..token
            }),
            designated_for_us: false,
            signer: AR.into(),
            addressees: vec![CONSUMER.into()],
        };
        Judgement::of(vec![step], evaluation, RecordsRead::default(), at)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Within the second a chain was judged whole in, what that judgement found stands at a
        /// hit exactly where the whole judgement's checks of the time would pass then: the
        /// verified token still kept (`verified_token`), its claims' times
        /// (`check_header_evidence`, to the fraction of a second) and its evaluation in force
        /// (`evaluate`). Times in eighths of a second, claims in quarters, near the second so
        /// that one in about sixty cases has a claim's check change within it.
        #[test]
        fn a_judgement_stands_exactly_where_the_whole_judgements_time_checks_pass(
            iat in -12i64..4,
            lifetime in 4i64..24,
            nbf in proptest::option::of(-4i64..5),
            (from, until) in (-2i64..1, 0i64..3),
            (leeway, max_age) in (0u8..3, 4u8..24),
            (judged, hit) in (0i64..8, 0i64..8),
        ) {
            let second = Timestamp::now().secs();
            let quarter = |q: i64| second as f64 + q as f64 / 4.0;
            let mut times = json!({"iat": quarter(iat), "exp": quarter(iat + lifetime)});
            if let Some(nbf) = nbf {
                times["nbf"] = json!(quarter(nbf));
            }
            let token = signed(second, times);
            let rules = EvidenceTokenRules {
                leeway_secs: f64::from(leeway) / 4.0,
                max_age_secs: f64::from(max_age) / 4.0,
            };
            let bounds = (second + from, second + until);
            let whole = |token: &VerifiedToken, at: Timestamp| {
                let audiences = [CONSUMER];
                let claims = check_header_evidence(&token.jwt, &token.claims, &audiences, &rules, at);
                let in_force = bounds.0 as f64 <= at.as_f64() && at.as_f64() < bounds.1 as f64;
                at.secs() < token.until && claims.is_ok() && in_force
            };
            let eighth = |e: i64| Timestamp::from_secs_f64(second as f64 + e as f64 / 8.0);
            let (judged, hit) = (eighth(judged), eighth(hit));
            let stood = whole(&token, judged);
            let expected = whole(&token, hit);
            let judgement = judge_within(token, bounds, judged);
            // Where the whole judgement refused, nothing was found to stand on.
            if stood {
                let judgement = judgement.expect("judged standing, and kept");
                let stands = judgement.stands((3, true), &rules, hit).is_some();
                proptest::prop_assert_eq!(stands, expected);
            }
        }
    }

    #[test]
    fn a_chain_evaluation_holds_only_while_every_steps_evidence_is_in_force() {
        let entry = ChainEvaluation {
            evaluated: Arc::new(no_policy(EvidenceSource::Header)),
            from: 100,
            until: 200,
            kept_until: 200,
            weight: 0,
        };
        let at = |secs| entry.holds_at(Timestamp::from_secs_f64(secs));
        assert!(!at(99.5), "before the latest notBefore");
        assert!(at(100.0) && at(199.9));
        assert!(!at(200.0), "at the earliest notOnOrAfter");
    }
}
