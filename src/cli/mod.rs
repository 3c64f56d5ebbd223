//! The subcommands that are more than wiring: the consumer's side on the command line, the
//! conformance checker, the demo, and routes from an OpenAPI document.

pub mod balancer;
pub mod child;
pub mod client;
pub mod cluster;
mod cluster_start;
mod cluster_walk;
pub mod conformance;
pub mod demo;
mod demo_egress;
pub mod display;
pub mod explain;
pub mod health;
pub mod openapi;
pub mod purge;
pub mod rule_tests;
pub mod walk;

/// Ctrl-C or SIGTERM.
pub async fn wait_for_stop() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
