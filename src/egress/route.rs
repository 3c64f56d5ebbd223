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
        let operands = self
            .ask
            .operands
            .iter()
            .map(|(name, template)| (name.clone(), template.render(&values)))
            .collect();
        Ok(AccessRequest {
            policy_issuer: self.ask.policy_issuer.to_string(),
            access_subject: self.consumer.to_string(),
            service_providers: vec![self.provider.to_string()],
            resource_type: self.ask.resource_type.clone(),
            identifiers,
            attributes: self.ask.attributes.clone(),
            actions,
            required_licences: self.ask.licences.clone(),
            operands,
            // 3.0 evidence names no service provider: which one it binds to is the provider's
            // to judge, by the data owner's designation.
            unnamed_provider_accepted: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::pattern::PathPattern;

    fn route(name: &str, path: &str, methods: Option<&[Method]>) -> EgressRoute {
        EgressRoute {
            name: name.into(),
            path: PathPattern::parse(path).unwrap(),
            methods: methods.map(<[Method]>::to_vec),
            provider: "p".into(),
            broker: false,
            evidence: None,
        }
    }

    #[test]
    fn the_most_specific_route_that_allows_the_method_is_taken() {
        let routes = [
            route("all", "/{*rest}", None),
            route("read", "/api/{id}", Some(&[Method::GET])),
            route("first", "/api/{id}/x", Some(&[Method::GET])),
            route("second", "/api/{id}/x", Some(&[Method::PUT])),
        ];
        let name =
            |method: Method, path: &str| find(&routes, &method, path).map(|m| m.route.name.clone());
        assert_eq!(name(Method::GET, "/api/7").as_deref(), Ok("read"));
        assert_eq!(name(Method::POST, "/api/7").as_deref(), Ok("all"));
        assert_eq!(name(Method::PUT, "/api/7/x").as_deref(), Ok("second"));
        // A tail matches one segment or more, as in the gateway's rules: "/" needs its own route.
        assert_eq!(
            name(Method::GET, "/").map_err(|r| r.code()).err(),
            Some("no_route")
        );
        let m = find(&routes, &Method::GET, "/api/7").unwrap();
        assert_eq!(m.captures["id"], "7");
    }

    #[test]
    fn a_path_no_route_takes_and_a_method_none_allows_are_told_apart() {
        let routes = [route(
            "read",
            "/api/{id}",
            Some(&[Method::GET, Method::HEAD]),
        )];
        assert_eq!(
            find(&routes, &Method::DELETE, "/api/7").err(),
            Some(Refusal::MethodNotAllowed {
                route: "read".into(),
                allowed: "GET, HEAD".into(),
                method: "DELETE".into(),
            })
        );
        assert_eq!(
            find(&routes, &Method::GET, "/other")
                .err()
                .map(|r| r.code()),
            Some("no_route")
        );
    }
}
