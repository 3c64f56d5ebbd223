//! The `ishare-gateway` command: wiring only.

use clap::{Parser, Subcommand};
use ishare_gateway::cli;
use ishare_gateway::testbed::{config::TestbedConfig, Testbed};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ishare-gateway",
    version,
    about = "Policy enforcement gateway for iSHARE-style data-sharing trust schemes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the testbed: a scheme owner, an authorisation registry, an entitled party, service
    /// providers and an echo backend on loopback.
    Testbed {
        #[arg(long, default_value = "conf/testbed.toml")]
        config: PathBuf,
    },
    /// The consumer's side of the scheme: assertions, tokens, parties, evidence, service calls.
    Client(Box<cli::client::ClientArgs>),
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .init();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

async fn run_testbed(config: PathBuf) -> Result<(), String> {
    let config = TestbedConfig::load(&config).map_err(|e| e.to_string())?;
    let testbed = Testbed::start(&config).await.map_err(|e| e.to_string())?;
    println!(
        "testbed running ({} scheme):\n{}",
        testbed.scheme,
        testbed.summary()
    );
    println!("Ctrl-C stops it.");
    wait_for_stop().await;
    testbed.stop().await;
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn wait_for_stop() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Testbed { config } => {
            init_logging();
            runtime().block_on(run_testbed(config))
        }
        Command::Client(args) => runtime().block_on(cli::client::run(*args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
