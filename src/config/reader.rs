//! The TOML of a configuration file read into its file types with every problem it has, each at
//! its place: every syntax error; every unknown key, with the known key of its table it resembles
//! (read as that key, so that a misspelled required key hides nothing else); every value of the
//! wrong type (the key left out and the reading carried on); every missing key.

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

/// A problem of the document: where it is (a span of the text), at which key, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    pub span: Range<usize>,
    pub key: String,
    pub message: String,
}

/// `text` read into `T`, and every problem found in file order. `T` is given unless a syntax error
/// or a missing key (a table that cannot be read) stopped it: the keys of the wrong type are then
/// left out.
pub(super) fn read<T: DeserializeOwned>(text: &str) -> (Option<T>, Vec<Found>) {
    let (root, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        return (None, errors.iter().map(|e| syntax(text, e)).collect());
    }
    let reading = Reading::default();
    let value = read_root::<T>(root, &reading);
    let mut found = reading.found.into_inner();
    found.sort_by_key(|f| f.span.start);
    (value.filter(|_| !reading.incomplete.get()), found)
}

/// The keys `T` knows in each table that `text` has, by their whole names without element
/// indexes (`listener.tls.certificate`), whatever else the text says.
#[cfg(test)]
pub(super) fn known_keys<T: DeserializeOwned>(text: &str) -> BTreeSet<String> {
    let (root, _) = DeTable::parse_recoverable(text);
    let reading = Reading::default();
    read_root::<T>(root, &reading);
    reading.known.into_inner()
}

/// The document read into `T`, again each time a key is left out, until nothing more is.
fn read_root<T: DeserializeOwned>(root: Spanned<DeTable<'_>>, reading: &Reading) -> Option<T> {
    let span = root.span();
    let root = Spanned::new(span, DeValue::Table(root.into_inner()));
    loop {
        let node = Node {
            reading,
            value: &root,
            path: String::new(),
        };
        match T::deserialize(node) {
            Ok(v) => return Some(v),
            Err(e) => {
                let retry = e.retry;
                reading.settle(e);
                if !retry {
                    return None;
                }
            }
        }
    }
}

/// A syntax error; a duplicate key named as written.
fn syntax(text: &str, e: &toml::de::Error) -> Found {
    let span = e.span().unwrap_or(0..0);
    let mut message = e.message().trim().to_string();
    if message == "duplicate key" {
        if let Some(key) = text.get(span.clone()) {
            message = format!("duplicate key `{key}`");
        }
    }
    Found {
        span,
        key: String::new(),
        message,
    }
}

/// What one reading of the document (and its retries) has found and left out.
#[derive(Default)]
struct Reading {
    found: RefCell<Vec<Found>>,
    /// The keys (and elements) left out of the next attempt.
    skip: RefCell<BTreeSet<String>>,
    /// A table was left out: the value read is not the document's.
    incomplete: std::cell::Cell<bool>,
    /// The keys the types read know, by their whole names without element indexes.
    #[cfg(test)]
    known: RefCell<BTreeSet<String>>,
}

impl Reading {
    fn record(&self, found: Found) {
        let mut all = self.found.borrow_mut();
        if !all.contains(&found) {
            all.push(found);
        }
    }

    /// Records an error not yet recorded.
    fn settle(&self, e: Error) {
        if !e.settled {
            self.record(Found {
                span: e.span.unwrap_or(0..0),
                key: e.path.unwrap_or_default(),
                message: e.message,
            });
        }
    }

    fn skipped(&self, path: &str) -> bool {
        self.skip.borrow().contains(path)
    }

    /// Leaves `path` out of the next attempt; whether it was read in this one.
    fn leave_out(&self, path: &str) -> bool {
        !path.is_empty() && self.skip.borrow_mut().insert(path.to_string())
    }
}

#[derive(Debug)]
struct Error {
    message: String,
    span: Option<Range<usize>>,
    /// The innermost key the error is about.
    path: Option<String>,
    /// Recorded (or knowingly not: a key missing because its value was left out).
    settled: bool,
    /// Something was left out: read the document again.
    retry: bool,
}

impl Error {
    /// The error placed at the innermost value it passes.
    fn at(mut self, path: &str, span: Range<usize>) -> Self {
        self.path.get_or_insert_with(|| path.to_string());
        self.span.get_or_insert(span);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error {
            message: msg.to_string(),
            span: None,
            path: None,
            settled: false,
            retry: false,
        }
    }
}

impl From<toml::de::Error> for Error {
    fn from(e: toml::de::Error) -> Self {
        Error {
            span: e.span(),
            ..de::Error::custom(e.message())
        }
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// One value of the document, at its key path (`upstream[0].addresses`).
struct Node<'r, 'v, 'de> {
    reading: &'r Reading,
    value: &'v Spanned<DeValue<'de>>,
    path: String,
}

impl<'de> Node<'_, '_, 'de> {
    /// A scalar, as toml reads it.
    fn scalar(&self) -> ValueDeserializer<'de> {
        ValueDeserializer::from(self.value.clone())
    }

