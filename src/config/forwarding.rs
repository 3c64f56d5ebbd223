//! The `[forwarding]` section: what the backend is told about the caller (party headers, the
//! client's address) and which client headers it never receives.

use super::defaults as default;
use super::file::ForwardingFile;
use super::issues::Issues;
use super::model::ForwardedFor;
use super::values::header_name;
use crate::request::TRACE_HEADERS;
use crate::scheme::same_letters;
use crate::scheme::vocabulary::CREDENTIAL_HEADERS;

/// The section, validated.
pub(super) struct Forwarding {
    pub party_headers: Option<(http::HeaderName, http::HeaderName)>,
    pub strip_headers: Vec<http::HeaderName>,
    pub forwarded_for: ForwardedFor,
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

pub(super) fn build(f: ForwardingFile, issues: &mut Issues) -> Forwarding {
    Forwarding {
        party_headers: party_headers(&f, issues),
        strip_headers: strip_headers(f.strip_headers.as_deref(), issues),
        forwarded_for: f
            .forwarded_for
            .and_then(|c| issues.choice("forwarding.forwarded_for", c))
            .unwrap_or(default::FORWARDED_FOR),
        trusted_proxies: trusted_proxies(f.trusted_proxies.unwrap_or_default(), issues),
    }
}

/// The peers whose `X-Forwarded-For` is kept (the client's address is appended to it): addresses
/// or networks (`10.0.0.0/8`).
fn trusted_proxies(list: Vec<String>, issues: &mut Issues) -> Vec<ipnet::IpNet> {
    list.iter()
        .enumerate()
        .filter_map(|(i, text)| {
            let parsed = text
                .parse::<ipnet::IpNet>()
                .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| format!("{text:?} is neither an address nor a network (10.0.0.0/8)"));
            issues.check(&format!("forwarding.trusted_proxies[{i}]"), parsed)
        })
        .collect()
}

/// The headers that tell the backend who called: the consumer, and the consumer a broker acts for.
fn party_headers(
    f: &ForwardingFile,
    issues: &mut Issues,
) -> Option<(http::HeaderName, http::HeaderName)> {
    let mut header = |key: &str, configured: Option<String>, default: &str| {
        let name = issues.check(key, header_name(configured.as_deref().unwrap_or(default)))?;
        let reserved = ["authorization", "host", "content-length"];
        // A trace header in any spelling is the tracing gateway's, or a tracing proxy's, to set.
        let credential = CREDENTIAL_HEADERS
            .iter()
            .chain(&TRACE_HEADERS)
            .any(|c| same_letters(c, name.as_str()));
        if credential || reserved.contains(&name.as_str()) {
            issues.add(key, format!("{name} cannot carry a party id"));
        }
        Some(name)
    };
    let party = header(
        "forwarding.party_header",
        f.party_header.clone(),
        default::PARTY_HEADER,
    );
    let original = header(
        "forwarding.original_consumer_header",
        f.original_consumer_header.clone(),
        default::ORIGINAL_CONSUMER_HEADER,
    );
    let (party, original) = (party?, original?);
    if party == original {
        issues.add(
            "forwarding.original_consumer_header",
            "must differ from party_header",
        );
    }
    Some((party, original))
}

fn strip_headers(configured: Option<&[String]>, issues: &mut Issues) -> Vec<http::HeaderName> {
    let names: Vec<&str> = match configured {
        Some(list) => list.iter().map(String::as_str).collect(),
        None => default::STRIP_HEADERS.to_vec(),
    };
    names
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            issues.check(&format!("forwarding.strip_headers[{i}]"), header_name(n))
        })
        .collect()
}
