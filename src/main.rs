//! The `ishare-gateway` command: wiring only.

use clap::{Parser, Subcommand};
use ishare_gateway::cli;
use ishare_gateway::config::{self, model::LogFormat};
use ishare_gateway::gateway::server;
use ishare_gateway::telemetry;
use ishare_gateway::testbed::{config::TestbedConfig, Testbed};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The allocator the gateway and its benchmark baseline (`examples/bare_proxy.rs`) both run on:
/// the proxy's request path allocates and frees small buffers at a high rate, where mimalloc's
/// thread-local free lists beat the system allocator's (see the load benchmark).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Run the gateway.
    Run {
        #[arg(long, default_value = "conf/gateway.toml")]
        config: PathBuf,
        /// Take over the listeners of a running gateway (graceful upgrade; send it SIGQUIT).
        #[arg(long)]
        upgrade: bool,
        /// Run in the background.
        #[arg(long)]
        daemon: bool,
    },
    /// Check configuration files (gateway or testbed) and the rules they name; print every error.
    Check {
        #[arg(long, required = true)]
        config: Vec<PathBuf>,
    },
    /// Run the testbed: a scheme owner, an authorisation registry, an entitled party, service
    /// providers, an identity provider and an echo backend on loopback.
    Testbed {
        #[arg(long, default_value = "conf/testbed.toml")]
        config: PathBuf,
        /// Generate the key material (if missing) and exit.
        #[arg(long)]
        prepare: bool,
    },
    /// The testbed and the gateway in one process, and a walk through the scheme.
    Demo {
        #[arg(long, default_value = "conf/testbed.toml")]
        testbed_config: PathBuf,
        #[arg(long, default_value = "conf/gateway.toml")]
        config: PathBuf,
        /// The testbed of the scheme of 3.0 walked through after the first.
        #[arg(long, default_value = "conf/testbed-3.0.toml")]
        testbed_3_0_config: PathBuf,
        /// The gateway in the scheme of 3.0.
        #[arg(long, default_value = "conf/gateway-3.0.toml")]
        config_3_0: PathBuf,
        /// The consumer's side, in front of the first gateway.
        #[arg(long, default_value = "conf/egress.toml")]
        egress_config: PathBuf,
        /// Stop after the walk-through instead of serving until Ctrl-C.
        #[arg(long)]
        exit: bool,
    },
    /// Several instances on one machine: Redis, the testbed, two gateways sharing Redis, HAProxy in
    /// front; walks through what they share, then serves until Ctrl-C.
    Cluster(cli::cluster::ClusterArgs),
    /// The consumer's side of the scheme: assertions, tokens, parties, evidence, service calls.
    Client(Box<cli::client::ClientArgs>),
    /// What the gateway would decide on a request, and why: the route, the values taken, the mask,
    /// the evidence, the policy and rule that decided, and the outcome.
    Explain(Box<cli::explain::ExplainArgs>),
    /// Run rule fixtures (a request, a caller, evidence or a registry answer, and the expected
    /// status and reason) against the configuration's rules; exits non-zero when one fails.
    Test(cli::rule_tests::TestArgs),
    /// Test a participant (service provider, authorisation registry, scheme owner or identity
    /// provider) against the scheme's conformance cases; exits non-zero when a case fails.
    Conformance(Box<cli::conformance::ConformanceArgs>),
    /// Write a starting rules file (policies/*.toml) from an OpenAPI 3.x or Swagger 2.0 document:
    /// one delegated route per operation, to read and edit before use.
    RoutesFromOpenapi(cli::openapi::RoutesFromOpenApiArgs),
    /// Drop cached decisions at a running gateway (and every instance of its fleet) by policy
    /// issuer, access subject or all, through its admin listener; exits non-zero unless done.
    Purge(cli::purge::PurgeArgs),
    /// Whether a running gateway is live and ready, asked of its admin listener (the container's
    /// health check); exits non-zero with the reasons when not.
    Health(cli::health::HealthArgs),
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn run(path: PathBuf, upgrade: bool, daemon: bool) -> Result<(), String> {
    if is_egress_config(&path) {
        if upgrade || daemon {
            return Err("--upgrade and --daemon are the gateway's: the consumer's side runs in the foreground (under systemd, or in a container)".into());
        }
        let config = config::egress::load(&path)
            .map_err(|e| format!("the configuration is not valid:\n{e}"))?;
        let _log = telemetry::init_logging(
            config.log.format == LogFormat::Json,
            &config.log.level,
            true,
        );
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        return runtime().block_on(ishare_gateway::egress::run(path, config));
    }
    let config =
        config::load(&path).map_err(|e| format!("the configuration is not valid:\n{e}"))?;
    let _log = telemetry::init_logging(
        config.log.format == LogFormat::Json,
        &config.log.level,
        !daemon,
    );
    tracing::info!(
        party = %config.identity.party_id,
        routes = config.routes.len(),
        listeners = ?config.listeners.iter().map(|l| l.address.to_string()).collect::<Vec<_>>(),
        "starting"
    );
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let opt = pingora::server::configuration::Opt {
        upgrade,
        daemon,
        ..Default::default()
    };
    let built = server::build(config, path, Some(opt), true)?;
    // Returns after a graceful shutdown and the spans still queued are sent; the log guard then
    // writes out what is buffered.
    built.run(pingora::server::RunArgs::default());
    Ok(())
}

