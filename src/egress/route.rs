//! Which outgoing route a local call takes (the most specific path that allows its method, the
//! first of equally specific ones), and the access request its evidence is asked for: the route's
//! values rendered from the call's path, query and headers, us as the access subject and the
//! provider as the service provider.

use super::refusal::Refusal;
use crate::config::egress::{EgressRoute, EvidenceAsk};
use crate::request::query::Query;
use crate::request::template::RequestValues;
use crate::scheme::mask::AccessRequest;
use crate::scheme::vocabulary::Action;
use http::{HeaderMap, Method};
use std::collections::BTreeMap;

/// The route a call takes, and the path's captures.
pub struct Matched<'a> {
    pub route: &'a EgressRoute,
    pub captures: BTreeMap<String, String>,
}

/// The route for `method` on `path` (canonical).
pub fn find<'a>(
    routes: &'a [EgressRoute],
    method: &Method,
    path: &str,
) -> Result<Matched<'a>, Refusal> {
    let mut best: Option<Matched<'a>> = None;
    let mut path_only: Option<&EgressRoute> = None;
    for route in routes {
        let Some(captures) = route.path.matches(path) else {
            continue;
        };
        let allowed = route.methods.as_ref().is_none_or(|ms| ms.contains(method));
        if !allowed {
            if path_only.is_none_or(|o| route.path.specificity() > o.path.specificity()) {
                path_only = Some(route);
            }
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|b| route.path.specificity() > b.route.path.specificity())
        {
            best = Some(Matched { route, captures });
        }
    }
    match (best, path_only) {
        (Some(m), _) => Ok(m),
        (None, Some(route)) => Err(Refusal::MethodNotAllowed {
            route: route.name.clone(),
            allowed: route
                .methods
                .iter()
                .flatten()
                .map(Method::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            method: method.to_string(),
        }),
        (None, None) => Err(Refusal::NoRoute {
            method: method.to_string(),
            path: path.chars().take(200).collect(),
        }),
    }
}

/// What we ask the registry to grant, for this call.
pub struct Asked<'a> {
    pub matched: &'a Matched<'a>,
    pub ask: &'a EvidenceAsk,
    pub method: &'a Method,
    pub query: &'a Query,
    pub headers: &'a HeaderMap,
    /// Our id, the provider's, and the scheme's name (for the actions).
    pub consumer: &'a str,
    pub provider: &'a str,
    pub scheme: &'a str,
}

impl Asked<'_> {
    /// The access request of the call; a value the route takes that the call lacks is refused.
    pub fn request(&self) -> Result<AccessRequest, Refusal> {
        let values = RequestValues {
            captures: &self.matched.captures,
            query: self.query,
            headers: self.headers,
            body: None,
        };
        let mut identifiers = Vec::with_capacity(self.ask.identifiers.len());
        for template in &self.ask.identifiers {
            let rendered = template
                .render_each(&values)
                .filter(|vs| vs.iter().all(|v| !v.is_empty()))
                .ok_or_else(|| Refusal::MissingValue {
                    route: self.matched.route.name.clone(),
                    template: template.as_str().to_string(),
                })?;
            identifiers.extend(rendered);
        }
        let actions = match &self.ask.actions {
            Some(actions) => actions.clone(),
            // The configuration allows no method without an action here.
            None => Action::for_method(self.method)
                .map(|a| vec![a.qualified(self.scheme)])
                .unwrap_or_default(),
        };
        Ok(AccessRequest {
            policy_issuer: self.ask.policy_issuer.to_string(),
            access_subject: self.consumer.to_string(),
            service_providers: vec![self.provider.to_string()],
            resource_type: self.ask.resource_type.clone(),
            identifiers,
            attributes: self.ask.attributes.clone(),
            actions,
            required_licences: self.ask.licences.clone(),
            operands: BTreeMap::new(),
            unnamed_provider_accepted: false,
        })
    }
}
