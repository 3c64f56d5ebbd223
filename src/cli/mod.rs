//! The subcommands that are more than wiring: the consumer's side on the command line, and the demo.

pub mod client;
pub mod display;
