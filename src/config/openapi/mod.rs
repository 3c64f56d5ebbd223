//! A starting rules file from an OpenAPI document: one `[[route]]` per operation, in the format of
//! `policies/*.toml`, for the operator to read and edit. Pure: a document's text in, the rules'
//! text out (`ishare-gateway routes-from-openapi` reads and writes the files).

mod document;
mod error;
mod routes;
mod write;

pub use document::check_size;
pub use error::{OpenApiError, MAX_BYTES, MAX_DEPTH};
pub use routes::RouteDefaults;

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
