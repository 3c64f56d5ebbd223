//! `ishare-gateway routes-from-openapi`: a starting rules file from an OpenAPI document, written to
//! standard output or to a file that is not overwritten unless asked.

use crate::config::openapi::{
    check_size, routes_from_openapi, OpenApiError, RouteDefaults, MAX_BYTES,
};
use crate::scheme::party::PartyId;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct RoutesFromOpenApiArgs {
    /// The OpenAPI 3.x (or Swagger 2.0) document, YAML or JSON.
    pub file: PathBuf,
    /// Write the rules to this file (in the rules directory) instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Replace the --output file if it exists.
    #[arg(long, requires = "output")]
    pub force: bool,
    /// The [[upstream]] of gateway.toml the routes forward to.
    #[arg(long, default_value = "backend")]
    pub upstream: String,
    /// The data owner whose policies decide the routes (their policy_issuer), e.g.
    /// EU.EORI.NL000000005.
    #[arg(long, value_name = "PARTY")]
    pub policy_issuer: PartyId,
    /// The scheme's name, as `scheme` in gateway.toml: the prefix of the actions the file names.
    #[arg(long, default_value = crate::config::defaults::SCHEME, value_parser = scheme_name)]
    pub scheme: String,
}

fn scheme_name(text: &str) -> Result<String, String> {
    match text.is_empty() || text.chars().any(char::is_whitespace) {
        true => Err("a single word, e.g. iSHARE".into()),
        false => Ok(text.to_string()),
    }
}

/// Read the document, make the rules, write them; say on standard error what was made.
pub fn run(args: RoutesFromOpenApiArgs) -> Result<(), String> {
    let text = read(&args.file)?;
    let source = args.file.file_name().map_or_else(
        || args.file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let defaults = RouteDefaults {
        upstream: args.upstream,
        policy_issuer: args.policy_issuer,
        scheme: args.scheme,
    };
    let generated = routes_from_openapi(&text, &source, &defaults)
        .map_err(|e| format!("{}: {e}", args.file.display()))?;
    match &args.output {
        Some(path) => write_file(path, &generated.text, args.force)?,
        None => std::io::stdout()
            .write_all(generated.text.as_bytes())
            .map_err(|e| format!("cannot write the rules: {e}"))?,
    }
    eprintln!(
        "{} routes from {} ({source}){}",
        generated.routes,
        generated.title,
        args.output
            .as_ref()
            .map(|p| format!(" in {}", p.display()))
            .unwrap_or_default()
    );
    for skipped in &generated.skipped {
        eprintln!("left out: {skipped}");
    }
    Ok(())
}

/// The document's text; one larger than routes are made from is refused unread.
fn read(path: &Path) -> Result<String, String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(cannot)?;
    let refused = |e: OpenApiError| format!("{}: {e}", path.display());
    check_size(file.metadata().map_err(cannot)?.len()).map_err(refused)?;
    // A file that grows (or a pipe, of no size) is still read no further than can be refused.
    let mut bytes = Vec::new();
    file.take(MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    check_size(bytes.len() as u64).map_err(refused)?;
    String::from_utf8(bytes).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Write `text` to a new file, or over an existing one only with `force`.
fn write_file(path: &Path, text: &str, force: bool) -> Result<(), String> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    match force {
        true => options.create(true).truncate(true),
        false => options.create_new(true),
    };
    let mut file = options.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => {
            format!("{} exists: pass --force to replace it", path.display())
        }
        _ => format!("cannot write {}: {e}", path.display()),
    })?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
