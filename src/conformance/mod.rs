//! The conformance checker: the scheme's admission tests, run against any participant from the
//! command line. Each case sends what the scheme's conformance tool sends and checks what comes
//! back: the status, and for answers that carry signed tokens their signature, chain, claims and
//! payload shape.

mod cases;
mod defects;
mod identity_provider;
mod names;
mod options;
mod participant_lists;
mod participant_registry;
mod probe;
mod registry;
pub mod report;
mod scheme_owner;
mod service_provider;
mod services;
mod session;
mod signed;

pub use options::{Broker, Masks, Options, Person, Role};
pub use report::{CaseResult, Outcome, Report};
pub use session::run;
