//! One local call made into a call to a provider: its route found on the canonical path, a slot
//! among the provider's calls in flight, the body held within its bound, our token at the
//! provider (cached until shortly before it expires), the evidence the route brings (asked of the
//! data owner's registry as us, kept within its validity), then the call, sent once more with a
//! fresh token when the provider says ours is invalid. What fails is answered with its reason;
//! nothing is forwarded without what its route requires.

use super::exchange::{
    forwarded_headers, insert, issuer_of, one_of, relay, says_invalid_token, Call,
};
use super::log_line::{self, Line};
use super::metrics::EgressMetrics;
use super::refusal::Refusal;
use super::route::{self, Asked};
use crate::config::defaults;
use crate::config::egress::{EgressConfig, EvidenceAsk, Provider};
use crate::config::model::{PreviousSteps, Registry};
use crate::gateway::decision::log::DecisionLog;
use crate::peers::forwarded::ForwardedAssertions;
use crate::peers::registry::{Consent, RegistryClient};
use crate::peers::scheme_owner::TrustStore;
use crate::peers::token_cache::TokenCache;
use crate::peers::{join, PeerClient, PeerError};
use crate::request::path::canonical_path;
use crate::request::query::Query;
use crate::request::Ambiguities;
use crate::scheme::evaluation::evaluate;
use crate::scheme::evidence_token::{EvidenceTokenRules, Readers};
use crate::scheme::jwt::{self, AlgorithmPolicy};
use crate::scheme::mask::AccessRequest;
use crate::scheme::verdict::Decision;
use crate::scheme::vocabulary::{
    BROKER_HEADER, BROKER_HEADER_3, EVIDENCE_HEADER, EVIDENCE_HEADER_3,
};
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Limited};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The bytes of evidence kept at once (a delegation token is a few KiB); past it, the least used
/// go first.
const EVIDENCE_KEPT_BYTES: u64 = 64 << 20;

/// How often a provider's token is renewed after it refused one, at most.
const RENEWAL_INTERVAL: Duration = Duration::from_secs(10);

/// The evidence a route brings, while it may be presented.
#[derive(Clone)]
struct Brought {
    token: Arc<str>,
    ttl: Duration,
}

/// What an entry of the evidence kept holds, in bytes: its key's values (taken from calls) and
/// the token.
fn weight((route, asked): &(String, AccessRequest), brought: &Brought) -> u32 {
    let values: usize = asked
        .identifiers
        .iter()
        .chain(asked.operands.values().flatten())
        .map(|v| v.len() + 24)
        .sum();
    u32::try_from(route.len() + values + brought.token.len() + 512).unwrap_or(u32::MAX)
}

struct ByValidity;

