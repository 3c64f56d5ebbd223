//! The one place where a refusal becomes an HTTP answer. Every reason is a variant of a typed error
//! (`refusals.rs`); `Reject::row` is the table that maps each to its status, `error` code, reason
//! code, metrics outcome and description (`row.rs`); every answer the gateway writes itself goes
//! through it (`answer.rs`).

mod answer;
mod refusals;
mod row;

pub use answer::*;
pub use refusals::*;
pub use row::*;

#[cfg(test)]
mod tests;
