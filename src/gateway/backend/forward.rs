//! Forwarding an allowed request: choosing a backend, what the backend is told of the decision
//! (`Told`, which the decision service passes on to the proxy in front), rewriting the request
//! headers for it, and the licence headers on the response.

use crate::config::model::{Auth, Config, ForwardedFor, Route};
use crate::gateway::backend::upstream::UpstreamPool;
use crate::gateway::reject::{Reject, DECISION_ID_HEADER};
use crate::request::TRACE_HEADERS;
use crate::scheme::terms::LicenceValue;
use crate::scheme::vocabulary::{CREDENTIAL_HEADERS, LICENCE_HEADERS};
use crate::scheme::LetterMap;
use http::HeaderValue;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::upstreams::peer::HttpPeer;
use std::borrow::Cow;

/// The next backend of the pool (round robin over the healthy ones).
pub fn peer(pool: &UpstreamPool) -> Result<Box<HttpPeer>, Reject> {
    let peer = pool
        .next_peer()
        .ok_or_else(|| Reject::NoHealthyBackend(pool.config.name.clone()))?;
    Ok(Box::new(peer.clone()))
}

/// What the backend is told about the request.
pub struct Forwarding<'a> {
    pub route: &'a Route,
    pub pool: &'a UpstreamPool,
    /// The path and query decided on.
    pub uri: &'a http::Uri,
    /// What the route's backend never receives.
    pub withheld: &'a Withheld,
    /// The gateway traces the request: the backend receives its trace context alone.
    pub traced: bool,
    /// Who decided on whom.
    pub told: Told<'a>,
    pub config: &'a Config,
    /// The address the connection came from.
    pub client_addr: Option<std::net::IpAddr>,
    pub tls: bool,
    /// What the backend is told about a signed-in person: (header, value).
    pub person: &'a [(http::HeaderName, String)],
    /// The gateway's own cookies, which the backend never receives.
    pub own_cookies: &'a [String],
}

/// What the backend is told of a decision, in the headers the gateway sets: the caller (on a
/// route for people, the person's own headers say who it is), the consumer a broker acts for, and
/// the decision's id. The proxy sets them (`rewrite_request`); the decision service tells the
/// proxy in front to, and to remove what it does not set (`to_remove`).
#[derive(Clone, Copy)]
pub struct Told<'a> {
    consumer: Option<&'a str>,
    original_consumer: Option<&'a str>,
    decision_id: &'a str,
}

impl<'a> Told<'a> {
    /// What `route`'s backend is told of a decision: its `caller`, the `original_consumer` a
    /// broker acts for, and its id.
    pub fn new(
        route: &Route,
        caller: Option<&'a str>,
        original_consumer: Option<&'a str>,
        decision_id: &'a str,
    ) -> Self {
        Told {
            consumer: caller.filter(|_| !route.login),
            original_consumer,
            decision_id,
        }
    }

    /// The headers, named as `config` says.
    pub fn headers(
        self,
        config: &'a Config,
    ) -> impl Iterator<Item = (&'a http::HeaderName, &'a str)> {
        self.parties(config)
            .chain([(&DECISION_ID, self.decision_id)])
    }

    /// The headers that name parties, named as `config` says.
    fn parties(self, config: &'a Config) -> impl Iterator<Item = (&'a http::HeaderName, &'a str)> {
        let consumer = self.consumer.map(|c| (&config.party_header, c));
        let original = (self.original_consumer).map(|c| (&config.original_consumer_header, c));
        consumer.into_iter().chain(original)
    }
}

static DECISION_ID: http::HeaderName = http::HeaderName::from_static(DECISION_ID_HEADER);

