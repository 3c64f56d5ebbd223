//! One local call made into a call to a provider: its route found on the canonical path, the
//! body held within its bound, a slot among the provider's calls in flight, our token at the
//! provider (cached until shortly before it expires), the evidence the route brings (asked of the
//! data owner's registry as we, kept within its validity), then the call, sent once more with a
//! fresh token when the provider says ours is invalid. What fails is answered with its reason;
//! nothing is forwarded without what its route requires.

use super::log_line::{self, Line};
use super::metrics::EgressMetrics;
use super::refusal::Refusal;
use super::route::{self, Asked};
use crate::config::defaults;
use crate::config::egress::{EgressConfig, EvidenceAsk, Provider};
use crate::config::model::{PreviousSteps, Registry};
use crate::gateway::decision::log::DecisionLog;
use crate::gateway::decision_api::forwarded::is_of_the_hop;
use crate::peers::forwarded::ForwardedAssertions;
use crate::peers::registry::{Consent, RegistryClient};
use crate::peers::scheme_owner::TrustStore;
use crate::peers::token_cache::TokenCache;
use crate::peers::{join, PeerClient};
use crate::request::path::normalize_path;
use crate::request::query::Query;
use crate::scheme::evaluation::evaluate;
use crate::scheme::evidence_token::{EvidenceTokenRules, Readers};
use crate::scheme::jwt::{self, AlgorithmPolicy};
use crate::scheme::mask::AccessRequest;
use crate::scheme::verdict::Decision;
use crate::scheme::vocabulary::{
    BROKER_HEADER, BROKER_HEADERS, BROKER_HEADER_3, CREDENTIAL_HEADERS, EVIDENCE_HEADER,
    EVIDENCE_HEADERS, EVIDENCE_HEADER_3,
};
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use axum::body::Body;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Limited};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Evidence kept for routes' masks at once.
const EVIDENCE_KEPT: u64 = 10_000;

/// The evidence a route brings, while it may be presented.
#[derive(Clone)]
struct Brought {
    token: Arc<str>,
    ttl: Duration,
}

struct ByValidity;

