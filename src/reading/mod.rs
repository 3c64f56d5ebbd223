//! Outside input read as the readers downstream read it, one rule each: numbers exact and
//! bounded, compared only where an exact decimal reader and a binary64 reader agree (`number`);
//! two member names the same name where a common JSON binder binds them together (`names`); the
//! characters a value a rule reads may hold (`text`); and JSON read one way only (`json`). Every
//! reader of the gateway (request paths, queries, headers and bodies, AuthZEN, signed tokens)
//! goes through these.

pub mod json;
pub mod names;
pub mod number;
pub mod text;