    fn placed<T>(&self, r: Result<T, Error>) -> Result<T, Error> {
        r.map_err(|e| e.at(&self.path, self.value.span()))
    }
}

impl<'de> de::Deserializer<'de> for Node<'_, '_, 'de> {
    type Error = Error;

    fn deserialize_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let r = match self.value.get_ref() {
            DeValue::Table(t) => visitor.visit_map(Entries::of_map(self.reading, t, &self.path)),
            DeValue::Array(a) => visitor.visit_seq(Elements {
                reading: self.reading,
                items: a.iter().enumerate(),
                path: &self.path,
            }),
            _ => self.scalar().deserialize_any(visitor).map_err(Error::from),
        };
        self.placed(r)
    }

    fn deserialize_option<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: de::Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: de::Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let DeValue::Table(t) = self.value.get_ref() else {
            let r = self.scalar().deserialize_struct(name, fields, visitor);
            return self.placed(r.map_err(Error::from));
        };
        let entries = Entries::of_struct(self.reading, t, &self.path, fields);
        let r = visitor.visit_map(entries);
        self.placed(r).map_err(|e| self.missing(e))
    }

    fn deserialize_enum<V: de::Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let r = self.scalar().deserialize_enum(name, variants, visitor);
        self.placed(r.map_err(Error::from))
    }

    fn deserialize_ignored_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map identifier
    }
}