impl moka::Expiry<String, Brought> for ByValidity {
    fn expire_after_create(
        &self,
        _: &String,
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
    brought: moka::future::Cache<String, Brought>,
    slots: BTreeMap<String, Arc<Semaphore>>,
    metrics: EgressMetrics,
    log: Option<Arc<DecisionLog>>,
}

impl Outgoing {
    pub fn new(
        config: Arc<EgressConfig>,
        scheme_metrics: &Metrics,
        metrics: EgressMetrics,
        log: Option<Arc<DecisionLog>>,
    ) -> Result<Self, String> {
        let longest = config
            .providers
            .values()
            .map(|p| p.timeout)
            .chain([config.scheme_owner.timeout, defaults::REGISTRY_TIMEOUT])
            .max()
            .unwrap_or(defaults::REGISTRY_TIMEOUT);
        let http = crate::tls::outbound_client(&config.outbound, longest)
            .map_err(|e| format!("outbound TLS: {e}"))?;
        let peer = PeerClient::new(
            http.clone(),
            config.identity.signing.clone(),
            config.scheme.clone(),
        );
        let allow_rs384_rs512 = config.tokens.allow_rs384_rs512;
        let trust = Arc::new(TrustStore::new(
            peer.clone(),
            config.scheme_owner.clone(),
            AlgorithmPolicy { allow_rs384_rs512 },
            config.tokens.leeway,
            scheme_metrics.clone(),
        ));
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
            .map(|p| (p.name.clone(), Arc::new(Semaphore::new(p.max_concurrent))))
            .collect();
        Ok(Outgoing {
            http,
            peer,
            tokens: TokenCache::default(),
            trust,
            registries,
            forwarded,
            brought: moka::future::Cache::builder()
                .max_capacity(EVIDENCE_KEPT)
                .expire_after(ByValidity)
                .build(),
            slots,
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
                let mut response = Response::builder()
                    .status(refusal.status())
                    .header(http::header::CONTENT_TYPE, "application/json");
                if matches!(refusal, Refusal::ProviderBusy { .. }) {
                    response = response.header(http::header::RETRY_AFTER, "1");
                }
                let response = response
                    .body(Body::from(refusal.body(&line.id)))
                    .unwrap_or_default();
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
        if parts.uri.scheme().is_some() || parts.uri.authority().is_some() {
            return Err(Refusal::AbsoluteTarget(
                parts.uri.to_string().chars().take(200).collect(),
            ));
        }
        let path = normalize_path(parts.uri.path()).map_err(|e| Refusal::BadPath(e.to_string()))?;
        line.path.clone_from(&path);
        let matched = route::find(&self.config.routes, &parts.method, &path)?;
        let route = matched.route;
        line.route = Some(route.name.clone());
        let provider = &self.config.providers[&route.provider];
        line.provider = Some((provider.name.clone(), provider.party_id.to_string()));
        let assertion = one_of(
            &parts.headers,
            &BROKER_HEADERS,
            "service_consumer_assertion",
        )?;
        let given_evidence = one_of(&parts.headers, &EVIDENCE_HEADERS, "delegation_evidence")?;
        if route.broker && assertion.is_none() {
            return Err(Refusal::NoConsumerAssertion {
                route: route.name.clone(),
            });
        }
        if route.evidence.is_some() && given_evidence.is_some() {
            return Err(Refusal::EvidenceGiven {
                route: route.name.clone(),
            });
        }
        line.acting_for = assertion.as_deref().and_then(issuer_of);
        let deadline = tokio::time::Instant::now() + provider.timeout;
        let body = self
            .read_body(body, &parts.headers, deadline, provider)
            .await?;
        let slot = self.slot(provider)?;
        let (token, fresh) = self.token(provider, deadline, line).await?;
        let evidence = match &route.evidence {
            Some(ask) => {
                let query = Query::parse(parts.uri.query())
                    .map_err(|e| Refusal::BadPath(format!("the query: {e}")))?;
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
                Some(self.evidence(&asked, deadline, line).await?)
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
        let gauge = self.metrics.in_flight.with_label_values(&[&provider.name]);
        gauge.inc();
        let sent = self.send(&outgoing, provider, token, fresh, line).await;
        gauge.dec();
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
        Ok(relay(answer, slot))
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
    /// to one taken from the cache.
    async fn send(
        &self,
        call: &Call,
        provider: &Provider,
        token: Arc<str>,
        fresh: bool,
        line: &mut Line,
    ) -> Result<reqwest::Response, crate::peers::PeerError> {
        let answer = call.send(&self.http, &token).await?;
        if fresh || !says_invalid_token(&answer) {
            return Ok(answer);
        }
        let url = join(&provider.url, &provider.token_path);
        let audience = provider.party_id.as_str();
        self.tokens.forget(&url, audience).await;
        let renewed = tokio::time::timeout_at(
            call.deadline,
            self.tokens.get_fresh(&self.peer, &url, audience),
        )
        .await
        .map_err(|_| crate::peers::PeerError::Timeout { url: url.clone() })?;
        let (token, _) = match renewed {
            Ok(t) => t,
            Err(e) => {
                self.metrics
                    .tokens
                    .with_label_values(&[&provider.name, "failed"])
                    .inc();
                return Err(e);
            }
        };
        self.metrics
            .tokens
            .with_label_values(&[&provider.name, "renewed"])
            .inc();
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
        let mask =
            serde_json::to_string(&request.to_mask(registry.scheme_version)).unwrap_or_default();
        let fetched = AtomicBool::new(false);
        let got = self
            .brought
            .try_get_with(format!("{route} {mask}"), async {
                fetched.store(true, Ordering::Relaxed);
                self.ask_registry(&request, (registry, ask.cache_ttl), deadline)
                    .await
            })
            .await
            .map_err(|e| (*e).clone());
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
        if let Decision::Deny(reason) = evaluate(&evidence, request, now) {
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

/// The call to the provider, as it may be sent twice.
struct Call {
    method: http::Method,
    url: String,
    headers: HeaderMap,
    body: Bytes,
    deadline: tokio::time::Instant,
}

impl Call {
    async fn send(
        &self,
        http: &reqwest::Client,
        token: &str,
    ) -> Result<reqwest::Response, crate::peers::PeerError> {
        let left = self
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(crate::peers::PeerError::Timeout {
                url: self.url.clone(),
            });
        }
        http.request(self.method.clone(), &self.url)
            .headers(self.headers.clone())
            .bearer_auth(token)
            .body(self.body.clone())
            .timeout(left)
            .send()
            .await
            .map_err(|e| crate::peers::PeerError::from_reqwest(&self.url, e))
    }
}

/// The one value of a header the scheme names two ways (or none); both, or one twice, is refused.
fn one_of(
    headers: &HeaderMap,
    names: &[&str],
    header: &'static str,
) -> Result<Option<String>, Refusal> {
    let mut values = names.iter().flat_map(|n| headers.get_all(*n));
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => v
            .to_str()
            .map(|v| Some(v.trim().to_string()))
            .map_err(|_| Refusal::BadHeader { header }),
        (Some(_), Some(_)) => Err(Refusal::Repeated { header }),
    }
}

/// Who a consumer's assertion says it is (its `iss`, unverified: the provider verifies it), for
/// the log.
fn issuer_of(assertion: &str) -> Option<String> {
    let decoded = jwt::decode(
        assertion,
        AlgorithmPolicy {
            allow_rs384_rs512: true,
        },
    )
    .ok()?;
    decoded
        .str_claim("iss")
        .map(|iss| iss.chars().take(200).collect())
}

/// The local call's headers the provider gets: not those of the hop (nor those `Connection`
/// names), not its credentials (we authenticate, and attach the scheme's headers ourselves).
fn forwarded_headers(from: &HeaderMap) -> HeaderMap {
    let named_by_connection: Vec<String> = from
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut headers = HeaderMap::with_capacity(from.len());
    for (name, value) in from {
        let n = name.as_str();
        let dropped = is_of_the_hop(n)
            || named_by_connection.iter().any(|c| c == n)
            || n == "authorization"
            || n == "proxy-authorization"
            || CREDENTIAL_HEADERS.iter().any(|c| c.eq_ignore_ascii_case(n));
        if !dropped {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

fn insert(headers: &mut HeaderMap, name: &'static str, value: &str) -> Result<(), Refusal> {
    let bad = || Refusal::BadHeader { header: name };
    let value = HeaderValue::from_str(value).map_err(|_| bad())?;
    let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
    headers.insert(name, value);
    Ok(())
}

/// Whether the provider refused our token as invalid (RFC 6750 `invalid_token`).
fn says_invalid_token(answer: &reqwest::Response) -> bool {
    answer.status() == http::StatusCode::UNAUTHORIZED
        && answer
            .headers()
            .get_all(http::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.to_ascii_lowercase().contains("invalid_token"))
}

/// The provider's answer to the local client: its status, its headers but those of the hop, its
/// body as it comes; the slot among the provider's calls is held until the body has passed.
fn relay(answer: reqwest::Response, slot: tokio::sync::OwnedSemaphorePermit) -> Response<Body> {
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        let n = name.as_str();
        if n == "content-length" || !is_of_the_hop(n) {
            response = response.header(name, value);
        }
    }
    let stream = answer.bytes_stream().map(move |chunk| {
        let _held = &slot;
        chunk
    });
    response.body(Body::from_stream(stream)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_gets_no_header_of_the_hop_and_no_credential_of_the_client() {
        let mut from = HeaderMap::new();
        for (name, value) in [
            ("host", "127.0.0.1:8181"),
            ("connection", "keep-alive, X-Secret"),
            ("x-secret", "hop"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("authorization", "Bearer theirs"),
            ("proxy-authorization", "Basic x"),
            ("delegation_evidence", "e"),
            ("delegationevidence", "e"),
            ("service_consumer_assertion", "a"),
            ("accept", "application/json"),
            ("x-trace", "1"),
            ("x-trace", "2"),
        ] {
            from.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_static(value),
            );
        }
        let kept = forwarded_headers(&from);
        let names: Vec<&str> = kept.keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["accept", "x-trace"]);
        assert_eq!(kept.get_all("x-trace").iter().count(), 2);
    }

    #[test]
    fn a_scheme_header_is_one_value_under_one_of_its_names() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            one_of(&headers, &EVIDENCE_HEADERS, "delegation_evidence"),
            Ok(None)
        );
        headers.insert("delegationevidence", HeaderValue::from_static(" e "));
        assert_eq!(
            one_of(&headers, &EVIDENCE_HEADERS, "delegation_evidence"),
            Ok(Some("e".into()))
        );
        headers.insert("delegation_evidence", HeaderValue::from_static("f"));
        assert_eq!(
            one_of(&headers, &EVIDENCE_HEADERS, "delegation_evidence"),
            Err(Refusal::Repeated {
                header: "delegation_evidence"
            })
        );
    }
}
