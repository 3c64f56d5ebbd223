//! The route table (choosing the rule for a method and a normalised path, most specific first),
//! and the route stage: the request matched to its route, in the form the backend receives (the
//! path and query decided on, and nothing a hop would change after the decision), and the body
//! read for its rule.

use super::{Decision, Stage};
use crate::config::model::BodyRule;
use crate::config::model::Route;
use crate::gateway::reject::{HeaderRefusal, MissingValue, Reject};
use crate::request::body::{read_for_rule, ReadBody, Reading};
use crate::request::path::NormalPath;
use crate::request::pattern::SplitPath;
use crate::request::query::Query;
use crate::request::template::{BodyValues, RequestValues};
use crate::request::Ambiguity;
use http::Method;
use pingora::http::RequestHeader;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What the table says about a request.
pub enum Lookup {
    Found(Arc<Route>, BTreeMap<String, String>),
    /// The path is routed, but not for this method; the methods that are.
    MethodNotAllowed(Vec<Method>),
    NotFound,
}

/// The routes, most specific first, indexed by the literal segments their paths start with: a
/// request is matched only against the routes whose leading literals it has, in table order.
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    routes: Vec<Arc<Route>>,
    index: Node,
}

/// A node of the index: the routes whose literal prefix ends here, and the longer prefixes.
#[derive(Clone, Debug, Default)]
struct Node {
    routes: Vec<usize>,
    next: HashMap<String, Node>,
}

impl RouteTable {
    pub fn new(routes: Vec<Route>) -> Self {
        let mut routes: Vec<Arc<Route>> = routes.into_iter().map(Arc::new).collect();
        // Stable: among equally specific routes, file order decides.
        routes.sort_by_key(|r| std::cmp::Reverse(r.pattern.specificity()));
        let mut index = Node::default();
        for (i, route) in routes.iter().enumerate() {
            let node = route
                .pattern
                .literal_prefix()
                .fold(&mut index, |node, literal| {
                    node.next.entry(literal.to_string()).or_default()
                });
            node.routes.push(i);
        }
        RouteTable { routes, index }
    }

    pub fn routes(&self) -> &[Arc<Route>] {
        &self.routes
    }

    pub fn lookup(&self, method: &Method, path: &str) -> Lookup {
        let path = SplitPath::new(path);
        // The routes whose leading literals the path has, in table order.
        let mut candidates = self.index.routes.clone();
        let mut node = &self.index;
        for part in &path.parts {
            match node.next.get(*part) {
                Some(next) => {
                    candidates.extend_from_slice(&next.routes);
                    node = next;
                }
                None => break,
            }
        }
        candidates.sort_unstable();
        let mut allowed = Vec::new();
        for route in candidates.into_iter().map(|i| &self.routes[i]) {
            if let Some(captures) = route.pattern.matches_split(&path) {
                if route.allows(method) {
                    return Lookup::Found(route.clone(), captures);
                }
                allowed.extend(route.allowed_methods());
            }
        }
        if allowed.is_empty() {
            Lookup::NotFound
        } else {
            allowed.sort_by(|a, b| a.as_str().cmp(b.as_str()));
            allowed.dedup();
            Lookup::MethodNotAllowed(allowed)
        }
    }
}

/// The request matched to a route: the path, its captures and the query in the form decided on,
/// and the path and query the backend receives.
pub struct Routed {
    pub route: Arc<Route>,
    pub path: String,
    pub captures: BTreeMap<String, String>,
    pub query: Query,
    pub upstream_uri: http::Uri,
    /// The JSON body, read on a route whose rule reads it.
    pub body: Option<ReadBody>,
}

impl Routed {
    /// The values a rule reads: captures, query, headers and the body (its array's `element`).
    pub fn values<'a>(
        &'a self,
        headers: &'a http::HeaderMap,
        element: Option<usize>,
    ) -> RequestValues<'a> {
        RequestValues {
            captures: &self.captures,
            query: &self.query,
            headers,
            body: self.body.as_ref().map(|b| BodyValues {
                json: &b.json,
                element,
            }),
        }
    }
}

