//! The live gateway's evidence for the delegation stages (`decision::authorise`): the consumer a
//! broker acts for, the `delegation_evidence` header verified through the trust store, and the data
//! owner's registry through the decision cache, within each caller's budget of registry calls and
//! of data owners not looked up yet. The rules of evidence tokens live in `scheme`; registries are
//! asked through `peers`.

use crate::config::model::Config;
use crate::gateway::decision::authorise::{evaluate, no_policy, Evidence, Expected, RegistryAsk};
use crate::gateway::decision::{Assessed, Evaluated, EvidenceSource, Judged};
use crate::gateway::evidence::broker;
use crate::gateway::evidence::cache::{DecisionCache, DecisionKey};
use crate::gateway::evidence::header::HeaderEvidence;
use crate::gateway::fleet::replay::ReplayStore;
use crate::gateway::reject::{Reject, Unavailable};
use crate::peers::forwarded::ForwardedAssertions;
use crate::peers::registry::RegistryClient;
use crate::peers::scheme_owner::TrustStore;
use crate::peers::PeerClient;
use crate::rate::Buckets;
use crate::scheme::assertion::AssertionRules;
use crate::scheme::evidence_token::{EvidenceTokenRules, Readers};
use crate::scheme::jwt::AlgorithmPolicy;
use crate::scheme::party_record::Aliases;
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use arc_swap::ArcSwapOption;
use async_trait::async_trait;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Data owners a caller may name per minute that the gateway has not looked up yet: each costs
/// calls to the scheme owner.
const NEW_OWNERS_PER_MINUTE: u32 = 30;
/// The most callers whose registry budget is remembered (a forgotten caller starts with a full one).
const CALLERS: u64 = 100_000;

struct Inner {
    replay: Arc<ReplayStore>,
    algorithms: AlgorithmPolicy,
    /// The version each signer speaks, as its evidence and assertions are read.
    signers: Arc<Readers>,
    leeway_secs: f64,
    header_evidence: HeaderEvidence,
    registry_timeout: Duration,
    registries: RegistryClient,
    decisions: DecisionCache,
    /// Per caller: the data owners it named this minute that were not known yet.
    named_owners: moka::sync::Cache<String, Arc<AtomicU32>>,
    /// Registry calls each caller may cause: (a bucket per caller, a minute's worth).
    registry_budget: (Buckets<String>, u32),
    metrics: Metrics,
}

/// The live gateway's caches and clients for evidence; `with` a trust store, the `Evidence` of the
/// delegation stages.
#[derive(Clone)]
pub struct Authorizer(Arc<Inner>);

impl Authorizer {
    /// How client assertions addressed to `audience` are checked: within the leeway, signed as
    /// the signer's version signs (RS384 and RS512 from 2.1 on, or from every signer where
    /// `[tokens] allow_rs384_rs512`).
    pub fn assertion_rules(&self, audience: &str) -> AssertionRules {
        AssertionRules {
            audience: audience.to_string(),
            leeway_secs: self.0.leeway_secs,
            algorithms: self.0.algorithms,
            signers: Some(self.0.signers.clone()),
        }
    }

    pub fn new(
        config: &Config,
        peer: PeerClient,
        replay: Arc<ReplayStore>,
        forwarded: Arc<ForwardedAssertions>,
        metrics: Metrics,
    ) -> Self {
        let algorithms = AlgorithmPolicy {
            allow_rs384_rs512: config.tokens.allow_rs384_rs512,
        };
        let leeway_secs = config.tokens.leeway.as_secs_f64();
        let d = &config.delegation;
        let readers = evidence_readers(config);
        let token_rules = EvidenceTokenRules {
            leeway_secs,
            max_age_secs: d.header_evidence_max_age.as_secs_f64(),
        };
        Authorizer(Arc::new(Inner {
            replay,
            algorithms,
            signers: Arc::new(readers.clone()),
            leeway_secs,
            header_evidence: HeaderEvidence::new(
                readers.clone(),
                token_rules,
                d.cache_size,
                metrics.clone(),
            ),
            registry_timeout: d.registry_timeout,
            registries: RegistryClient::new(
                peer,
                readers,
                token_rules,
                config.registries.clone(),
                forwarded,
                metrics.clone(),
            ),
            decisions: DecisionCache::new(d, metrics.clone()),
            registry_budget: {
                let per_minute = d.registry_calls_per_minute.max(1);
                let burst = f64::from(per_minute);
                (Buckets::new(burst / 60.0, burst, CALLERS), per_minute)
            },
            named_owners: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(Duration::from_secs(60))
                .build(),
            metrics,
        }))
    }

    /// Drop the cached decisions `scope` covers; how many were dropped.
    pub async fn purge(&self, scope: &crate::gateway::evidence::cache::PurgeScope) -> u64 {
        self.0.decisions.purge(scope).await
    }

    /// The decision cache's entries, as a decision kept elsewhere sees them.
    pub fn decision_entries(&self) -> crate::gateway::evidence::cache::Entries {
        self.0.decisions.entries()
    }

    /// The evidence of the live gateway under `trust`.
    pub fn with<'a>(&'a self, trust: &'a TrustStore) -> Live<'a> {
        Live { authz: self, trust }
    }
}

