//! The testbed's configuration file (`conf/testbed.toml`): its parties, which of them run a dummy
//! server, the trusted CAs beside the generated root, and the registry's policy file.

use super::policy_store::load_policies;
use crate::scheme::models::{SchemeTime, TrustedListEntry};
use crate::scheme::party::PartyId;
use crate::scheme::version::SchemeVersion;
use serde::Deserialize;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The dummy server a party runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Serve {
    SchemeOwner,
    AuthorisationRegistry,
    EntitledParty,
    ServiceProvider,
    IdentityProvider,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartyConfig {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub serve: Option<Serve>,
    #[serde(default)]
    pub port: u16,
    /// Certified roles (certifications); empty = not certified.
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default = "active")]
    pub status: String,
    #[serde(default)]
    pub start_date: Option<String>,
    #[serde(default)]
    pub end_date: Option<String>,
    /// The party ids of this party's authorisation registries.
    #[serde(default)]
    pub registries: Vec<String>,
    /// Its other identifiers (3.0 `alsoKnownAs`), by which it is found too.
    #[serde(default)]
    pub also_known_as: Vec<String>,
    /// The registry it designated for a service provider (3.0): the service provider's id → the
    /// registry's id. Its `registries` are its default ones.
    #[serde(default)]
    pub registries_for: std::collections::BTreeMap<String, String>,
    /// The registry it designated for a data space of the scheme (3.0): the data space's id →
    /// the registry's id.
    #[serde(default)]
    pub registries_in: std::collections::BTreeMap<String, String>,
    /// The data spaces of the scheme it is a member of (3.0): a registry a data owner designated
    /// for one of them answers it.
    #[serde(default)]
    pub dataspaces: Vec<String>,
    /// The roles it holds in a data space it is a member of (3.0 `dataspaceRole`): the data
    /// space's id → its roles there. A role held only there counts for a service provider that
    /// serves in that data space.
    #[serde(default)]
    pub dataspace_roles: std::collections::BTreeMap<String, Vec<String>>,
    /// A registry that reads delegation requests as strictly as FIWARE Keyrock does (`strict.rs`):
    /// a body outside its request schema is refused with a 400 naming the member (such as a policy
    /// set's `target`, which carries a mask's licences); `previous_steps` holds client assertions
    /// only; the mask's policy issuer and access subject may ask without one, and only its first
    /// service provider with one.
    #[serde(default)]
    pub strict: bool,
    /// A registry that answers as FIWARE Keyrock 8.3 does (`keyrock.rs`), strict too: its token
    /// endpoint at `/oauth2/token`, its delegation endpoint at `/ar/delegation`, a web page for
    /// a path it does not serve, evidence addressed to the id it keeps for the caller
    /// (`keyrock_ways::user_id`), and 500 for a token it no longer knows.
    #[serde(default)]
    pub keyrock: bool,
}

fn active() -> String {
    "Active".into()
}

/// A person the testbed's identity provider knows: test-only credentials and attributes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub username: String,
    pub password: String,
    /// The person's identifier: the id_token's `sub`, and the access subject of their policies.
    pub sub: String,
    /// Attributes by name (first_name, last_name, gender, company_id, company_name, email).
    #[serde(default)]
    pub attributes: std::collections::BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EchoConfig {
    #[serde(default)]
    pub port: u16,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedConfig {
    #[serde(default = "default_scheme")]
    pub scheme: String,
    /// The version of the scheme every participant speaks: "1.9" (the default) or "3.0".
    #[serde(default, deserialize_with = "scheme_version")]
    pub scheme_version: SchemeVersion,
    /// For tests of other participants' defences only: the participant registry answers as a
    /// careless one would. A record may claim any alias (another party's id or alias too), and a
    /// name is answered with the first record, in id order, that lists it as its id or an alias.
    /// By default a name is answered with the party whose own id it is, and an alias that another
    /// party's id or alias already is refuses to start.
    #[serde(default)]
    pub careless_aliases: bool,
    pub data_dir: PathBuf,
    #[serde(default = "loopback")]
    pub listen: IpAddr,
    /// A JSON array of delegationEvidence objects: the stored policies of the registry and the
    /// entitled party. Relative to the config file.
    #[serde(default)]
    pub policies: Option<PathBuf>,
    #[serde(rename = "party")]
    pub parties: Vec<PartyConfig>,
    #[serde(default)]
    pub echo: EchoConfig,
    #[serde(default, rename = "trusted_ca")]
    pub trusted_cas: Vec<TrustedListEntry>,
    /// The people of the identity provider.
    #[serde(default, rename = "user")]
    pub users: Vec<UserConfig>,
    #[serde(default)]
    pub identity_provider: IdentityProviderConfig,
    /// The sign-in of the registry's and entitled party's policy page (/admin).
    #[serde(default)]
    pub admin: Option<AdminConfig>,
    /// The data spaces of a 3.0 scheme, which its participant registry lists (`/dataspaces`).
    #[serde(default, rename = "dataspace")]
    pub dataspaces: Vec<DataspaceConfig>,
}

/// A data space of the scheme (3.0).
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DataspaceConfig {
    /// `<continent>.DS.<sector>.<country>.<name>`, as 3.0 writes it: `EU.DS.MOB.NL.LOGISTICS`.
    pub id: String,
    pub title: String,
    #[serde(
        default,
        rename = "description_url",
        skip_serializing_if = "Option::is_none"
    )]
    pub description_url: Option<String>,
}

