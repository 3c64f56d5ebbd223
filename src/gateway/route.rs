//! The route table: choosing the rule for a method and a normalised path, most specific first.

use crate::config::model::Route;
use http::Method;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the table says about a request.
pub enum Lookup {
    Found(Arc<Route>, BTreeMap<String, String>),
    /// The path is routed, but not for this method; the methods that are.
    MethodNotAllowed(Vec<Method>),
    NotFound,
}

/// The routes, most specific first.
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    routes: Vec<Arc<Route>>,
}

impl RouteTable {
    pub fn new(routes: Vec<Route>) -> Self {
        let mut routes: Vec<Arc<Route>> = routes.into_iter().map(Arc::new).collect();
        // Stable: among equally specific routes, file order decides.
        routes.sort_by_key(|r| std::cmp::Reverse(r.pattern.specificity()));
        RouteTable { routes }
    }

    pub fn routes(&self) -> &[Arc<Route>] {
        &self.routes
    }

    pub fn lookup(&self, method: &Method, path: &str) -> Lookup {
        let mut allowed = Vec::new();
        for route in &self.routes {
            if let Some(captures) = route.pattern.matches(path) {
                if route.allows(method) {
                    return Lookup::Found(route.clone(), captures);
                }
                allowed.extend(route.methods.iter().flatten().cloned());
            }
        }
        if allowed.is_empty() {
            Lookup::NotFound
        } else {
            allowed.dedup();
            Lookup::MethodNotAllowed(allowed)
        }
    }
}
