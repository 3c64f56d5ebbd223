//! What the walk-throughs (`demo`, `cluster`) share: headings and steps in the terminal, paths said
//! briefly, and the testbed's consumer as a client of the scheme.

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