/// The route stage: the route that takes the request, with its identifiers in the route's case,
/// in no form the route does not accept (a body on a GET or HEAD among them), and the URI the
/// backend receives.
pub fn route(
    routes: &RouteTable,
    req: &RequestHeader,
    canonical: NormalPath,
    has_body: bool,
    d: &mut Decision,
) -> Result<Routed, Reject> {
    d.stage = Stage::Route;
    let query = Query::parse(req.uri.query()).map_err(Reject::BadQuery)?;
    let (route, captures) = match routes.lookup(&req.method, &canonical.path) {
        Lookup::Found(route, captures) => (route, captures),
        Lookup::MethodNotAllowed(methods) => return Err(Reject::MethodNotAllowed(methods)),
        Lookup::NotFound => return Err(Reject::NotFound),
    };
    d.route = route.name.clone();
    d.mode = route.mode;
    let (path, captures, query) = in_one_case(&route, canonical.path, captures, query);
    let mut ambiguities = canonical.ambiguities.union(query.ambiguities);
    if has_body && matches!(req.method, Method::GET | Method::HEAD) {
        ambiguities.insert(Ambiguity::BodyOnRead);
    }
    if let Some(a) = ambiguities.first_not_in(route.accept) {
        return Err(Reject::Ambiguous(a));
    }
    check_hop_by_hop(req, &route)?;
    let values = RequestValues {
        captures: &captures,
        query: &query,
        headers: &req.headers,
        body: None,
    };
    let upstream_uri = upstream_uri(&route, &path, &query, &values)?;
    Ok(Routed {
        route,
        path,
        captures,
        query,
        upstream_uri,
        body: None,
    })
}

/// The path, its captures and the query, with the identifiers in the route's case: a backend that
/// compares identifiers without case gets them in one case, the one decided on.
fn in_one_case(
    route: &Route,
    path: String,
    captures: BTreeMap<String, String>,
    query: Query,
) -> (String, BTreeMap<String, String>, Query) {
    match route.identifier_case {
        Some(case) => (
            route.pattern.recase_captures(&path, case),
            captures
                .into_iter()
                .map(|(name, value)| (name, case.apply(&value)))
                .collect(),
            query.recased(route.query_names(), case),
        ),
        None => (path, captures, query),
    }
}

/// The path and query the backend receives, built once when the request is decided: the canonical
/// path (or the route's `upstream_path` with the request's values) and the canonical query.
fn upstream_uri(
    route: &Route,
    path: &str,
    query: &Query,
    values: &RequestValues,
) -> Result<http::Uri, Reject> {
    let mut uri = match &route.upstream_path {
        Some(t) => t
            .render_path(values)
            .map_err(|e| Reject::MissingRequestValue(MissingValue::UpstreamPath(e)))?,
        None => path.to_string(),
    };
    if !query.is_empty() {
        uri.push('?');
        uri.push_str(&query.canonical());
    }
    // Canonical paths and queries are plain ASCII of URI characters; a failure is our fault.
    uri.parse().map_err(|_| Reject::Internal)
}

/// Refuse what the forwarding would change after the decision, or pass on against the route's
/// wish: a `Connection` header naming a header the route's rule reads (it would be stripped on the
/// way to the backend), and an upgrade (WebSocket) on a route that does not allow one.
fn check_hop_by_hop(req: &RequestHeader, route: &Route) -> Result<(), Reject> {
    for value in req.headers.get_all(http::header::CONNECTION) {
        let text = value
            .to_str()
            .map_err(|_| Reject::BadHeader(HeaderRefusal::Connection))?;
        for token in text.split(',').map(str::trim) {
            if route.header_names().any(|h| h.eq_ignore_ascii_case(token)) {
                return Err(Reject::BadHeader(HeaderRefusal::ConnectionNamesRuleHeader(
                    token.to_ascii_lowercase(),
                )));
            }
        }
    }
    if req.headers.contains_key(http::header::UPGRADE) && !route.websocket {
        return Err(Reject::BadHeader(HeaderRefusal::Upgrade));
    }
    Ok(())
}

