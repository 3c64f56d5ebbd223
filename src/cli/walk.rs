//! What the walk-throughs (`demo`, its walk on the consumer's side, `cluster`) share: headings and
//! steps in the terminal, an exchange shown briefly, paths said briefly, and the testbed's
//! consumer as a client of the scheme.

use crate::peers::PeerClient;
use std::path::Path;
use std::time::Duration;

/// The testbed's consumer, ABC Trucking.
pub const CONSUMER: &str = "EU.EORI.NL000000001";
/// A page for people of the shipped rules, and the testbed's person (test-only credentials).
pub const PERSON_PAGE: &str = "/people/containers/C1";
pub const PERSON: &str = "jane";
pub const PERSON_PASSWORD: &str = "jane-testbed-password";

/// A heading, bold on a terminal.
pub fn heading(text: &str) {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        println!("\n\x1b[1m{text}\x1b[0m");
    } else {
        println!("\n{text}");
    }
}

pub fn step(n: usize, title: &str) {
    heading(&format!("{n}. {title}"));
}

/// Print one exchange briefly: the request line, the status, the licence headers, and the gist of
/// the body (the backend's view of the request, or the gateway's reason).
pub async fn show(
    resp: reqwest::Response,
    method: &str,
    url: &str,
) -> Result<serde_json::Value, String> {
    let status = resp.status();
    let licences: Vec<String> = resp
        .headers()
        .iter()
        .filter(|(n, _)| n.as_str().starts_with("license"))
        .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
        .collect();
    let body: serde_json::Value = resp.json().await.map_err(|e| format!("{url}: {e}"))?;
    println!("   → {method} {url}");
    println!("   ← {status}");
    for l in licences {
        println!("     {l}");
    }
    // A gateway's refusal names its reason; the consumer's side's own, its error.
    if let Some(reason) = body.get("reason").or_else(|| body.get("error")) {
        println!(
            "     reason: {} — {}",
            reason.as_str().unwrap_or("?"),
            body["error_description"].as_str().unwrap_or("")
        );
    } else if body.get("path").is_some() {
        println!(
            "     the backend got {} {} with X-Consumer-Party-Id: {}",
            body["method"].as_str().unwrap_or("?"),
            body["path"].as_str().unwrap_or("?"),
            body["headers"]["x-consumer-party-id"]
                .as_str()
                .unwrap_or("-")
        );
    }
    Ok(body)
}

/// A path as short as it can be said from the current directory.
pub fn shown(path: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    let absolute = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    match absolute.strip_prefix(&cwd) {
        Ok(relative) => format!("./{}", relative.display()),
        Err(_) => absolute.display().to_string(),
    }
}

/// An HTTP client trusting the testbed's CA, and the consumer of the testbed (its key material in
/// `data_dir`) as a client of the scheme.
pub fn consumer(data_dir: &Path, scheme: &str) -> Result<(reqwest::Client, PeerClient), String> {
    party(data_dir, CONSUMER, scheme)
}

/// An HTTP client trusting the testbed's CA, and the testbed's party `id` (its key material in
/// `data_dir`) as a client of the scheme.
pub fn party(
    data_dir: &Path,
    id: &str,
    scheme: &str,
) -> Result<(reqwest::Client, PeerClient), String> {
    let ca = std::fs::read(data_dir.join("ca.pem")).map_err(|e| e.to_string())?;
    let http = crate::tls::outbound_client(
        &crate::tls::OutboundTrust {
            ca_pem: Some(ca),
            system_roots: false,
        },
        Duration::from_secs(10),
    )
    .map_err(|e| e.to_string())?;
    let read = |kind: &str| {
        std::fs::read_to_string(crate::testbed::keys::party_file(data_dir, id, kind))
            .map_err(|e| e.to_string())
    };
    let identity = crate::scheme::jwt::SigningIdentity::from_pem(
        crate::scheme::party::PartyId::parse(id).map_err(|e| e.to_string())?,
        &read("key")?,
        &read("chain")?,
    )
    .map_err(|e| e.to_string())?;
    Ok((http.clone(), PeerClient::new(http, identity, scheme)))
}
