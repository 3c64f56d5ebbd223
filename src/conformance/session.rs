//! A run: the cases every role answers, then those of the target's role in the version checked,
//! into a report.

use super::cases::Run;
use super::options::{Options, Role};
use super::report::Report;

/// Run every case of the role against the target.
pub async fn run(options: &Options) -> Report {
    let mut warnings = Vec::new();
    if options.target.starts_with("http://") {
        warnings.push(format!(
            "{} is plain HTTP: fine for local testing, never for a participant in the scheme",
            options.target
        ));
    }
    let mut cases = Run::new(options);
    cases.capabilities().await;
    cases.token().await;
    match options.role {
        Role::ServiceProvider => cases.broker().await,
        Role::AuthorisationRegistry => cases.delegation().await,
        Role::SchemeOwner if options.version.camel_case() => cases.participant_registry().await,
        Role::SchemeOwner => cases.scheme_owner().await,
        Role::IdentityProvider => cases.identity_provider().await,
    }
    Report {
        role: options.role,
        version: options.version,
        target: options.target.clone(),
        target_id: options.target_id.clone(),
        warnings,
        cases: cases.finish(),
    }
}