/// What the proxy in front of the decision service removes before the backend: the scheme's
/// credentials (Authorization unless the route forwards it) and the party headers the decision
/// does not set (`set`), in lower case.
pub fn to_remove(config: &Config, route: &Route, set: &[(String, String)]) -> Vec<String> {
    let authorization =
        (!route.forward_authorization).then_some(http::header::AUTHORIZATION.as_str());
    CREDENTIAL_HEADERS
        .into_iter()
        .chain([
            config.party_header.as_str(),
            config.original_consumer_header.as_str(),
        ])
        .chain(authorization)
        .filter(|name| !set.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)))
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The framing of a body read whole to decide on: its length, sent as a `Content-Length` (a
/// chunked body's chunks and trailers are not passed on), and no `Expect` (the body is here).
pub fn frame_decided_body(req: &mut RequestHeader, length: usize) -> pingora::Result<()> {
    req.remove_header(&http::header::TRANSFER_ENCODING);
    req.remove_header(&http::header::EXPECT);
    req.remove_header(&http::header::TRAILER);
    req.insert_header(http::header::CONTENT_LENGTH, length.to_string())
}

/// Rewrite the request for the backend: the path and query decided on; no Authorization unless the
/// route forwards it; no credentials of the scheme (evidence, consumer assertions) under any of
/// their names (`delegation_evidence`, `delegationEvidence`) in any spelling;
/// the consumer's party id (and the original consumer's, for a broker) in their headers, never a
/// client's copy; none of the headers the configuration strips (method and path overrides,
/// forwarding details a client could forge), nor the client's copies of the licence headers a
/// delegated route answers with; no look-alike (`X_Forwarded_For`, `Delegation-Evidence`) of a
/// header the gateway sets, vouches for or decided on; from a request the gateway traces, none of
/// the client's trace headers in any spelling (the gateway's own are set after this:
/// `RequestTrace::to_backend`); and X-Forwarded-For, X-Forwarded-Proto and X-Decision-Id.
pub fn rewrite_request(req: &mut RequestHeader, f: &Forwarding) -> pingora::Result<()> {
    rewrite(req, f, true)
}

/// `rewrite_request`, in the plain map where no name needs its case and `plain` allows it (the
/// tests compare the two).
fn rewrite(req: &mut RequestHeader, f: &Forwarding, plain: bool) -> pingora::Result<()> {
    req.set_uri(f.uri.clone());
    let forwarded_for = forwarded_for(&req.headers, f);
    let proto = forwarded_proto(&req.headers, f);
    // One pass over the request's headers finds what must go (most requests carry none of it),
    // and whether each name left is written as pingora writes it without its case.
    let (removed, usual) = withheld_and_case(req, f);
    let cookies = (!f.own_cookies.is_empty()
        && req.headers.contains_key(&COOKIE)
        && !removed.contains(&COOKIE))
    .then(|| other_cookies(&req.headers, f.own_cookies));
    let set = Set {
        removed,
        cookies,
        forwarded_for,
        proto,
    };
    if !(usual && plain) {
        return set.apply(req, f);
    }
    // No name would be written otherwise without the names' case map: the headers are rewritten
    // in the plain map, with room made once for what is added (the case map, cloned for the
    // backend, grew twice a request, each name was parsed again and its copy shared).
    let end_stream = req.send_end_stream();
    let blank = RequestHeader::from(http::Request::new(()).into_parts().0);
    let mut parts = http::request::Parts::from(std::mem::replace(req, blank));
    let applied = (parts.headers.try_reserve(ADDED + f.person.len()))
        .or_else(|_| too_many())
        .and_then(|()| set.apply(&mut parts.headers, f));
    // The target is the URI's (`set_uri` above), which is all that a head made of parts keeps.
    *req = RequestHeader::from(parts);
    if let Some(end_stream) = end_stream {
        req.set_send_end_stream(end_stream);
    }
    applied
}

/// The most headers `rewrite_request` adds besides a signed-in person's: the two party headers,
/// the decision's id, Host, X-Forwarded-For, X-Forwarded-Proto and Cookie.
const ADDED: usize = 7;

/// The names of `req`'s headers that `f` withholds from the backend, each once, and whether
/// every other name is written as pingora writes it when it keeps no case (`usual_form`).
fn withheld_and_case(req: &RequestHeader, f: &Forwarding) -> (Vec<http::HeaderName>, bool) {
    let mut removed: Vec<http::HeaderName> = Vec::new();
    let mut usual = req.has_case();
    let mut cases = req.case_header_iter();
    for (name, _) in &req.headers {
        // The case map holds one name as written for each value, in the same order; once a name
        // needs its case, the others' are not looked at.
        let case = usual.then(|| cases.next()).flatten();
        if f.withheld.removes(name.as_str(), f.traced) {
            if removed.last() != Some(name) {
                removed.push(name.clone());
            }
            continue;
        }
        usual = case.is_some_and(|(case, _)| case.as_slice() == usual_form(name).as_bytes());
    }
    (removed, usual)
}

/// How pingora writes a header name it keeps no case for: in its usual form, title case, for
/// the twelve names it knows, else in lower case (as `http` gives it).
fn usual_form(name: &http::HeaderName) -> &str {
    use http::header;
    match *name {
        header::ACCEPT_RANGES => "Accept-Ranges",
        header::AGE => "Age",
        header::CACHE_CONTROL => "Cache-Control",
        header::CONNECTION => "Connection",
        header::CONTENT_TYPE => "Content-Type",
        header::CONTENT_ENCODING => "Content-Encoding",
        header::CONTENT_LENGTH => "Content-Length",
        header::DATE => "Date",
        header::TRANSFER_ENCODING => "Transfer-Encoding",
        header::HOST => "Host",
        header::SERVER => "Server",
        header::SET_COOKIE => "Set-Cookie",
        _ => name.as_str(),
    }
}

/// What `rewrite_request` does to the headers once it has read them.
struct Set {
    removed: Vec<http::HeaderName>,
    /// The client's cookies but the gateway's own, when it sent any of the gateway's.
    cookies: Option<String>,
    forwarded_for: Option<String>,
    proto: &'static str,
}

impl Set {
    fn apply(self, headers: &mut impl Headers, f: &Forwarding) -> pingora::Result<()> {
        for name in &self.removed {
            headers.remove(name);
        }
        if let Some(kept) = self.cookies {
            headers.remove(&http::header::COOKIE);
            if !kept.is_empty() {
                headers.set(&COOKIE, value(kept)?)?;
            }
        }
        for (name, v) in f.person {
            headers.set_named(name, value(v.as_str())?)?;
        }
        for (name, v) in f.told.parties(f.config) {
            headers.set_named(name, value(v)?)?;
        }
        headers.set(&DECISION_ID, value(f.told.decision_id)?)?;
        if let Some(host) = &f.pool.config.host_header {
            headers.set(&HOST, value(host.as_str())?)?;
        }
        if let Some(v) = self.forwarded_for {
            headers.set(&X_FORWARDED_FOR, value(v)?)?;
        }
        headers.set(&X_FORWARDED_PROTO, HeaderValue::from_static(self.proto))
    }
}

/// A header value, or pingora's error for one that is not.
fn value<V: TryInto<HeaderValue>>(v: V) -> pingora::Result<HeaderValue> {
    v.try_into().or_else(|_| {
        pingora::Error::e_explain(
            pingora::ErrorType::InvalidHTTPHeader,
            "invalid header value",
        )
    })
}

/// The backend's request headers as `rewrite_request` changes them: pingora's head, which writes
/// each name in the case it is given, or its plain map once no name needs one.
trait Headers {
    fn remove(&mut self, name: &http::HeaderName);
    /// Set one of the gateway's own names, made once.
    fn set(&mut self, name: &'static http::HeaderName, value: HeaderValue) -> pingora::Result<()>;
    /// Set a name of the configuration's.
    fn set_named(&mut self, name: &http::HeaderName, value: HeaderValue) -> pingora::Result<()>;
}

impl Headers for RequestHeader {
    fn remove(&mut self, name: &http::HeaderName) {
        self.remove_header(name);
    }

    fn set(&mut self, name: &'static http::HeaderName, value: HeaderValue) -> pingora::Result<()> {
        // A name written as it is, in lower case, is given as its text: pingora makes no copy.
        match usual_form(name) == name.as_str() {
            true => self.insert_header(name.as_str(), value),
            false => self.insert_header(name, value),
        }
    }

    fn set_named(&mut self, name: &http::HeaderName, value: HeaderValue) -> pingora::Result<()> {
        self.insert_header(name.clone(), value)
    }
}

impl Headers for http::HeaderMap {
    fn remove(&mut self, name: &http::HeaderName) {
        http::HeaderMap::remove(self, name);
    }

    fn set(&mut self, name: &'static http::HeaderName, value: HeaderValue) -> pingora::Result<()> {
        self.set_named(name, value)
    }

    fn set_named(&mut self, name: &http::HeaderName, value: HeaderValue) -> pingora::Result<()> {
        match self.try_insert(name.clone(), value) {
            Ok(_) => Ok(()),
            Err(_) => too_many(),
        }
    }
}

/// pingora's error for a head with more headers than a map holds.
fn too_many<T>() -> pingora::Result<T> {
    pingora::Error::e_explain(
        pingora::ErrorType::InvalidHTTPHeader,
        "header map size overflows MAX_SIZE",
    )
}

static COOKIE: http::HeaderName = http::header::COOKIE;
static HOST: http::HeaderName = http::header::HOST;
static X_FORWARDED_FOR: http::HeaderName = http::HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: http::HeaderName = http::HeaderName::from_static("x-forwarded-proto");

/// The backend's X-Forwarded-For: the address the gateway saw, appended to the client's header
/// when the configuration says so or the peer is a trusted proxy, else alone.
fn forwarded_for(headers: &http::HeaderMap, f: &Forwarding) -> Option<String> {
    let addr = f.client_addr?;
    let keep = f.config.forwarded_for == ForwardedFor::Append
        || f.config
            .trusted_proxies
            .iter()
            .any(|net| net.contains(&addr));
    // A line that is not text is not passed on, nor any before it: the chain would be altered.
    let earlier: Vec<&str> = if keep {
        headers
            .get_all(&X_FORWARDED_FOR)
            .iter()
            .map(|v| v.to_str().ok())
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default()
            .into_iter()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect()
    } else {
        Vec::new()
    };
    Some(match earlier.is_empty() {
        true => address_text(addr),
        false => format!("{}, {}", earlier.join(", "), address_text(addr)),
    })
}

/// An address as `Display` writes it: an IPv4 address's four numbers without the formatting
/// machinery, which costs a hundredth of a request's instructions.
fn address_text(addr: std::net::IpAddr) -> String {
    match addr {
        std::net::IpAddr::V4(v4) => {
            let mut text = String::with_capacity(15);
            let mut number = itoa::Buffer::new();
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    text.push('.');
                }
                text.push_str(number.format(octet));
            }
            text
        }
        std::net::IpAddr::V6(v6) => v6.to_string(),
    }
}