/// Test-only credentials of the policy administration page.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    pub username: String,
    pub password: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityProviderConfig {
    /// How long an authorization code can be exchanged.
    #[serde(default = "code_lifetime", with = "humantime_serde")]
    pub code_lifetime: std::time::Duration,
}

impl Default for IdentityProviderConfig {
    fn default() -> Self {
        IdentityProviderConfig {
            code_lifetime: code_lifetime(),
        }
    }
}

fn code_lifetime() -> std::time::Duration {
    std::time::Duration::from_secs(60)
}

fn scheme_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SchemeVersion, D::Error> {
    let text = String::deserialize(d)?;
    match SchemeVersion::parse(&text) {
        Ok(v @ (SchemeVersion::V1_9 | SchemeVersion::V3_0)) => Ok(v),
        Ok(other) => Err(format!("the testbed speaks 1.9 or 3.0, not {other}")),
        Err(e) => Err(e),
    }
    .map_err(serde::de::Error::custom)
}

fn default_scheme() -> String {
    "iSHARE".into()
}

fn loopback() -> IpAddr {
    IpAddr::from([127, 0, 0, 1])
}

/// `conf/../data` as `data`: a path as short as its components allow, without touching the disk.
fn tidy(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {detail}")]
    Read { path: String, detail: String },
    #[error("{path}: {errors}")]
    Invalid { path: String, errors: String },
}