/// A configuration of the consumer's side has outgoing routes.
fn is_egress_config(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| config::egress::is_egress(&t))
}

/// A testbed config has parties; anything else is a gateway config.
fn is_testbed_config(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| t.contains_key("party"))
}

fn check(paths: Vec<PathBuf>) -> Result<(), String> {
    let mut failed = false;
    for path in paths {
        if is_testbed_config(&path) {
            match TestbedConfig::load(&path).and_then(|c| c.check_policies().map(|n| (c, n))) {
                Ok((c, policies)) => println!(
                    "{}: ok (testbed: {} parties, {policies} policies)",
                    path.display(),
                    c.parties.len()
                ),
                Err(e) => {
                    failed = true;
                    println!("{e}");
                }
            }
            continue;
        }
        if is_egress_config(&path) {
            match config::egress::load(&path) {
                Ok(c) => {
                    for warning in &c.warnings {
                        println!("warning: {warning}");
                    }
                    println!(
                        "{}: ok (consumer's side on {}: {} providers, {} outgoing routes)",
                        path.display(),
                        c.consumer.address,
                        c.providers.len(),
                        c.routes.len()
                    );
                }
                Err(errors) => {
                    failed = true;
                    println!("{errors}");
                }
            }
            continue;
        }
        match config::load(&path) {
            Ok(c) => {
                for warning in &c.warnings {
                    println!("warning: {warning}");
                }
                let summary = format!(
                    "{}: ok ({} listeners, {} upstreams, {} routes from {})",
                    path.display(),
                    c.listeners.len(),
                    c.upstreams.len(),
                    c.routes.len(),
                    c.rules_dir.display()
                );
                // Everything `run` does before it binds its listeners, so that what passes here
                // starts there.
                match server::build(c, path.clone(), None, false) {
                    Ok(_) => println!("{summary}"),
                    Err(e) => {
                        failed = true;
                        println!("{}: {e}", path.display());
                    }
                }
            }
            Err(errors) => {
                failed = true;
                println!("{errors}");
            }
        }
    }
    if failed {
        Err("the configuration has errors".into())
    } else {
        Ok(())
    }
}

async fn run_testbed(config: PathBuf, prepare: bool) -> Result<(), String> {
    let config = TestbedConfig::load(&config).map_err(|e| e.to_string())?;
    if prepare {
        let keys = ishare_gateway::testbed::prepare(&config).map_err(|e| e.to_string())?;
        println!("testbed key material ready in {}", keys.data_dir.display());
        return Ok(());
    }
    let testbed = Testbed::start(&config).await.map_err(|e| e.to_string())?;
    println!(
        "testbed running ({} scheme):\n{}",
        testbed.scheme,
        testbed.summary()
    );
    println!("Ctrl-C stops it.");
    cli::wait_for_stop().await;
    testbed.stop().await;
    Ok(())
}

/// Commands that print for a pipeline end quietly when the reader goes away (`… | head`), as
/// command-line tools do, instead of failing on the write.
fn end_quietly_on_broken_pipe() {
    // SAFETY: restoring the default disposition of SIGPIPE before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Client(_)
            | Command::Check { .. }
            | Command::Conformance(_)
            | Command::Explain(_)
            | Command::Test(_)
            | Command::RoutesFromOpenapi(_)
    ) {
        end_quietly_on_broken_pipe();
    }
    let result = match cli.command {
        Command::Run {
            config,
            upgrade,
            daemon,
        } => run(config, upgrade, daemon),
        Command::Check { config } => check(config),
        Command::Demo {
            testbed_config,
            config,
            testbed_3_0_config,
            config_3_0,
            egress_config,
            exit,
        } => cli::demo::run(
            cli::demo::DemoConfigs {
                testbed: testbed_config,
                gateway: config,
                testbed_3_0: testbed_3_0_config,
                gateway_3_0: config_3_0,
                egress: egress_config,
            },
            exit,
        ),
        Command::Testbed { config, prepare } => {
            let _log = telemetry::init_logging(false, "info", true);
            runtime().block_on(run_testbed(config, prepare))
        }
        Command::Cluster(args) => cli::cluster::run(args),
        Command::Client(args) => runtime().block_on(cli::client::run(*args)),
        Command::Conformance(args) => runtime().block_on(cli::conformance::run(*args)),
        Command::Explain(args) => runtime().block_on(cli::explain::run(*args)),
        Command::Test(args) => match runtime().block_on(cli::rule_tests::run(args)) {
            Ok(true) => Ok(()),
            Ok(false) => Err("a rule test failed".into()),
            Err(e) => Err(e),
        },
        Command::RoutesFromOpenapi(args) => cli::openapi::run(args),
        Command::Purge(args) => runtime().block_on(cli::purge::run(args)),
        Command::Health(args) => runtime().block_on(cli::health::run(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
