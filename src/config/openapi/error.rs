//! What a document may be, and why one gives no rules.

/// The largest document read, in bytes: API descriptions are far smaller.
pub const MAX_BYTES: usize = 8 << 20;

/// The most brackets (`[`, `{`) open at once. YAML's scanner walks every open flow collection at
/// each token, so its time grows with the square of the nesting; JSON documents are flow
/// collections throughout, and real ones nest a few dozen levels at most.
pub const MAX_DEPTH: usize = 64;

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