impl TestbedConfig {
    /// Read and check a testbed config. Relative paths in it are taken relative to the file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        let mut config: TestbedConfig = toml::from_str(&text).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.policies = config.policies.map(|p| tidy(&base.join(p)));
        if config.data_dir.is_relative() {
            config.data_dir = tidy(&base.join(&config.data_dir));
        }
        config.validate().map_err(|errors| ConfigError::Invalid {
            path: path.display().to_string(),
            errors: errors.join("; "),
        })?;
        Ok(config)
    }

    /// Every problem at once.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, p) in self.parties.iter().enumerate() {
            if let Err(e) = PartyId::parse(&p.id) {
                errors.push(format!("party[{i}].id: {e}"));
            }
            if !seen.insert(&p.id) {
                errors.push(format!("party[{i}].id: {} is listed twice", p.id));
            }
            for (field, value) in [("start_date", &p.start_date), ("end_date", &p.end_date)] {
                if let Some(v) = value {
                    if SchemeTime::parse(v).is_none() {
                        errors.push(format!(
                            "party[{i}].{field}: {v:?} is not an ISO 8601 timestamp"
                        ));
                    }
                }
            }
            for r in &p.registries {
                if !self.parties.iter().any(|q| &q.id == r) {
                    errors.push(format!(
                        "party[{i}].registries: {r} is not a party of the testbed"
                    ));
                }
            }
            if !self.careless_aliases {
                errors.extend(self.claims_of_others(i, p));
            }
            for space in &p.dataspaces {
                if !self.dataspaces.iter().any(|d| &d.id == space) {
                    errors.push(format!(
                        "party[{i}].dataspaces: {space} is not a data space of the testbed"
                    ));
                }
            }
            for space in p.dataspace_roles.keys() {
                if !p.dataspaces.contains(space) {
                    errors.push(format!(
                        "party[{i}].dataspace_roles: {space} is not one of its dataspaces"
                    ));
                }
            }
            for (space, r) in &p.registries_in {
                if !self.dataspaces.iter().any(|d| &d.id == space) {
                    errors.push(format!(
                        "party[{i}].registries_in: {space} is not a data space of the testbed"
                    ));
                }
                if !self.parties.iter().any(|q| &q.id == r) {
                    errors.push(format!(
                        "party[{i}].registries_in: {r} is not a party of the testbed"
                    ));
                }
            }
            for (sp, r) in &p.registries_for {
                for id in [sp, r] {
                    if !self.parties.iter().any(|q| &q.id == id) {
                        errors.push(format!(
                            "party[{i}].registries_for: {id} is not a party of the testbed"
                        ));
                    }
                }
            }
        }
        let owners = self
            .parties
            .iter()
            .filter(|p| p.serve == Some(Serve::SchemeOwner))
            .count();
        if owners != 1 {
            errors.push(format!(
                "exactly one party must serve as scheme_owner, found {owners}"
            ));
        }
        let mut dataspaces = std::collections::HashSet::new();
        for (i, d) in self.dataspaces.iter().enumerate() {
            if let Some(problem) = crate::scheme::party_record::dataspace_id_problem(&d.id) {
                errors.push(format!("dataspace[{i}].id: {problem}"));
            }
            if !dataspaces.insert(&d.id) {
                errors.push(format!("dataspace[{i}].id: {} is listed twice", d.id));
            }
            if d.title.trim().is_empty() {
                errors.push(format!("dataspace[{i}].title: empty"));
            }
        }
        if !self.dataspaces.is_empty() && !self.scheme_version.camel_case() {
            errors.push("dataspace: data spaces are 3.0's (scheme_version = \"3.0\")".into());
        }
        let mut usernames = std::collections::HashSet::new();
        for (i, u) in self.users.iter().enumerate() {
            if !usernames.insert(&u.username) || u.username.is_empty() {
                errors.push(format!(
                    "user[{i}].username: {:?} is empty or listed twice",
                    u.username
                ));
            }
            if u.password.is_empty() {
                errors.push(format!("user[{i}].password: empty"));
            }
            if let Err(e) = PartyId::parse(&u.sub) {
                errors.push(format!("user[{i}].sub: {e}"));
            }
            for name in u.attributes.keys() {
                if !crate::scheme::openid::ATTRIBUTE_SCOPES
                    .iter()
                    .any(|(_, names)| names.contains(&name.as_str()))
                {
                    errors.push(format!(
                        "user[{i}].attributes.{name}: not an attribute of a scope"
                    ));
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The aliases party `i` lists that are another party's: its id, or one of its aliases
    /// (`alsoKnownAs` entries name one party each).
    fn claims_of_others(&self, i: usize, p: &PartyConfig) -> Vec<String> {
        let mut errors = Vec::new();
        for alias in &p.also_known_as {
            for (j, other) in self.parties.iter().enumerate().filter(|(j, _)| *j != i) {
                if &other.id == alias {
                    errors.push(format!(
                        "party[{i}].also_known_as: {alias} is the id of party[{j}] ({}); a name is one party's",
                        other.name
                    ));
                } else if other.also_known_as.contains(alias) && j < i {
                    errors.push(format!(
                        "party[{i}].also_known_as: {alias} is an alias of party[{j}] ({}) already; a name is one party's",
                        other.name
                    ));
                }
            }
        }
        errors
    }

    /// Load the policies file and check every policy; the number of policies.
    pub fn check_policies(&self) -> Result<usize, ConfigError> {
        load_policies(self.policies.as_ref(), self.scheme_version)
            .map(|p| p.len())
            .map_err(|e| ConfigError::Invalid {
                path: self
                    .policies
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                errors: e.to_string(),
            })
    }

    pub fn scheme_owner(&self) -> &PartyConfig {
        self.parties
            .iter()
            .find(|p| p.serve == Some(Serve::SchemeOwner))
            .expect("validated: one scheme owner")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_spaces_are_3_0_s_with_ids_of_its_form_each_once() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/testbed-3.0.toml");
        let mut config = TestbedConfig::load(&path).expect("the shipped 3.0 testbed");
        assert_eq!(config.dataspaces.len(), 2);
        let space = |id: &str| DataspaceConfig {
            id: id.into(),
            title: "A data space".into(),
            description_url: None,
        };
        config.dataspaces = vec![
            space("EU.DS.MOB.NL.LOGISTICS"),
            space("EU.DS.MOB.NL.LOGISTICS"),
            space("EU.DS.MOBILITY.NL.X"),
            space("EU.DS.MOB.NL.NAME-WITH-DASH"),
        ];
        let errors = config.validate().unwrap_err();
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("dataspace[1].id: EU.DS.MOB.NL.LOGISTICS is listed twice")),
            "{errors:?}"
        );
        for i in [2, 3] {
            assert!(
                errors
                    .iter()
                    .any(|e| e.starts_with(&format!("dataspace[{i}].id: "))),
                "{errors:?}"
            );
        }
        let registry = config.parties.iter_mut().find(|p| p.port == 9208).unwrap();
        registry.dataspaces.clear();
        let errors = config.validate().unwrap_err();
        assert!(
            errors.iter().any(|e| e
                .contains("dataspace_roles: EU.DS.GND.NL.PETCARE is not one of its dataspaces")),
            "{errors:?}"
        );
        config.scheme_version = SchemeVersion::V1_9;
        config.dataspaces = vec![space("EU.DS.MOB.NL.LOGISTICS")];
        let errors = config.validate().unwrap_err();
        assert!(
            errors.iter().any(|e| e.contains("data spaces are 3.0's")),
            "{errors:?}"
        );
    }
}