/// The backend's X-Forwarded-Proto: the scheme a trusted proxy in front says its client used
/// (one value, `http` or `https`), else the gateway's own listener's.
fn forwarded_proto(headers: &http::HeaderMap, f: &Forwarding) -> &'static str {
    let own = if f.tls { "https" } else { "http" };
    let from_proxy = f
        .client_addr
        .is_some_and(|a| f.config.trusted_proxies.iter().any(|net| net.contains(&a)));
    let mut said = headers.get_all(&X_FORWARDED_PROTO).iter();
    match (from_proxy, said.next(), said.next()) {
        (true, Some(v), None) if v.as_bytes().eq_ignore_ascii_case(b"https") => "https",
        (true, Some(v), None) if v.as_bytes().eq_ignore_ascii_case(b"http") => "http",
        _ => own,
    }
}

/// The address a request comes from: its peer's, or, when the peer is one of the
/// `trusted_proxies`, the last address in `X-Forwarded-For` that is not (what the balancers in
/// front saw). An entry that is no address ends the walk: what is before it is the client's word.
pub fn client_address(
    peer: Option<std::net::IpAddr>,
    headers: &http::HeaderMap,
    trusted_proxies: &[ipnet::IpNet],
) -> Option<std::net::IpAddr> {
    let trusted = |a: &std::net::IpAddr| trusted_proxies.iter().any(|n| n.contains(a));
    let mut client = peer?;
    if !trusted(&client) {
        return Some(client);
    }
    let lines: Vec<&http::HeaderValue> = headers.get_all(&X_FORWARDED_FOR).iter().collect();
    'walk: for line in lines.into_iter().rev() {
        let Ok(text) = line.to_str() else {
            break;
        };
        for entry in text.rsplit(',') {
            match entry.trim().parse::<std::net::IpAddr>() {
                Ok(address) => {
                    client = address.to_canonical();
                    if !trusted(&client) {
                        break 'walk;
                    }
                }
                Err(_) => break 'walk,
            }
        }
    }
    Some(client)
}

