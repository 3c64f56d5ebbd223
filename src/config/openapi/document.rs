//! An OpenAPI 3.x or Swagger 2.0 document as far as routes need it: its title and version, where
//! its paths are served, and its operations in document order with what they say about security.

use super::error::{OpenApiError, MAX_BYTES, MAX_DEPTH};
use serde::de::{DeserializeOwned, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// The methods of a path item, as the specifications name them (`query` is OpenAPI 3.2's).
const METHODS: [&str; 9] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace", "query",
];

/// The document, read.
#[derive(Debug)]
pub struct Document {
    pub title: String,
    pub version: String,
    /// `OpenAPI 3.0.0` or `Swagger 2.0`.
    pub format: String,
    /// The servers' URLs (or Swagger's `basePath`) the paths are relative to.
    pub bases: Vec<String>,
    pub operations: Vec<Operation>,
}

/// One operation: a method on a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// As written in the document: `/pets/{petId}`.
    pub path: String,
    /// Upper-cased: `GET`.
    pub method: String,
    pub operation_id: Option<String>,
    pub summary: Option<String>,
    /// The document says the operation needs no security (`security: []`, or an empty requirement).
    pub open: bool,
}

/// A string where the specifications ask for one, which YAML may have read as a number
/// (`version: 1.0`).
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Number(serde_json::Number),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Text(t) => f.write_str(t),
            Scalar::Number(n) => write!(f, "{n}"),
        }
    }
}

/// The fields that tell which specification a document follows.
#[derive(Deserialize)]
struct Probe {
    openapi: Option<Scalar>,
    swagger: Option<Scalar>,
}

/// A security requirement: scheme name → scopes.
type Requirement = BTreeMap<String, IgnoredAny>;

#[derive(Deserialize)]
struct DocumentFile {
    #[serde(default)]
    info: InfoFile,
    paths: Option<Ordered<PathItemFile>>,
    security: Option<Vec<Requirement>>,
    #[serde(default)]
    servers: Vec<ServerFile>,
    #[serde(rename = "basePath")]
    base_path: Option<String>,
    #[serde(default)]
    components: ComponentsFile,
}

#[derive(Default, Deserialize)]
struct InfoFile {
    title: Option<String>,
    version: Option<Scalar>,
}

#[derive(Deserialize)]
struct ServerFile {
    url: String,
}

#[derive(Default, Deserialize)]
struct ComponentsFile {
    #[serde(default, rename = "pathItems")]
    path_items: BTreeMap<String, PathItemFile>,
}

#[derive(Deserialize)]
struct OperationFile {
    #[serde(rename = "operationId")]
    operation_id: Option<String>,
    summary: Option<String>,
    security: Option<Vec<Requirement>>,
}

/// A map read in document order; specification extensions (`x-…`) are left out.
struct Ordered<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct OrderedVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for OrderedVisitor<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key.starts_with("x-") {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        entries.push((key, map.next_value()?));
                    }
                }
                Ok(Ordered(entries))
            }
        }
        d.deserialize_map(OrderedVisitor(std::marker::PhantomData))
    }
}

/// A path item: its operations in document order (method upper-cased), and a `$ref`.
struct PathItemFile {
    reference: Option<String>,
    operations: Vec<(String, OperationFile)>,
}

impl<'de> Deserialize<'de> for PathItemFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PathItemVisitor;
        impl<'de> Visitor<'de> for PathItemVisitor {
            type Value = PathItemFile;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a path item (a map of operations)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut item = PathItemFile {
                    reference: None,
                    operations: Vec::new(),
                };
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "$ref" => item.reference = Some(map.next_value()?),
                        "additionalOperations" => {
                            let more: Ordered<OperationFile> = map.next_value()?;
                            item.operations.extend(
                                more.0
                                    .into_iter()
                                    .map(|(m, op)| (m.to_ascii_uppercase(), op)),
                            );
                        }
                        m if METHODS.contains(&m) => item
                            .operations
                            .push((m.to_ascii_uppercase(), map.next_value()?)),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(item)
            }
        }
        d.deserialize_map(PathItemVisitor)
    }
}

/// Whether a document of `bytes` bytes may be read.
pub fn check_size(bytes: u64) -> Result<(), OpenApiError> {
    match usize::try_from(bytes) {
        Ok(n) if n <= MAX_BYTES => Ok(()),
        _ => Err(OpenApiError::TooLarge),
    }
}

/// Whether the document nests no deeper than `MAX_DEPTH`, counted before it is parsed: every `[`
/// and `{` opens and every `]` and `}` closes, quoted or not (a document needs that many unclosed
/// brackets in its text to be refused). The line where it goes deeper, if it does.
fn check_depth(text: &str) -> Result<(), OpenApiError> {
    let mut depth = 0usize;
    let mut line = 1;
    for b in text.bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(OpenApiError::TooDeep { line });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'\n' => line += 1,
            _ => {}
        }
    }
    Ok(())
}

