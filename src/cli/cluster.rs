//! `ishare-gateway cluster`: several instances on one machine, deployed as a fleet is — Redis, the
//! testbed, two gateway processes sharing Redis, and HAProxy in front (TLS, round robin, health
//! checks on /ready, retries of idempotent requests) — and a walk through what the fleet shares: a
//! token from one instance good at the other, an assertion replayed at the other refused, a person
//! signed in at one known at the other and signed out at both, traffic that flows while one
//! instance reloads and another stops, and clients told apart behind the balancer (their address
//! and scheme reach the backend; one client's sign-ins are bounded alone).

use super::cluster_start::{start, Cluster};
use super::cluster_walk::walk;
use super::walk::{heading, shown};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    #[arg(long, default_value = "conf/testbed.toml")]
    pub testbed_config: PathBuf,
    /// The configuration every instance starts from (its listeners, admin address, public URL and
    /// [replay] are the cluster's).
    #[arg(long, default_value = "conf/gateway.toml")]
    pub config: PathBuf,
    /// Stop everything after the walk-through instead of serving until Ctrl-C.
    #[arg(long)]
    pub exit: bool,
}

/// Run the cluster and its walk-through; serve until Ctrl-C unless `exit`.
pub fn run(args: ClusterArgs) -> Result<(), String> {
    let _log = crate::telemetry::init_logging(false, "warn,pingora_core::connectors=off", true);
    crate::tls::ensure_crypto_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let mut cluster = start(&args.testbed_config, &args.config).await?;
        let sp = crate::config::load(&cluster.instances[0].config)
            .map_err(|e| e.to_string())?
            .identity
            .party_id
            .to_string();
        let walked = walk(&mut cluster, &sp).await;
        match &walked {
            Ok(()) => {
                heading("Several instances are running:");
                println!("  {}   the balancer (HAProxy), TLS", cluster.url);
                for i in &cluster.instances {
                    println!("  {}   gateway {} (admin {})", i.tls, i.name, i.admin);
                }
                println!("  logs and configurations in {}", shown(&cluster.dir));
                if !args.exit {
                    println!("Ctrl-C stops everything.");
                    super::wait_for_stop().await;
                }
            }
            Err(e) => eprintln!("the walk-through failed: {e}"),
        }
        println!("\nStopping...");
        for i in &mut cluster.instances {
            if let Some(p) = i.process.as_mut() {
                p.stop(Duration::from_secs(10)).await;
            }
        }
        let Cluster { testbed, .. } = cluster;
        testbed.stop().await;
        walked
    })
}
