//! The testbed's key material in its data directory: the test PKI, a certificate and key per party,
//! and a TLS server certificate for loopback. Generated on first start, reused afterwards.

use crate::testbed::pki::{Credentials, PartyCredentials, PkiPem, TestPki};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The label of the testbed's PKI, part of its CA names.
const LABEL: &str = "Testbed";

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("{path}: {detail}")]
    Io { path: String, detail: String },
    #[error("test PKI: {0}")]
    Pki(#[from] crate::testbed::pki::PkiError),
}

pub struct TestbedKeys {
    pub pki: TestPki,
    pub parties: BTreeMap<String, PartyCredentials>,
    pub tls: Credentials,
    /// The root certificate, to trust for TLS and as the scheme's root.
    pub ca_file: PathBuf,
    pub data_dir: PathBuf,
}

impl TestbedKeys {
    pub fn party_chain_file(&self, party_id: &str) -> PathBuf {
        party_file(&self.data_dir, party_id, "chain")
    }

    pub fn party_key_file(&self, party_id: &str) -> PathBuf {
        party_file(&self.data_dir, party_id, "key")
    }

    pub fn tls_chain_file(&self) -> PathBuf {
        self.data_dir.join("tls/server.chain.pem")
    }

    pub fn tls_key_file(&self) -> PathBuf {
        self.data_dir.join("tls/server.key.pem")
    }
}

/// A party's file in a testbed's data directory: `kind` is `key` or `chain`.
pub fn party_file(dir: &Path, party_id: &str, kind: &str) -> PathBuf {
    dir.join("parties").join(format!("{party_id}.{kind}.pem"))
}

fn read(path: &Path) -> Result<Option<String>, KeysError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path, e)),
    }
}

fn io(path: &Path, e: std::io::Error) -> KeysError {
    KeysError::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

fn write(path: &Path, text: &str, secret: bool) -> Result<(), KeysError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    }
    fs::write(path, text).map_err(|e| io(path, e))?;
    if secret {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(|e| io(path, e))?;
    }
    Ok(())
}

fn load_credentials(chain_path: &Path, key_path: &Path) -> Result<Option<Credentials>, KeysError> {
    let (Some(chain_pem), Some(key_pem)) = (read(chain_path)?, read(key_path)?) else {
        return Ok(None);
    };
    let chain_der = crate::tls::certs_from_pem(chain_pem.as_bytes(), "certificate chain")
        .map_err(|e| KeysError::Io {
            path: chain_path.display().to_string(),
            detail: e.to_string(),
        })?
        .into_iter()
        .map(|c| c.to_vec())
        .collect();
    Ok(Some(Credentials {
        key_pem,
        chain_pem,
        chain_der,
    }))
}

/// The files of the test PKI: root certificate (the CA file), root key, intermediate, its key.
fn pki_files(data_dir: &Path) -> [PathBuf; 4] {
    [
        data_dir.join("ca.pem"),
        data_dir.join("pki/root.key.pem"),
        data_dir.join("pki/intermediate.pem"),
        data_dir.join("pki/intermediate.key.pem"),
    ]
}

/// The test PKI saved in `data_dir`, if it is there whole.
pub fn load_pki(data_dir: &Path) -> Result<Option<TestPki>, KeysError> {
    let existing = pki_files(data_dir)
        .iter()
        .map(|p| read(p))
        .collect::<Result<Vec<_>, _>>()?;
    match existing.as_slice() {
        [Some(root_cert), Some(root_key), Some(int_cert), Some(int_key)] => {
            Ok(Some(TestPki::from_pem(
                LABEL,
                &PkiPem {
                    root_cert: root_cert.clone(),
                    root_key: root_key.clone(),
                    intermediate_cert: int_cert.clone(),
                    intermediate_key: int_key.clone(),
                },
            )?))
        }
        _ => Ok(None),
    }
}

/// Load the key material from `data_dir`, generating whatever is missing: the PKI on first start,
/// credentials for parties added to the config later.
pub fn load_or_generate(
    data_dir: &Path,
    parties: &[(String, String)],
    tls_names: &[&str],
) -> Result<TestbedKeys, KeysError> {
    let ca_file = data_dir.join("ca.pem");
    let pki = match load_pki(data_dir)? {
        Some(pki) => pki,
        None => {
            let pki = TestPki::generate(LABEL, time::OffsetDateTime::now_utc())?;
            let pem = pki.pem();
            let [root_cert, root_key, int_cert, int_key] = pki_files(data_dir);
            write(&root_cert, &pem.root_cert, false)?;
            write(&root_key, &pem.root_key, true)?;
            write(&int_cert, &pem.intermediate_cert, false)?;
            write(&int_key, &pem.intermediate_key, true)?;
            // New CAs: whatever was issued by older ones is void.
            for dir in ["parties", "tls"] {
                let _ = fs::remove_dir_all(data_dir.join(dir));
            }
            pki
        }
    };
    let mut issued = BTreeMap::new();
    for (party_id, name) in parties {
        let chain_path = party_file(data_dir, party_id, "chain");
        let key_path = party_file(data_dir, party_id, "key");
        let credentials = match load_credentials(&chain_path, &key_path)? {
            Some(creds) => creds,
            None => {
                let creds = pki.issue_party(party_id, name)?.credentials;
                write(&chain_path, &creds.chain_pem, false)?;
                write(&key_path, &creds.key_pem, true)?;
                creds
            }
        };
        issued.insert(
            party_id.clone(),
            PartyCredentials {
                party_id: party_id.clone(),
                credentials,
            },
        );
    }
    // The same server names with an ECDSA P-256 key, for listeners that make many new
    // connections (the book's Operations guide: ECDSA certificates).
    let ecdsa_chain = data_dir.join("tls/server-ecdsa.chain.pem");
    let ecdsa_key = data_dir.join("tls/server-ecdsa.key.pem");
    if load_credentials(&ecdsa_chain, &ecdsa_key)?.is_none() {
        let creds = pki.issue_tls_server_ecdsa(tls_names)?;
        write(&ecdsa_chain, &creds.chain_pem, false)?;
        write(&ecdsa_key, &creds.key_pem, true)?;
    }
    let tls_chain = data_dir.join("tls/server.chain.pem");
    let tls_key = data_dir.join("tls/server.key.pem");
    let tls = match load_credentials(&tls_chain, &tls_key)? {
        Some(creds) => creds,
        None => {
            let creds = pki.issue_tls_server(tls_names)?;
            write(&tls_chain, &creds.chain_pem, false)?;
            write(&tls_key, &creds.key_pem, true)?;
            creds
        }
    };
    Ok(TestbedKeys {
        pki,
        parties: issued,
        tls,
        ca_file,
        data_dir: data_dir.to_path_buf(),
    })
}
