//! A starting rules file from an OpenAPI document: one `[[route]]` per operation, in the format of
//! `policies/*.toml`, for the operator to read and edit. Pure: a document's text in, the rules'
//! text out (`ishare-gateway routes-from-openapi` reads and writes the files).

mod document;
mod routes;
mod write;

pub use document::{check_size, MAX_BYTES, MAX_DEPTH};
pub use routes::RouteDefaults;

/// Why a document gives no rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenApiError {
    #[error("not {}: {message}", if *json { "JSON" } else { "YAML (or JSON)" })]
    Unreadable { json: bool, message: String },
    #[error("larger than {} MiB: no document that big is read", MAX_BYTES >> 20)]
    TooLarge,
    #[error("line {line}: more than {MAX_DEPTH} brackets ([ or {{) open at once: a document nested this deep is not read (reading it takes time growing with the square of its depth)")]
    TooDeep { line: usize },
    #[error("not an OpenAPI document: it has no `openapi` (3.x) or `swagger` (2.0) field")]
    NotOpenApi,
    #[error("{0} is not supported: OpenAPI 3.x and Swagger 2.0 are")]
    Version(String),
    #[error("not as the specification says at {key}: {message}")]
    NotAsSpecified { key: String, message: String },
    #[error("the document has no paths")]
    NoPaths,
    #[error("the document's paths have no operations")]
    NoOperations,
    #[error("the path item {path} refers to {reference}: only #/components/pathItems/NAME (itself no $ref) is followed; write the operations in place")]
    Reference { path: String, reference: String },
    #[error("the path {path} cannot be a route's path: {reason}")]
    PathTemplate { path: String, reason: String },
    #[error("{method} {path}: {method:?} is not an HTTP method")]
    Method { method: String, path: String },
    #[error("no operation can be routed: {0}")]
    NothingRouted(String),
}

/// A rules file made from a document.
#[derive(Debug)]
pub struct Generated {
    /// The TOML text, comments included.
    pub text: String,
    /// How many routes it holds.
    pub routes: usize,
    /// The operations left out (`TRACE /pets`), each with why.
    pub skipped: Vec<String>,
    /// The document's title and version.
    pub title: String,
}

/// The rules for the operations of the document `text` (YAML or JSON), read from a file named
/// `source`.
pub fn routes_from_openapi(
    text: &str,
    source: &str,
    defaults: &RouteDefaults,
) -> Result<Generated, OpenApiError> {
    let doc = document::read(text)?;
    let planned = routes::plan(&doc.operations, defaults)?;
    let skipped: Vec<String> = planned
        .iter()
        .filter_map(|p| match p {
            routes::Planned::Skipped(s) => Some(format!("{} {}: {}", s.method, s.path, s.why)),
            routes::Planned::Route(_) => None,
        })
        .collect();
    let count = planned.len() - skipped.len();
    if count == 0 {
        return Err(OpenApiError::NothingRouted(skipped.join("; ")));
    }
    Ok(Generated {
        text: write::rules(&doc, source, defaults, &planned),
        routes: count,
        skipped,
        title: format!("{:?} {}", doc.title, doc.version),
    })
}

#[cfg(test)]
mod tests;
