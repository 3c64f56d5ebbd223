//! People at the gateway: signing in at the identity provider and out (`login`), their sessions
//! and sign-ins in progress (`sessions`), and the bound on sign-ins started (`start_budget`).

pub mod login;
pub mod sessions;
pub mod start_budget;
