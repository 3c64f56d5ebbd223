//! `ishare-gateway purge`: drop cached decisions at a gateway's admin listener (and, on the fleet's
//! Redis, at every instance) by policy issuer, access subject or all.

use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["policy_issuer", "access_subject", "all"])))]
pub struct PurgeArgs {
    /// The admin listener of one instance, e.g. http://127.0.0.1:9901.
    #[arg(long, value_name = "URL")]
    pub admin: String,
    /// The file holding the secret of [admin] purge_secret_file.
    #[arg(long, value_name = "FILE")]
    pub secret_file: PathBuf,
    /// Drop the decisions on this data owner's policies.
    #[arg(long, value_name = "PARTY")]
    pub policy_issuer: Option<String>,
    /// Drop the decisions for this consumer.
    #[arg(long, value_name = "PARTY")]
    pub access_subject: Option<String>,
    /// Drop every cached decision.
    #[arg(long)]
    pub all: bool,
}

/// Ask the admin listener to purge; what it purged on standard output, an error unless every
/// instance was told (or there is no fleet).
pub async fn run(args: PurgeArgs) -> Result<(), String> {
    let secret = std::fs::read_to_string(&args.secret_file)
        .map_err(|e| format!("{}: {e}", args.secret_file.display()))?;
    let body = match (&args.policy_issuer, &args.access_subject) {
        (Some(p), _) => serde_json::json!({"policy_issuer": p}),
        (_, Some(s)) => serde_json::json!({"access_subject": s}),
        _ => serde_json::json!({"all": true}),
    };
    crate::tls::ensure_crypto_provider();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let url = format!("{}/purge", args.admin.trim_end_matches('/'));
    let resp = http
        .post(&url)
        .bearer_auth(secret.trim())
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status().as_u16();
    let answer: serde_json::Value = resp.json().await.unwrap_or_default();
    let said = |key: &str| answer[key].as_str().unwrap_or_default().to_string();
    match status {
        200 => {
            let fleet = match answer["fleet"].as_bool() {
                Some(true) => "; published to the fleet",
                _ => "",
            };
            println!(
                "purged {} cached decision(s) at {}{fleet}",
                answer["purged"], args.admin
            );
            Ok(())
        }
        503 if answer["fleet"] == false => Err(format!(
            "purged {} cached decision(s) at {} only: {}",
            answer["purged"],
            args.admin,
            said("error_description")
        )),
        _ => Err(format!(
            "{url} answered {status} {}: {}",
            said("reason"),
            said("error_description")
        )),
    }
}