impl Node<'_, '_, '_> {
    /// A key missing from this table: recorded, unless its value was left out for an error of
    /// its own; the table is left out of the next attempt, which looks for the other problems.
    fn missing(&self, mut e: Error) -> Error {
        let Some(name) = e
            .message
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`'))
        else {
            return e;
        };
        if !e.settled {
            if !self.reading.skipped(&child(&self.path, name)) {
                self.reading.record(Found {
                    span: self.value.span(),
                    key: self.path.clone(),
                    message: e.message.clone(),
                });
            }
            e.settled = true;
            e.retry = self.reading.leave_out(&self.path);
            self.reading.incomplete.set(true);
        }
        e
    }
}

/// The keys of a table given to its type: all of them for a map, the known ones for a struct
/// (an unknown one recorded, and given as the known key it resembles if that one is absent).
struct Entries<'r, 'v, 'de> {
    reading: &'r Reading,
    entries: std::vec::IntoIter<(String, &'v Spanned<DeValue<'de>>)>,
    path: String,
    next: Option<(String, &'v Spanned<DeValue<'de>>)>,
    /// A struct's fields: an error of a value is recorded and its key left out.
    is_struct: bool,
}

impl<'r, 'v, 'de> Entries<'r, 'v, 'de> {
    fn of_map(reading: &'r Reading, table: &'v DeTable<'de>, path: &str) -> Self {
        let entries = table
            .iter()
            .map(|(k, v)| (k.get_ref().to_string(), v))
            .filter(|(k, _)| !reading.skipped(&child(path, k)))
            .collect::<Vec<_>>();
        Entries {
            reading,
            entries: entries.into_iter(),
            path: path.to_string(),
            next: None,
            is_struct: false,
        }
    }

    fn of_struct(
        reading: &'r Reading,
        table: &'v DeTable<'de>,
        path: &str,
        fields: &'static [&'static str],
    ) -> Self {
        #[cfg(test)]
        {
            let table_path: String = path
                .split('[')
                .map(|p| p.split_once(']').map_or(p, |(_, rest)| rest))
                .collect();
            reading
                .known
                .borrow_mut()
                .extend(fields.iter().map(|f| child(&table_path, f)));
        }
        let present: BTreeSet<&str> = table.keys().map(|k| k.get_ref().as_ref()).collect();
        let mut given = BTreeSet::new();
        let mut entries = Vec::new();
        for (k, v) in table.iter() {
            let key = k.get_ref().as_ref();
            let name = if fields.contains(&key) {
                Some(key)
            } else {
                let resembled = resembled(key, fields);
                let message = match resembled {
                    Some(known) => format!("unknown key; did you mean `{known}`?"),
                    None => "unknown key".to_string(),
                };
                reading.record(Found {
                    span: k.span(),
                    key: child(path, key),
                    message,
                });
                resembled.filter(|known| !present.contains(known))
            };
            if let Some(name) = name {
                if given.insert(name) && !reading.skipped(&child(path, name)) {
                    entries.push((name.to_string(), v));
                }
            }
        }
        Entries {
            reading,
            entries: entries.into_iter(),
            path: path.to_string(),
            next: None,
            is_struct: true,
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'_, '_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        let k = seed.deserialize(IntoDeserializer::<Error>::into_deserializer(key.clone()))?;
        self.next = Some((key, value));
        Ok(Some(k))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (key, value) = self
            .next
            .take()
            .ok_or_else(|| <Error as de::Error>::custom("a value asked for before its key"))?;
        let path = child(&self.path, &key);
        let node = Node {
            reading: self.reading,
            value,
            path: path.clone(),
        };
        seed.deserialize(node).map_err(|mut e| {
            if self.is_struct && !e.settled {
                self.reading.record(Found {
                    span: e.span.clone().unwrap_or(value.span()),
                    key: e.path.clone().unwrap_or_else(|| path.clone()),
                    message: e.message.clone(),
                });
                e.settled = true;
                e.retry = self.reading.leave_out(&path);
            }
            e
        })
    }
}

/// The elements of an array, each at its index (one left out keeps the others' indexes).
struct Elements<'r, 'v, 'p, 'de> {
    reading: &'r Reading,
    items: std::iter::Enumerate<std::slice::Iter<'v, Spanned<DeValue<'de>>>>,
    path: &'p str,
}

impl<'de> SeqAccess<'de> for Elements<'_, '_, '_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        for (i, value) in self.items.by_ref() {
            let path = format!("{}[{i}]", self.path);
            if self.reading.skipped(&path) {
                continue;
            }
            let node = Node {
                reading: self.reading,
                value,
                path,
            };
            return seed.deserialize(node).map(Some);
        }
        Ok(None)
    }
}

/// The known key `key` is most likely a misspelling of: the nearest, at most a third of its
/// letters (and at least one) apart.
fn resembled(key: &str, known: &[&'static str]) -> Option<&'static str> {
    let key = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&key, k), *k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The letters to insert, delete or replace to make `a` into `b` (Levenshtein).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let replaced = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = replaced.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Doc {
        #[serde(default, rename = "upstream")]
        upstreams: Vec<Up>,
        threads: Option<usize>,
        name: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    struct Up {
        name: String,
        addresses: Vec<String>,
    }

    fn problems(text: &str) -> (Option<Doc>, Vec<String>) {
        let (doc, found) = read::<Doc>(text);
        let lines = found
            .into_iter()
            .map(|f| {
                let line = text[..f.span.start].matches('\n').count() + 1;
                format!("{line}: {}: {}", f.key, f.message)
            })
            .collect();
        (doc, lines)
    }

    #[test]
    fn a_misspelled_required_key_is_read_as_the_key_it_resembles() {
        let (doc, found) =
            problems("threads = 2\n[[upstream]]\nname = \"a\"\nadresses = [\"x:1\"]\ncolour = 1\n");
        let doc = doc.expect("read");
        assert_eq!(doc.threads, Some(2));
        assert_eq!(doc.upstreams[0].name, "a");
        assert_eq!(doc.upstreams[0].addresses, ["x:1"]);
        assert_eq!(
            found,
            [
                "4: upstream[0].adresses: unknown key; did you mean `addresses`?",
                "5: upstream[0].colour: unknown key",
            ]
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_left_out_and_the_rest_read() {
        let (doc, found) = problems("threads = \"many\"\nname = 3\nspeed = 1\n");
        let doc = doc.expect("read");
        assert_eq!((doc.threads, doc.name), (None, None));
        assert_eq!(
            found,
            [
                "1: threads: invalid type: string \"many\", expected usize",
                "2: name: invalid type: integer `3`, expected a string",
                "3: speed: unknown key",
            ]
        );
    }

    #[test]
    fn a_missing_key_leaves_its_table_out_and_the_others_are_read() {
        let (doc, found) = problems(
            "[[upstream]]\naddresses = []\n[[upstream]]\nname = \"b\"\naddresses = [1]\nnam = 2\n",
        );
        assert!(doc.is_none());
        assert_eq!(
            found,
            [
                "1: upstream[0]: missing field `name`",
                "5: upstream[1].addresses[0]: invalid type: integer `1`, expected a string",
                "6: upstream[1].nam: unknown key; did you mean `name`?",
            ]
        );
    }

    #[test]
    fn every_duplicate_key_is_named() {
        let (doc, found) = problems("name = \"a\"\nname = \"b\"\n[x]\n[x]\n");
        assert!(doc.is_none());
        assert_eq!(
            found,
            ["2: : duplicate key `name`", "4: : duplicate key `x`"]
        );
    }

    #[test]
    fn the_nearest_known_key_within_a_third_of_its_letters_is_suggested() {
        let known = ["addresses", "name", "tls", "sni"];
        assert_eq!(resembled("adresses", &known), Some("addresses"));
        assert_eq!(resembled("Addresses", &known), Some("addresses"));
        assert_eq!(resembled("nam", &known), Some("name"));
        assert_eq!(resembled("speed", &known), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