impl moka::Expiry<(String, AccessRequest), Brought> for ByValidity {
    fn expire_after_create(
        &self,
        _: &(String, AccessRequest),
        value: &Brought,
        _: std::time::Instant,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// The consumer's side of one configuration: what every call shares.
pub struct Outgoing {
    config: Arc<EgressConfig>,
    http: reqwest::Client,
    peer: PeerClient,
    tokens: TokenCache,
    trust: Arc<TrustStore>,
    registries: RegistryClient,
    forwarded: Arc<ForwardedAssertions>,
    brought: moka::future::Cache<(String, AccessRequest), Brought>,
    slots: BTreeMap<String, Arc<Semaphore>>,
    /// Providers whose token was renewed after a refusal within `RENEWAL_INTERVAL`.
    renewed: moka::sync::Cache<String, ()>,
    metrics: EgressMetrics,
    log: Option<Arc<DecisionLog>>,
}

impl Outgoing {
    /// The consumer's side of `config`. What the `previous` configuration's holds is kept where
    /// this one asks the same peers as the same party: the trusted list (so that readiness does
    /// not wait for the next refresh), our tokens, and each provider's calls in flight (so that a
    /// reload does not let twice its `max_concurrent` through).
    pub fn new(
        config: Arc<EgressConfig>,
        scheme_metrics: &Metrics,
        metrics: EgressMetrics,
        log: Option<Arc<DecisionLog>>,
        previous: Option<&Outgoing>,
    ) -> Result<Self, String> {
        let same_party = previous.filter(|p| {
            let (a, b) = (&p.config, &config);
            a.identity.party_id == b.identity.party_id
                && a.identity.key_pem == b.identity.key_pem
                && a.identity.chain_file == b.identity.chain_file
                && a.scheme == b.scheme
                && a.outbound.ca_pem == b.outbound.ca_pem
                && a.outbound.system_roots == b.outbound.system_roots
        });
        let longest = config
            .providers
            .values()
            .map(|p| p.timeout)
            .chain([config.scheme_owner.timeout, defaults::REGISTRY_TIMEOUT])
            .max()
            .unwrap_or(defaults::REGISTRY_TIMEOUT);
        let outbound = |e: crate::tls::TlsError| format!("outbound TLS: {e}");
        let peer = PeerClient::new(
            crate::tls::outbound_client(&config.outbound, longest).map_err(outbound)?,
            config.identity.signing.clone(),
            config.scheme.clone(),
        );
        // Calls to providers over HTTP/1.1, a connection each at a time, as proxies call their
        // upstreams: HTTP/2 would put every call in flight on one connection, which a provider
        // serves on one thread (measured: a fifth of the calls per second of HTTP/1.1 here).
        let http = crate::tls::outbound_builder(&config.outbound, longest)
            .map_err(outbound)?
            .http1_only()
            .build()
            .map_err(|e| format!("outbound HTTP client: {e}"))?;
        let allow_rs384_rs512 = config.tokens.allow_rs384_rs512;
        let trust = match same_party {
            Some(p)
                if p.config.scheme_owner == config.scheme_owner
                    && p.config.tokens == config.tokens =>
            {
                p.trust.clone()
            }
            _ => Arc::new(TrustStore::new(
                peer.clone(),
                config.scheme_owner.clone(),
                AlgorithmPolicy { allow_rs384_rs512 },
                config.tokens.leeway,
                scheme_metrics.clone(),
            )),
        };
        let readers = Readers {
            scheme_version: config.scheme_owner.scheme_version,
            versions: config
                .registries
                .values()
                .map(|r| (r.party_id.to_string(), r.scheme_version))
                .collect(),
            dropped: BTreeMap::new(),
            rs384_rs512: allow_rs384_rs512,
        };
        let rules = EvidenceTokenRules {
            leeway_secs: config.tokens.leeway.as_secs_f64(),
            max_age_secs: defaults::HEADER_EVIDENCE_MAX_AGE.as_secs_f64(),
        };
        let forwarded = Arc::new(ForwardedAssertions::new(None));
        let registries = RegistryClient::new(
            peer.clone(),
            readers,
            rules,
            config.registries.clone(),
            forwarded.clone(),
            scheme_metrics.clone(),
        );
        let slots = config
            .providers
            .values()
            .map(|p| {
                let kept = previous
                    .filter(|o| {
                        o.config.providers.get(&p.name).map(|q| q.max_concurrent)
                            == Some(p.max_concurrent)
                    })
                    .and_then(|o| o.slots.get(&p.name).cloned());
                let slots = kept.unwrap_or_else(|| Arc::new(Semaphore::new(p.max_concurrent)));
                (p.name.clone(), slots)
            })
            .collect();
        Ok(Outgoing {
            http,
            peer,
            tokens: same_party.map(|p| p.tokens.clone()).unwrap_or_default(),
            trust,
            registries,
            forwarded,
            brought: moka::future::Cache::builder()
                .weigher(weight)
                .max_capacity(EVIDENCE_KEPT_BYTES)
                .expire_after(ByValidity)
                .build(),
            slots,
            renewed: moka::sync::Cache::builder()
                .max_capacity(1024)
                .time_to_live(RENEWAL_INTERVAL)
                .build(),
            metrics,
            log,
            config,
        })
    }

    pub fn config(&self) -> &Arc<EgressConfig> {
        &self.config
    }

    pub fn trust(&self) -> &Arc<TrustStore> {
        &self.trust
    }

    pub fn log(&self) -> Option<&Arc<DecisionLog>> {
        self.log.as_ref()
    }

    /// The answer to a local call: the provider's, or ours saying why there is none.
    pub async fn answer(&self, req: Request<hyper::body::Incoming>) -> Response<Body> {
        let started = Instant::now();
        let mut line = Line::new(&req, self.config.identity.party_id.as_str());
        let response = match self.call(req, &mut line).await {
            Ok(response) => response,
            Err(refusal) => {
                self.metrics
                    .refusals
                    .with_label_values(&[refusal.code()])
                    .inc();
                tracing::info!(decision_id = %line.id, reason = refusal.code(), "{refusal}");
                let response = refusal.answer(&line.id);
                line.refusal = Some(refusal);
                response
            }
        };
        if let Some(log) = &self.log {
            log.write_with(|out, settings| {
                log_line::write(
                    out,
                    &line,
                    response.status().as_u16(),
                    started.elapsed(),
                    settings,
                )
            });
        }
        response
    }

    async fn call(
        &self,
        req: Request<hyper::body::Incoming>,
        line: &mut Line,
    ) -> Result<Response<Body>, Refusal> {
        let (parts, body) = req.into_parts();
        // An HTTP/2 request names its scheme and authority: only HTTP/1's target can be a URL.
        let whole_url = parts.uri.scheme().is_some() || parts.uri.authority().is_some();
        if parts.version < http::Version::HTTP_2 && whole_url {
            return Err(Refusal::AbsoluteTarget);
        }
        let canonical =
            canonical_path(parts.uri.path()).map_err(|e| Refusal::BadPath(e.to_string()))?;
        let path = canonical.path;
        line.path.clone_from(&path);
        let matched = route::find(&self.config.routes, &parts.method, &path)?;
        let route = matched.route;
        line.route = Some(route.name.clone());
        let provider = &self.config.providers[&route.provider];
        line.provider = Some((provider.name.clone(), provider.party_id.to_string()));
        let assertion = one_of(&parts.headers, BROKER_HEADER)?;
        let given_evidence = one_of(&parts.headers, EVIDENCE_HEADER)?;
        let name = || route.name.clone();
        match (route.broker, &assertion) {
            (true, None) => return Err(Refusal::NoConsumerAssertion { route: name() }),
            (false, Some(_)) => return Err(Refusal::NotABroker { route: name() }),
            _ => {}
        }
        if route.evidence.is_some() && given_evidence.is_some() {
            return Err(Refusal::EvidenceGiven { route: name() });
        }
        line.acting_for = assertion.as_deref().and_then(issuer_of);
        let deadline = tokio::time::Instant::now() + provider.timeout;
        let slot = self.slot(provider)?;
        let body = self
            .read_body(body, &parts.headers, deadline, provider)
            .await?;
        let (token, fresh) = self.token(provider, deadline, line).await?;
        let evidence = match &route.evidence {
            Some(ask) => {
                let query = Query::parse(parts.uri.query())
                    .map_err(|e| Refusal::BadPath(format!("the query: {e}")))?;
                // The evidence is asked for one reading of the call: one that servers read
                // differently is refused, as the gateway refuses it.
                let read_two_ways = canonical.ambiguities.union(query.ambiguities);
                if let Some(a) = read_two_ways.first_not_in(Ambiguities::default()) {
                    return Err(Refusal::Ambiguous(a.to_string()));
                }
                let asked = Asked {
                    matched: &matched,
                    ask,
                    method: &parts.method,
                    query: &query,
                    headers: &parts.headers,
                    consumer: self.config.identity.party_id.as_str(),
                    provider: provider.party_id.as_str(),
                    scheme: &self.config.scheme,
                };
                Some(
                    self.evidence(&asked, provider.timeout, deadline, line)
                        .await?,
                )
            }
            None => given_evidence.map(Arc::from),
        };
        let mut headers = forwarded_headers(&parts.headers);
        let camel = provider.scheme_version.camel_case();
        if let Some(evidence) = &evidence {
            let name = if camel {
                EVIDENCE_HEADER_3
            } else {
                EVIDENCE_HEADER
            };
            insert(&mut headers, name, evidence)?;
        }
        if let Some(assertion) = &assertion {
            let name = if camel {
                BROKER_HEADER_3
            } else {
                BROKER_HEADER
            };
            insert(&mut headers, name, assertion)?;
        }
        let url = match parts.uri.query() {
            Some(q) => format!("{}?{q}", join(&provider.url, &path)),
            None => join(&provider.url, &path),
        };
        let outgoing = Call {
            method: parts.method,
            url,
            headers,
            body,
            deadline,
        };
        let started = Instant::now();
        let in_flight = InFlight::new(self.metrics.in_flight.with_label_values(&[&provider.name]));
        let sent = self.send(&outgoing, provider, token, fresh, line).await;
        drop(in_flight);
        let answer = sent.map_err(|e| Refusal::of_provider(&provider.name, e))?;
        line.provider_decision_id = answer
            .headers()
            .get("x-decision-id")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.chars().take(64).collect());
        self.metrics
            .latency
            .with_label_values(&[&provider.name])
            .observe(started.elapsed().as_secs_f64());
        self.metrics
            .answers
            .with_label_values(&[&provider.name, answer.status().as_str()])
            .inc();
        Ok(relay(answer, slot, deadline))
    }

    /// The body, held whole within `max_body_bytes` (it may be sent twice).
    async fn read_body(
        &self,
        body: hyper::body::Incoming,
        headers: &HeaderMap,
        deadline: tokio::time::Instant,
        provider: &Provider,
    ) -> Result<Bytes, Refusal> {
        let limit = self.config.consumer.max_body_bytes;
        let declared = headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(Refusal::BodyTooLarge { limit });
        }
        let read = tokio::time::timeout_at(deadline, Limited::new(body, limit).collect()).await;
        match read {
            Err(_) => Err(Refusal::ProviderTimeout {
                provider: provider.name.clone(),
            }),
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                Err(Refusal::BodyTooLarge { limit })
            }
            Ok(Err(e)) => Err(Refusal::BodyUnreadable(e.to_string())),
        }
    }

    /// A slot among the provider's calls in flight; none free is answered at once.
    fn slot(&self, provider: &Provider) -> Result<tokio::sync::OwnedSemaphorePermit, Refusal> {
        self.slots[&provider.name]
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refusal::ProviderBusy {
                provider: provider.name.clone(),
                max: provider.max_concurrent,
            })
    }

    /// Our token at the provider, and whether it was fetched for this call.
    async fn token(
        &self,
        provider: &Provider,
        deadline: tokio::time::Instant,
        line: &mut Line,
    ) -> Result<(Arc<str>, bool), Refusal> {
        let url = join(&provider.url, &provider.token_path);
        let got = tokio::time::timeout_at(
            deadline,
            self.tokens
                .get_fresh(&self.peer, &url, provider.party_id.as_str()),
        )
        .await;
        let result = match got {
            Err(_) => Err(Refusal::ProviderTimeout {
                provider: provider.name.clone(),
            }),
            Ok(Err(e)) => Err(Refusal::of_provider(&provider.name, e)),
            Ok(Ok(got)) => Ok(got),
        };
        let label = match &result {
            Ok((_, true)) => "fetched",
            Ok((_, false)) => "cached",
            Err(_) => "failed",
        };
        line.token = Some(label);
        self.metrics
            .tokens
            .with_label_values(&[&provider.name, label])
            .inc();
        result
    }

    /// The call, and once more with a fresh token when the provider answers 401 `invalid_token`
    /// to one taken from the cache: at most once per `RENEWAL_INTERVAL` for a provider, so that
    /// one refusing every token costs no signature per call (its 401 is then the answer).
    async fn send(
        &self,
        call: &Call,
        provider: &Provider,
        token: Arc<str>,
        fresh: bool,
        line: &mut Line,
    ) -> Result<reqwest::Response, PeerError> {
        let answer = call.send(&self.http, &token).await?;
        if fresh || !says_invalid_token(&answer) {
            return Ok(answer);
        }
        if !self
            .renewed
            .entry_by_ref(&provider.name)
            .or_insert(())
            .is_fresh()
        {
            line.token = Some("refused");
            return Ok(answer);
        }
        let url = join(&provider.url, &provider.token_path);
        let audience = provider.party_id.as_str();
        self.tokens.forget_refused(&url, audience, &token).await;
        let renewed = tokio::time::timeout_at(
            call.deadline,
            self.tokens.get_fresh(&self.peer, &url, audience),
        )
        .await
        .map_err(|_| PeerError::Timeout { url: url.clone() })?;
        let label = if renewed.is_ok() { "renewed" } else { "failed" };
        self.metrics
            .tokens
            .with_label_values(&[&provider.name, label])
            .inc();
        let (token, _) = renewed?;
        line.token = Some("renewed");
        call.send(&self.http, &token).await
    }

    /// The evidence the route brings for this call: kept, or asked of the data owner's registry
    /// (our client assertion as the previous step where the registry wants one: addressed to its
    /// caller, us, as a registry checks the last step of a chain of consent) and evaluated: a
    /// registry's Deny is ours.
    async fn evidence(
        &self,
        asked: &Asked<'_>,
        fetch_within: Duration,
        deadline: tokio::time::Instant,
        line: &mut Line,
    ) -> Result<Arc<str>, Refusal> {
        let ask: &EvidenceAsk = asked.ask;
        let route = &asked.matched.route.name;
        let registry = &self.config.registries[&ask.registry];
        line.evidence = Some((
            registry.party_id.to_string(),
            ask.policy_issuer.to_string(),
            "fetched",
        ));
        let request = asked.request()?;
        let fetched = AtomicBool::new(false);
        // Kept by everything the evaluation read. A fetch has a deadline of its own: callers that
        // wait for it each stop at theirs.
        let key = (route.clone(), request.clone());
        let fetch = self.brought.try_get_with(key, async {
            fetched.store(true, Ordering::Relaxed);
            let within = tokio::time::Instant::now() + fetch_within;
            self.ask_registry(&request, (registry, ask.cache_ttl), within)
                .await
        });
        let got = match tokio::time::timeout_at(deadline, fetch).await {
            Ok(got) => got.map_err(|e| (*e).clone()),
            Err(_) => Err(Refusal::RegistryFailed {
                registry: registry.name.clone(),
                detail: "no answer in time".into(),
            }),
        };
        let label = match &got {
            Ok(_) if fetched.load(Ordering::Relaxed) => "fetched",
            Ok(_) => "cached",
            Err(Refusal::RegistryDenied { .. }) => "denied",
            Err(_) => "failed",
        };
        if let Some(e) = &mut line.evidence {
            e.2 = label;
        }
        self.metrics
            .evidence
            .with_label_values(&[route, label])
            .inc();
        got.map(|b| b.token)
    }

    async fn ask_registry(
        &self,
        request: &AccessRequest,
        (registry, cache_ttl): (&Registry, Duration),
        deadline: tokio::time::Instant,
    ) -> Result<Brought, Refusal> {
        let now = Timestamp::now();
        let us = self.config.identity.party_id.as_str();
        if registry.previous_steps == PreviousSteps::ConsumerAssertion {
            let assertion = self
                .config
                .identity
                .signing
                .client_assertion(us, now)
                .map_err(|e| Refusal::CannotSign(e.to_string()))?;
            let exp = now.as_f64() + jwt::ASSERTION_LIFETIME as f64;
            // Held in memory only: no shared store to fail.
            let _ = self.forwarded.keep(us, &assertion, exp, now).await;
        }
        let answer = self
            .registries
            .evidence_token(registry, request, Consent::Consumer, &self.trust, deadline)
            .await
            .map_err(|e| Refusal::of_registry(&registry.name, e))?;
        let denied = |reason: String| Refusal::RegistryDenied {
            registry: registry.party_id.to_string(),
            reason,
        };
        let Some((token, evidence)) = answer else {
            return Err(denied("it holds no policy for the call (404)".into()));
        };
        // Judged when the answer came, with the clock leeway: a registry stamps the evidence's
        // `notBefore` with its own clock, at the moment it answers.
        let answered = Timestamp::now().plus_secs(self.config.tokens.leeway.as_secs_f64());
        if let Decision::Deny(reason) = evaluate(&evidence, request, answered) {
            return Err(denied(reason.to_string()));
        }
        let exp = jwt::decode(
            &token,
            AlgorithmPolicy {
                allow_rs384_rs512: true,
            },
        )
        .ok()
        .and_then(|t| t.time_claim("exp"))
        .unwrap_or(now.as_f64());
        let left = |until: f64| Duration::from_secs_f64((until - now.as_f64()).max(0.0));
        // Presented until shortly before the token expires, never past the evidence's end.
        let ttl = cache_ttl
            .min(left(exp).mul_f64(0.9))
            .min(left(evidence.not_on_or_after as f64));
        Ok(Brought {
            token: Arc::from(token.as_str()),
            ttl,
        })
    }
}

/// A call in flight to a provider, counted until it ends however it ends.
struct InFlight(prometheus::IntGauge);

impl InFlight {
    fn new(gauge: prometheus::IntGauge) -> Self {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}