/// Every cookie of the request but `own`, as one Cookie header value.
fn other_cookies(headers: &http::HeaderMap, own: &[String]) -> String {
    crate::request::cookies(headers)
        .filter(|c| {
            !own.iter()
                .any(|name| crate::request::cookie_name(c) == name)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The request headers a route's backend never receives, worked out once per configuration: any
/// spelling of a header the gateway sets or vouches for, of the scheme's credentials and of the
/// stripped headers, the client's copies of the route's licence headers, look-alikes of the
/// headers the route's rule reads (which themselves pass, as decided on), and, from a request
/// the gateway traces, any spelling of a trace header (`TRACE_HEADERS`: the backend hears of the
/// trace from the gateway alone). Names are looked up by their letters and digits, in lower case,
/// all in one lookup.
#[derive(Clone)]
pub struct Withheld(LetterMap<Withholding>);

/// How the names with the same letters are withheld.
#[derive(Clone, Debug, Default)]
struct Withholding {
    /// In any spelling.
    always: bool,
    /// In any spelling, from a traced request.
    trace: bool,
    /// The spellings a rule reads: any other is a look-alike.
    read_as: Vec<String>,
}

impl Withheld {
    pub fn new(route: &Route, config: &Config) -> Self {
        let authorization = http::header::AUTHORIZATION.as_str();
        let always = Withholding {
            always: true,
            ..Withholding::default()
        };
        let trace = Withholding {
            trace: true,
            ..Withholding::default()
        };
        let always = [
            config.party_header.as_str(),
            config.original_consumer_header.as_str(),
            X_FORWARDED_FOR.as_str(),
            X_FORWARDED_PROTO.as_str(),
            DECISION_ID_HEADER,
        ]
        .into_iter()
        .chain(CREDENTIAL_HEADERS)
        .chain(config.strip_headers.iter().map(http::HeaderName::as_str))
        .chain(licence_header_names(route))
        .chain((!route.forward_authorization).then_some(authorization))
        .map(|h| (h, always.clone()));
        let trace = TRACE_HEADERS.into_iter().map(|h| (h, trace.clone()));
        let read = route
            .header_names()
            .chain(route.forward_authorization.then_some(authorization))
            .map(|h| {
                let read = Withholding {
                    read_as: vec![h.to_string()],
                    ..Withholding::default()
                };
                (h, read)
            });
        let names = always.chain(trace).chain(read);
        Withheld(LetterMap::new(names, |held, next| {
            held.always |= next.always;
            held.trace |= next.trace;
            held.read_as.extend(next.read_as);
        }))
    }

    /// Whether a request header (lower case, as HTTP gives it) stays away from the backend, from a
    /// request the gateway traces (`traced`) or not.
    pub fn removes(&self, name: &str, traced: bool) -> bool {
        self.0.get(name).is_some_and(|held| {
            held.always
                || (traced && held.trace)
                || held.read_as.iter().any(|e| !name.eq_ignore_ascii_case(e))
        })
    }
}

/// The licence headers a delegated route answers with.
fn licence_header_names(route: &Route) -> impl Iterator<Item = &str> {
    let delegated = matches!(route.auth, Auth::Delegation(_));
    let configured = route.response_headers.iter().map(|(n, _)| n.as_str());
    let default = LICENCE_HEADERS
        .into_iter()
        .filter(move |_| route.response_headers.is_empty());
    configured.chain(default).filter(move |_| delegated)
}

/// Set the licence headers on the response, replacing any the backend set.
pub fn set_response_headers<'a>(
    resp: &mut ResponseHeader,
    licences: impl Iterator<Item = (Cow<'static, str>, Cow<'a, LicenceValue>)>,
    decision_id: &str,
) -> pingora::Result<()> {
    for (name, value) in licences {
        // Not a header value: what the evidence says cannot be passed on, and the answer fails
        // rather than go without it.
        let Some(value) = value.header().cloned() else {
            return pingora::Error::e_explain(
                pingora::ErrorType::InvalidHTTPHeader,
                "a licence header's value from the evidence is not a header value",
            );
        };
        match name {
            Cow::Borrowed(name) => resp.insert_header(name, value)?,
            Cow::Owned(name) => resp.insert_header(name, value)?,
        }
    }
    resp.insert_header(DECISION_ID_HEADER, decision_id)
}

/// A backend never sets the gateway's own cookies (a session of its choosing, or none).
pub fn drop_own_cookies(resp: &mut ResponseHeader, own: &[String]) -> pingora::Result<()> {
    let set = http::header::SET_COOKIE;
    let names_ours = |v: &http::HeaderValue| {
        let text = String::from_utf8_lossy(v.as_bytes());
        let name = text.split(['=', ';']).next().unwrap_or_default().trim();
        own.iter().any(|o| o.eq_ignore_ascii_case(name))
    };
    if own.is_empty() || !resp.headers.get_all(&set).iter().any(names_ours) {
        return Ok(());
    }
    let kept: Vec<http::HeaderValue> = resp
        .headers
        .get_all(&set)
        .iter()
        .filter(|v| !names_ours(v))
        .cloned()
        .collect();
    resp.remove_header(&set);
    for value in kept {
        resp.append_header(set.clone(), value)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "forward_case_tests.rs"]
mod case_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_trusted_proxies_the_client_is_the_last_address_they_did_not_add() {
        let trusted: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let client = |peer: &str, forwarded: &[&str]| {
            let mut headers = http::HeaderMap::new();
            for value in forwarded {
                headers.append(X_FORWARDED_FOR.clone(), value.parse().unwrap());
            }
            client_address(peer.parse().ok(), &headers, &trusted)
                .unwrap()
                .to_string()
        };
        // A peer that is no proxy is the client, whatever it says.
        assert_eq!(client("192.0.2.1", &["198.51.100.7"]), "192.0.2.1");
        assert_eq!(client("10.0.0.5", &["198.51.100.7"]), "198.51.100.7");
        assert_eq!(
            client("10.0.0.5", &["203.0.113.9, 198.51.100.7", "10.0.0.4"]),
            "198.51.100.7",
            "what the client itself wrote before is not believed"
        );
        assert_eq!(client("10.0.0.5", &["garbage, 10.0.0.4"]), "10.0.0.4");
        // A line that is not text ends the walk: it is not skipped to reach an earlier one.
        let mut headers = http::HeaderMap::new();
        headers.append(X_FORWARDED_FOR.clone(), "6.6.6.6".parse().unwrap());
        headers.append(
            X_FORWARDED_FOR.clone(),
            http::HeaderValue::from_bytes(b"\xff, 10.0.0.4").unwrap(),
        );
        let peer = "10.0.0.5".parse().ok();
        assert_eq!(
            client_address(peer, &headers, &trusted)
                .unwrap()
                .to_string(),
            "10.0.0.5"
        );
        assert_eq!(client("10.0.0.5", &[]), "10.0.0.5");
    }

    #[test]
    fn what_a_backend_never_receives_is_worked_out_once_and_matched_in_any_spelling() {
        let rules = r#"
[[route]]
name = "read"
methods = ["GET"]
path = "/api/containers/{id}"
upstream = "legacy"
upstream_path = "/tenants/{header.x-tenant}/containers/{path.id}"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
"#;
        let dir = crate::config::tests::write(crate::config::tests::BASE, rules);
        let config = crate::config::load(&dir.join("gateway.toml")).expect("the config loads");
        let _ = std::fs::remove_dir_all(&dir);
        let withheld = Withheld::new(&config.routes[0], &config);
        let removed = [
            "authorization",
            "x_forwarded_for",
            "x.forwarded.proto",
            "delegation-evidence",
            "delegationevidence",
            "service_consumer_assertion",
            "x-decision-id",
            "licensepurpose",
            "license-end-date",
            "x_tenant",
        ];
        for name in removed {
            assert!(withheld.removes(name, false), "{name} reaches the backend");
        }
        for name in [
            "accept",
            "content-type",
            "host",
            "x-tenant",
            "x-tenants",
            "tenant",
        ] {
            assert!(!withheld.removes(name, false), "{name} is withheld");
            assert!(
                !withheld.removes(name, true),
                "{name} is withheld when traced"
            );
        }
        // A client's trace context, in any spelling, reaches the backend only from a request the
        // gateway does not trace.
        for name in [
            "traceparent",
            "trace_state",
            "b3",
            "x-b3-traceid",
            "xb3parentspanid",
        ] {
            assert!(withheld.removes(name, true), "{name} reaches the backend");
            assert!(!withheld.removes(name, false), "{name} is withheld");
        }
    }

    proptest::proptest! {
        #[test]
        fn an_address_is_written_as_display_writes_it(v4: u32, v6: u128) {
            for addr in [
                std::net::IpAddr::V4(v4.into()),
                std::net::IpAddr::V6(v6.into()),
                std::net::IpAddr::V6(std::net::Ipv4Addr::from(v4).to_ipv6_mapped()),
            ] {
                proptest::prop_assert_eq!(address_text(addr), addr.to_string());
            }
        }
    }

    #[test]
    fn a_backend_cannot_set_the_gateways_cookies() {
        let mut resp = ResponseHeader::build(200, None).unwrap();
        for cookie in [
            "theme=dark; Path=/",
            "__Host-ishare-session=chosen; Path=/; Secure",
            "__host-ishare-session-login=x",
            "other=1",
        ] {
            resp.append_header(http::header::SET_COOKIE, cookie)
                .unwrap();
        }
        let own = [
            "__Host-ishare-session".to_string(),
            "__Host-ishare-session-login".to_string(),
        ];
        drop_own_cookies(&mut resp, &own).unwrap();
        let left: Vec<&str> = resp
            .headers
            .get_all(http::header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(left, ["theme=dark; Path=/", "other=1"]);
    }
}