/// Read a document: JSON when it starts with `{`, YAML otherwise; one too large or nested too
/// deep is refused unparsed.
pub fn read(text: &str) -> Result<Document, OpenApiError> {
    check_size(text.len() as u64)?;
    check_depth(text)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let json = text.trim_start().starts_with('{');
    parse::<IgnoredAny>(text, json).map_err(|e| OpenApiError::Unreadable { json, message: e.1 })?;
    let probe = parse::<Probe>(text, json).map_err(|_| OpenApiError::NotOpenApi)?;
    let format = format(&probe)?;
    let file = parse::<DocumentFile>(text, json)
        .map_err(|(path, message)| OpenApiError::NotAsSpecified { key: path, message })?;
    let title = file.info.title.clone().unwrap_or_else(|| "untitled".into());
    let version = file
        .info
        .version
        .as_ref()
        .map_or_else(|| "unversioned".into(), Scalar::to_string);
    let bases = match &file.base_path {
        Some(base) => vec![base.clone()],
        None => file.servers.iter().map(|s| s.url.clone()).collect(),
    };
    Ok(Document {
        title,
        version,
        format,
        bases,
        operations: operations(file)?,
    })
}

/// `T` from the text; on failure, the key where it failed and why.
fn parse<T: DeserializeOwned>(text: &str, json: bool) -> Result<T, (String, String)> {
    // YAML's messages name the key already.
    fn split<E: fmt::Display>(e: serde_path_to_error::Error<E>) -> (String, String) {
        let (path, message) = (e.path().to_string(), e.inner().to_string());
        let message = message
            .strip_prefix(&format!("{path}: "))
            .unwrap_or(&message);
        (path.clone(), message.to_string())
    }
    if json {
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
            .map_err(split)
    } else {
        serde_path_to_error::deserialize(serde_yaml_ng::Deserializer::from_str(text)).map_err(split)
    }
}

/// `OpenAPI 3.x.y` or `Swagger 2.0`; any other version is refused.
fn format(probe: &Probe) -> Result<String, OpenApiError> {
    match (&probe.openapi, &probe.swagger) {
        (Some(v), _) => {
            let v = v.to_string();
            match v.split('.').next() {
                Some("3") => Ok(format!("OpenAPI {v}")),
                _ => Err(OpenApiError::Version(format!("openapi: {v}"))),
            }
        }
        (None, Some(v)) => {
            let v = v.to_string();
            match v.as_str() {
                "2.0" | "2" => Ok("Swagger 2.0".into()),
                _ => Err(OpenApiError::Version(format!("swagger: {v}"))),
            }
        }
        (None, None) => Err(OpenApiError::NotOpenApi),
    }
}

/// Every operation of every path, in document order; path items that are `$ref`s to
/// `#/components/pathItems/…` are followed.
fn operations(file: DocumentFile) -> Result<Vec<Operation>, OpenApiError> {
    let paths = file.paths.map(|p| p.0).unwrap_or_default();
    if paths.is_empty() {
        return Err(OpenApiError::NoPaths);
    }
    let mut out = Vec::new();
    for (path, item) in &paths {
        let referenced = match &item.reference {
            Some(r) => referenced_item(&file.components, path, r)?
                .operations
                .as_slice(),
            None => &[],
        };
        let own = item.operations.iter();
        // The item's own operations, then those of the item it refers to for other methods.
        let inherited = referenced
            .iter()
            .filter(|(m, _)| !item.operations.iter().any(|(own, _)| own == m));
        for (method, op) in own.chain(inherited) {
            let security = op.security.as_ref().or(file.security.as_ref());
            out.push(Operation {
                path: path.clone(),
                method: method.clone(),
                operation_id: op.operation_id.clone(),
                summary: op.summary.clone(),
                open: security.is_some_and(|s| s.is_empty() || s.iter().any(|r| r.is_empty())),
            });
        }
    }
    if out.is_empty() {
        return Err(OpenApiError::NoOperations);
    }
    Ok(out)
}

/// The path item a `$ref` of `path` names: only `#/components/pathItems/NAME` is followed.
fn referenced_item<'a>(
    components: &'a ComponentsFile,
    path: &str,
    reference: &str,
) -> Result<&'a PathItemFile, OpenApiError> {
    let unresolved = || OpenApiError::Reference {
        path: path.to_string(),
        reference: reference.to_string(),
    };
    let name = reference
        .strip_prefix("#/components/pathItems/")
        .filter(|n| !n.contains('/'))
        .ok_or_else(unresolved)?
        .replace("~1", "/")
        .replace("~0", "~");
    components
        .path_items
        .get(&name)
        .filter(|item| item.reference.is_none())
        .ok_or_else(unresolved)
}