/// How evidence is read from each signer: the version of each configured registry, the scheme
/// owner's for every other, and the members operators listed to drop.
pub fn evidence_readers(config: &Config) -> Readers {
    Readers {
        scheme_version: config.scheme_owner.scheme_version,
        versions: config
            .registries
            .values()
            .map(|r| (r.party_id.to_string(), r.scheme_version))
            .collect(),
        dropped: config.delegation.ignored_members.clone(),
        rs384_rs512: config.tokens.allow_rs384_rs512,
    }
}

/// The live gateway's evidence: verified through the trust store, asked of registries.
pub struct Live<'a> {
    authz: &'a Authorizer,
    trust: &'a TrustStore,
}

impl Live<'_> {
    /// The registry's chain, evaluated: within the caller's budget and the registry timeout.
    async fn ask_registry(&self, ask: &RegistryAsk<'_>) -> Result<Evaluated, Reject> {
        let inner = &self.authz.0;
        let (budget, per_minute) = &inner.registry_budget;
        if let Err(retry_after) = budget.take(ask.caller, std::time::Instant::now()) {
            inner
                .metrics
                .budget_exhausted
                .with_label_values(&["registry_calls"])
                .inc();
            return Err(Reject::TooManyRegistryCalls {
                per_minute: *per_minute,
                retry_after,
            });
        }
        // Each call ends by the deadline (counted as a registry timeout); the lookups between
        // them at the scheme owner too.
        let timeout = inner.registry_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let chain = inner.registries.chain(ask.chain, self.trust, deadline);
        let (registry, chain) = tokio::time::timeout_at(deadline, chain)
            .await
            .map_err(|_| Reject::Unavailable(Unavailable::RegistryTimeout(timeout)))??;
        let source = EvidenceSource::Registry {
            registry: registry.to_string(),
        };
        let Some(mut chain) = chain else {
            return Ok(no_policy(source));
        };
        if !self.trust.resolves_aliases() {
            return Ok(evaluate(
                &chain,
                ask.chain.request,
                source,
                Timestamp::now(),
            ));
        }
        // Its parties by the ids they stand for (3.0): issuers and subjects by the names the
        // request's parties' records list, service providers by those the gateway's lists.
        let mut aliases = ask.chain.aliases.clone();
        let request = ask.chain.request;
        let ours: Vec<&str> = request
            .service_providers
            .iter()
            .map(String::as_str)
            .collect();
        let mut parties = vec![request.policy_issuer.as_str(), &request.access_subject];
        parties.extend(ours.iter().copied());
        let links: Vec<&str> = chain
            .iter()
            .flat_map(|ev| [ev.policy_issuer.as_str(), &ev.target.access_subject])
            .collect();
        let providers: Vec<&str> = chain.iter().flat_map(|ev| ev.service_providers()).collect();
        self.trust.confirm(&links, &parties, &mut aliases).await?;
        self.trust.confirm(&providers, &ours, &mut aliases).await?;
        drop((links, providers));
        for ev in chain.iter_mut() {
            ev.resolve(&aliases)?;
        }
        Ok(evaluate(
            &chain,
            ask.chain.request,
            source,
            Timestamp::now(),
        ))
    }
}

#[async_trait]
impl Evidence for Live<'_> {
    async fn consumer_of_broker(
        &self,
        assertion: &str,
        caller: &str,
        now: Timestamp,
    ) -> Result<String, Reject> {
        let inner = &self.authz.0;
        let rules = self.authz.assertion_rules(caller);
        broker::original_consumer(assertion, &rules, self.trust, &inner.replay, now).await
    }

    async fn look_up(&self, parties: &[&str], aliases: &mut Aliases) -> Result<(), Reject> {
        Ok(self.trust.look_up(parties, aliases).await?)
    }

    async fn confirm(
        &self,
        names: &[&str],
        listed_by: &[&str],
        aliases: &mut Aliases,
    ) -> Result<(), Reject> {
        Ok(self.trust.confirm(names, listed_by, aliases).await?)
    }

    fn admit_owner(&self, caller: &str, owner: &str) -> Result<(), Reject> {
        if self.trust.knows(owner) {
            return Ok(());
        }
        let named = self
            .authz
            .0
            .named_owners
            .get_with(caller.to_string(), Default::default);
        if named.fetch_add(1, Ordering::Relaxed) >= NEW_OWNERS_PER_MINUTE {
            return Err(Reject::TooManyNewOwners {
                per_minute: NEW_OWNERS_PER_MINUTE,
            });
        }
        Ok(())
    }

    async fn header(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        now: Timestamp,
    ) -> Result<Assessed, Reject> {
        let inner = &self.authz.0;
        inner
            .header_evidence
            .chain(tokens, expected, &inner.registries, self.trust, now)
            .await
    }

    async fn header_stands(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        kept: (&Arc<Evaluated>, &ArcSwapOption<Judged>),
        now: Timestamp,
    ) -> bool {
        let inner = &self.authz.0;
        let sources = (&inner.registries, self.trust);
        let header = &inner.header_evidence;
        header.stands(tokens, expected, kept, sources, now).await
    }

    async fn registry(&self, ask: &RegistryAsk<'_>) -> Result<Assessed, Reject> {
        let key = DecisionKey::of(ask);
        let decisions = &self.authz.0.decisions;
        decisions
            .get_or_decide(key, || Box::pin(self.ask_registry(ask)))
            .await
    }
}
