//! The backend: what it receives of an allowed request (`forward`), and which of an upstream's
//! backends it is (`upstream`).

pub mod forward;
pub mod upstream;
