//! The demo's walk on the consumer's side: ABC Trucking's legacy client, which knows nothing of
//! iSHARE, calls plain paths on loopback (`conf/egress.toml`), and reaches the demo's gateway as
//! ABC Trucking: with a token, then with the registry's answer at the provider, then with the
//! evidence the consumer's side brings in the header.

use super::walk::{heading, show, shown, step};
use crate::config::egress;
use crate::egress::RunningEgress;
use std::path::Path;

/// Start the consumer's side of `config` and walk through it from step `first`; it keeps serving.
pub async fn walk(config: &Path, first: usize) -> Result<RunningEgress, String> {
    let mut config = egress::load(config).map_err(|e| format!("{}:\n{e}", config.display()))?;
    // The walk says what each call's line would.
    config.decision_log = None;
    let local = format!("http://{}", config.consumer.address);
    let party = config.identity.party_id.to_string();
    crate::testbed::launch::free(std::iter::once(config.consumer.address).chain(config.admin))
        .map_err(|e| e.to_string())?;
    let running = RunningEgress::start(config).await?;
    heading(&format!(
        "The consumer's side: ABC Trucking's legacy client calls {local} without any iSHARE code"
    ));
    // A plain client: no certificate, no key, no token.
    let http = reqwest::Client::new();
    let call = async |n: usize, title: &str, path: &str| -> Result<(), String> {
        step(n, title);
        let url = format!("{local}{path}");
        let resp = http.get(&url).send().await.map_err(|e| e.to_string())?;
        println!("   $ curl {url}");
        show(resp, "GET", &url).await.map(|_| ())
    };
    call(
        first,
        &format!("It reads container C1: the consumer's side gets a token as {party} and calls with it; the gateway asks the registry itself"),
        "/api/containers/C1",
    )
    .await?;
    call(
        first + 1,
        "It reads SECRET-1: Happy Pets' registry denies, and the client reads why",
        "/api/containers/SECRET-1",
    )
    .await?;
    call(
        first + 2,
        "It reads the documents of C1: the route brings evidence, asked of the registry as ABC Trucking (then kept) and sent in the delegation_evidence header",
        "/api/containers/C1/documents",
    )
    .await?;
    println!(
        "   (one line per call in the decision log when [decision_log] is set, as in {})",
        shown(Path::new("conf/egress.toml"))
    );
    Ok(running)
}
