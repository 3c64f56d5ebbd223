//! The parts of an HTTP request that rules decide on, as pure code: the normal form of paths, route
//! path patterns, and value templates. Config and gateway both build on these.

pub mod path;
pub mod pattern;
pub mod template;