/// `bytes`, the body of a request with `headers`, read for a rule: within its bound, read one way
/// only, with every value the rule takes.
pub fn read_rule_body(
    rule: &BodyRule,
    headers: &http::HeaderMap,
    bytes: &[u8],
) -> Result<ReadBody, Reject> {
    if bytes.len() > rule.max_bytes {
        return Err(Reject::BodyTooLarge);
    }
    let reading = Reading {
        pointers: &rule.pointers,
        keys: &rule.keys,
        each: rule.each.as_ref(),
        max_elements: rule.max_elements,
    };
    read_for_rule(headers, bytes, &reading).map_err(Reject::Body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Auth;
    use crate::request::pattern::PathPattern;
    use crate::request::Ambiguities;
    use proptest::prelude::*;

    fn route(name: &str, path: &str, methods: Option<&[Method]>) -> Route {
        Route {
            name: name.into(),
            description: String::new(),
            methods: methods.map(<[Method]>::to_vec),
            pattern: PathPattern::parse(path).unwrap(),
            upstream: "u".into(),
            auth: Auth::Public,
            upstream_path: None,
            advertise: false,
            forward_authorization: false,
            accept: Ambiguities::default(),
            websocket: false,
            response_headers: Vec::new(),
            source: Default::default(),
            login: false,
            identifier_case: None,
            body: None,
            mode: Default::default(),
        }
    }

    /// What the table must say: the first route in its order that matches and allows the method.
    fn linear(
        table: &RouteTable,
        method: &Method,
        path: &str,
    ) -> (Option<arcstr::ArcStr>, Vec<Method>) {
        let mut allowed = Vec::new();
        for r in table.routes() {
            if r.pattern.matches(path).is_some() {
                if r.allows(method) {
                    return (Some(r.name.clone()), Vec::new());
                }
                allowed.extend(r.allowed_methods());
            }
        }
        allowed.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        allowed.dedup();
        (None, allowed)
    }

    fn indexed(
        table: &RouteTable,
        method: &Method,
        path: &str,
    ) -> (Option<arcstr::ArcStr>, Vec<Method>) {
        match table.lookup(method, path) {
            Lookup::Found(r, _) => (Some(r.name.clone()), Vec::new()),
            Lookup::MethodNotAllowed(m) => (None, m),
            Lookup::NotFound => (None, Vec::new()),
        }
    }

    #[test]
    fn the_most_specific_route_wins_across_the_index() {
        let table = RouteTable::new(vec![
            route("any", "/{*rest}", None),
            route("item", "/api/{kind}/{id}", None),
            route("container", "/api/containers/{id}", Some(&[Method::GET])),
            route("exact", "/api/containers/special", None),
        ]);
        let found = |m: Method, p: &str| indexed(&table, &m, p).0;
        assert_eq!(
            found(Method::GET, "/api/containers/special").as_deref(),
            Some("exact")
        );
        assert_eq!(
            found(Method::GET, "/api/containers/C1").as_deref(),
            Some("container")
        );
        assert_eq!(
            found(Method::PUT, "/api/containers/C1").as_deref(),
            Some("item")
        );
        assert_eq!(found(Method::GET, "/elsewhere").as_deref(), Some("any"));
        let only_get = RouteTable::new(vec![route("c", "/c/{id}", Some(&[Method::GET]))]);
        assert_eq!(
            indexed(&only_get, &Method::POST, "/c/1"),
            (None, vec![Method::GET])
        );
        assert!(matches!(
            only_get.lookup(&Method::GET, "/d/1"),
            Lookup::NotFound
        ));
    }

    #[test]
    fn trace_is_taken_only_by_a_route_that_lists_it() {
        let table = RouteTable::new(vec![
            route("any", "/files/{*rest}", None),
            route("echoing", "/debug", Some(&[Method::TRACE])),
        ]);
        match table.lookup(&Method::TRACE, "/files/a") {
            Lookup::MethodNotAllowed(allowed) => {
                assert!(allowed.contains(&Method::GET), "{allowed:?}");
                assert!(!allowed.contains(&Method::TRACE), "{allowed:?}");
            }
            _ => panic!("TRACE must not reach a route that does not list it"),
        }
        assert_eq!(
            indexed(&table, &Method::TRACE, "/debug").0.as_deref(),
            Some("echoing")
        );
    }

    /// A pattern of literal `a`/`b` segments and captures (`None`), maybe ending in a rest.
    fn pattern_text(segments: &[Option<&str>], rest: bool) -> String {
        let mut parts: Vec<String> = segments
            .iter()
            .enumerate()
            .map(|(j, s)| s.map_or_else(|| format!("{{x{j}}}"), str::to_string))
            .collect();
        if rest {
            parts.push("{*r}".into());
        }
        format!("/{}", parts.join("/"))
    }

    proptest! {
        #[test]
        fn the_index_answers_as_a_scan_of_every_route_would(
            patterns in prop::collection::vec(
                (
                    prop::collection::vec(prop_oneof![Just(Some("a")), Just(Some("b")), Just(None)], 0..4),
                    any::<bool>(),
                    any::<bool>(),
                ),
                1..12,
            ),
            path in prop::collection::vec(prop_oneof![Just("a"), Just("b"), Just("c")], 0..5),
            post in any::<bool>(),
        ) {
            let routes: Vec<Route> = patterns
                .iter()
                .enumerate()
                .map(|(i, (segments, rest, get_only))| {
                    let methods = get_only.then_some(&[Method::GET][..]);
                    route(&format!("r{i}"), &pattern_text(segments, *rest), methods)
                })
                .collect();
            let table = RouteTable::new(routes);
            let path = format!("/{}", path.join("/"));
            let method = if post { Method::POST } else { Method::GET };
            prop_assert_eq!(indexed(&table, &method, &path), linear(&table, &method, &path));
        }
    }
}
