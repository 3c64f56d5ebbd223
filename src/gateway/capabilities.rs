//! GET /capabilities: a signed `capabilities_token` listing the public features (capabilities and
//! token) to everyone and the advertised routes to token holders. Signed tokens are cached per
//! audience, so answering costs no RSA operation per request.

use crate::config::model::{Auth, Config};
use crate::gateway::decision::route::RouteTable;
use crate::gateway::reject::{Answer, Reject, Unavailable};
use crate::scheme::capabilities::{CapabilitiesInfo, Feature};
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::version::SchemeVersion;
use crate::scheme::vocabulary::{member, Role};
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use http::Method;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The lifetime of a capabilities token, as the scheme's examples use.
const TOKEN_LIFETIME: i64 = 30;
/// How long a signed token is served from the cache: a client always gets one with at least half
/// of its lifetime left.
const CACHE_TTL: Duration = Duration::from_secs(15);
/// The size of the cache of signed tokens, in bytes.
const CACHE_BYTES: u64 = 8 << 20;

pub struct Capabilities {
    public: CapabilitiesInfo,
    restricted: CapabilitiesInfo,
    /// The version the answer is written in: 3.0's `capabilitiesToken` and `capabilitiesInfo`, or
    /// `capabilities_token` with the 1.9 payload.
    version: SchemeVersion,
    signing: SigningIdentity,
    cache: moka::sync::Cache<Option<String>, Arc<str>>,
}

/// A stable feature id for a route, derived from its name.
fn route_feature_id(name: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, name.as_bytes());
    let h = hex::encode_upper(&d.as_ref()[..16]);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

impl Capabilities {
    pub fn new(config: &Config, routes: &RouteTable) -> Self {
        let base = config.public_url.trim_end_matches('/');
        let advertised: Vec<Feature> = routes
            .routes()
            .iter()
            .filter(|r| r.advertise)
            .map(|r| {
                let description = if r.description.is_empty() {
                    format!(
                        "{} {}",
                        methods_of(r.methods.as_deref()),
                        r.pattern.as_str()
                    )
                } else {
                    r.description.clone()
                };
                let needs_token = !matches!(r.auth, Auth::Public);
                Feature::at(
                    &route_feature_id(&r.name),
                    &r.name,
                    &description,
                    base,
                    r.pattern.as_str(),
                    needs_token,
                )
            })
            .collect();
        let info = |restricted: Option<Vec<Feature>>| {
            CapabilitiesInfo::of_party(
                &config.scheme,
                config.identity.party_id.as_str(),
                Role::ServiceProvider,
                base,
                restricted,
            )
        };
        Capabilities {
            public: info(None),
            restricted: info(Some(advertised)),
            version: config.scheme_version,
            signing: config.identity.signing.clone(),
            cache: moka::sync::Cache::builder()
                .max_capacity(CACHE_BYTES)
                .weigher(|aud: &Option<String>, token: &Arc<str>| {
                    let len = aud.as_ref().map_or(0, String::len) + token.len() + 64;
                    u32::try_from(len).unwrap_or(u32::MAX)
                })
                .time_to_live(CACHE_TTL)
                .build(),
        }
    }

    /// The signed token for an audience (None: anonymous), from the cache when possible.
    fn token(&self, audience: Option<&str>, metrics: &Metrics) -> Result<Arc<str>, Reject> {
        let key = audience.map(str::to_string);
        let mut signed = false;
        let result = self.cache.try_get_with(key, || {
            signed = true;
            let info = if audience.is_some() {
                &self.restricted
            } else {
                &self.public
            };
            let sub = self.signing.party_id().to_string();
            // 3.0's token skeleton requires `aud`: an anonymous answer is addressed to the
            // provider itself, the one party it is known to be for.
            let claims = info.token_claims(self.version);
            let aud = match self.version.camel_case() {
                true => audience.or(Some(sub.as_str())),
                false => audience,
            };
            self.signing
                .sign_token(&sub, aud, &claims, Timestamp::now(), TOKEN_LIFETIME)
                .map(Arc::from)
        });
        metrics.cache_lookups("capabilities").count(!signed);
        result.map_err(|e| Reject::Unavailable(Unavailable::Signing((*e).clone())))
    }
}

fn methods_of(methods: Option<&[Method]>) -> String {
    match methods {
        None => "any method".into(),
        Some(ms) => ms.iter().map(Method::as_str).collect::<Vec<_>>().join("/"),
    }
}

/// Answer GET /capabilities for the caller the decision authenticated (None: anonymous); 405 for
/// another method.
pub fn answer(
    method: &Method,
    capabilities: &Capabilities,
    caller: Option<&str>,
    metrics: &Metrics,
) -> Result<Answer, Reject> {
    if method != Method::GET && method != Method::HEAD {
        return Err(Reject::MethodNotAllowed(vec![Method::GET]));
    }
    let token = capabilities.token(caller, metrics)?;
    let name = match capabilities.version.camel_case() {
        true => member::CAPABILITIES_3,
        false => member::CAPABILITIES,
    };
    Ok(Answer::ok(json!({ name: &*token })))
}
