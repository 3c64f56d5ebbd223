//! `ishare-gateway health`: the container's health check, asked of a running gateway's admin
//! listener (`/live`, then `/ready`) without a shell or an HTTP tool in the image.

use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct HealthArgs {
    /// The admin listener, e.g. http://127.0.0.1:9901 (its `[admin] address`).
    #[arg(
        long,
        value_name = "URL",
        env = "ISHARE_GATEWAY_ADMIN",
        default_value = "http://127.0.0.1:9901"
    )]
    pub admin: String,
    /// How long each question may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 4)]
    pub timeout: u64,
}

/// Healthy when the gateway serves (`/live`) and can decide now (`/ready`); otherwise an error
/// that says which, with the reasons `/ready` gave.
pub async fn run(args: HealthArgs) -> Result<(), String> {
    crate::tls::ensure_crypto_provider();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout.clamp(1, 60)))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let base = args.admin.trim_end_matches('/');
    for path in ["/live", "/ready"] {
        let url = format!("{base}{path}");
        let resp = http
            .get(&url)
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let status = resp.status().as_u16();
        if status != 200 {
            let answer: serde_json::Value = resp.json().await.unwrap_or_default();
            let problems = match answer["problems"].as_array() {
                Some(p) => p
                    .iter()
                    .filter_map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
                None => String::new(),
            };
            return Err(format!("{url} answered {status}: {problems}"));
        }
    }
    println!("healthy: {base} is live and ready");
    Ok(())
}
