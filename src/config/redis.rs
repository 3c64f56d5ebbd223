//! `[replay]`: where the jtis (and people's sessions) are kept; for a fleet, the Redis it shares:
//! one server by URL, the master that Redis Sentinels name, or a Redis Cluster, with credentials
//! from a file.

use super::defaults as default;
use super::file::{ReplayFile, ReplayStoreKind};
use super::issues::Issues;
use super::model::{RedisCredentials, RedisSettings, RedisTarget, ReplaySettings};
use super::values::{nonzero, resolve, warn_open_secret};
use std::path::Path;

pub(super) fn replay(base: &Path, mut r: ReplayFile, issues: &mut Issues) -> ReplaySettings {
    let kind = r
        .store
        .take()
        .and_then(|k| issues.choice("replay.store", k));
    let timeout = issues
        .check(
            "replay.timeout",
            nonzero(r.timeout.unwrap_or(default::REPLAY_TIMEOUT), "timeout"),
        )
        .unwrap_or(default::REPLAY_TIMEOUT);
    let capacity = r.capacity.unwrap_or(default::REPLAY_CAPACITY).max(1);
    let redis = if kind == Some(ReplayStoreKind::Redis) {
        redis(base, r, issues)
    } else {
        let given = [
            ("url", r.url.is_some()),
            ("sentinels", r.sentinels.is_some()),
            ("master_name", r.master_name.is_some()),
            ("cluster", r.cluster.is_some()),
            ("db", r.db.is_some()),
            ("tls", r.tls.is_some()),
            ("credentials_file", r.credentials_file.is_some()),
            ("ca_file", r.ca_file.is_some()),
        ];
        for (key, _) in given.iter().filter(|(_, given)| *given) {
            issues.add(format!("replay.{key}"), "needs store = \"redis\"");
        }
        None
    };
    ReplaySettings {
        redis,
        timeout,
        capacity,
    }
}

fn redis(base: &Path, r: ReplayFile, issues: &mut Issues) -> Option<RedisSettings> {
    let given = [r.url.is_some(), r.sentinels.is_some(), r.cluster.is_some()];
    if given.iter().filter(|g| **g).count() > 1 {
        issues.add(
            "replay",
            "give one of url (one server), sentinels or cluster, not several",
        );
        return None;
    }
    if let Some(nodes) = r.cluster {
        let not_here = [
            (
                "master_name",
                r.master_name.is_some(),
                "a cluster names no master: its nodes say which holds each slot",
            ),
            ("db", r.db.is_some(), "a cluster has database 0 only"),
        ];
        for (key, _, why) in not_here.iter().filter(|(_, given, _)| *given) {
            issues.add(format!("replay.{key}"), *why);
        }
        let nodes = node_list("replay.cluster", "node of the cluster", nodes, issues);
        let target = nodes.map(|nodes| RedisTarget::Cluster {
            nodes,
            tls: r.tls.unwrap_or(false),
        });
        return settings(base, target, r.credentials_file, r.ca_file, issues);
    }
    let target = match (r.url, r.sentinels) {
        (Some(url), None) => {
            let sentinel_only = [
                ("master_name", r.master_name.is_some()),
                ("db", r.db.is_some()),
                ("tls", r.tls.is_some()),
            ];
            for (key, _) in sentinel_only.iter().filter(|(_, given)| *given) {
                issues.add(
                    format!("replay.{key}"),
                    "only with sentinels (the url says it for one server)",
                );
            }
            issues
                .check("replay.url", server_url(&url))
                .map(RedisTarget::Server)
        }
        (None, Some(nodes)) => sentinel(nodes, r.master_name, r.db, r.tls, issues),
        (Some(_), Some(_)) => None,
        (None, None) => {
            issues.add(
                "replay.url",
                "the Redis server to keep jtis on is needed (or sentinels, or cluster)",
            );
            None
        }
    };
    settings(base, target, r.credentials_file, r.ca_file, issues)
}

/// The target with its credentials and CA.
fn settings(
    base: &Path,
    target: Option<RedisTarget>,
    credentials_file: Option<std::path::PathBuf>,
    ca_file: Option<std::path::PathBuf>,
    issues: &mut Issues,
) -> Option<RedisSettings> {
    let credentials = credentials_file.and_then(|file| {
        let path = resolve(base, &file);
        warn_open_secret("replay.credentials_file", &path, issues);
        issues.check("replay.credentials_file", credentials(&path))
    });
    let tls = match &target {
        Some(RedisTarget::Server(url)) => url.starts_with("rediss://"),
        Some(RedisTarget::Sentinel { tls, .. } | RedisTarget::Cluster { tls, .. }) => *tls,
        None => true,
    };
    if ca_file.is_some() && !tls {
        issues.add(
            "replay.ca_file",
            "only with TLS to Redis (rediss://, or tls = true with sentinels or cluster)",
        );
    }
    let ca_pem = ca_file.and_then(|file| {
        let path = resolve(base, &file);
        let pem = std::fs::read(&path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|pem| {
                crate::tls::certs_from_pem(&pem, &path.display().to_string())
                    .map(|_| pem)
                    .map_err(|e| e.to_string())
            });
        issues.check("replay.ca_file", pem)
    });
    Some(RedisSettings {
        target: target?,
        credentials,
        ca_pem,
    })
}

/// A Redis URL without credentials: those come from `credentials_file`, never from the config.
fn server_url(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "redis" | "rediss") && u.host().is_some())
        .ok_or("a Redis URL: redis://host:port/db (or rediss:// for TLS)")?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "holds credentials: put them in replay.credentials_file (USER:PASSWORD), not in the config"
                .into(),
        );
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(
            "no options after the database (`#insecure` would skip the certificate check)".into(),
        );
    }
    Ok(text.to_string())
}

fn sentinel(
    nodes: Vec<String>,
    master: Option<String>,
    db: Option<i64>,
    tls: Option<bool>,
    issues: &mut Issues,
) -> Option<RedisTarget> {
    let parsed = node_list("replay.sentinels", "Sentinel", nodes, issues);
    let master = master.filter(|m| !m.trim().is_empty());
    if master.is_none() {
        issues.add(
            "replay.master_name",
            "needed with sentinels: the name the Sentinels know the master by",
        );
    }
    let db = db.unwrap_or(0);
    if db < 0 {
        issues.add("replay.db", "a database number: 0 or more");
    }
    Some(RedisTarget::Sentinel {
        nodes: parsed?,
        master: master?,
        db: (db >= 0).then_some(db)?,
        tls: tls.unwrap_or(false),
    })
}

/// `host:port` of each node (at least one), each problem reported under `key[i]`; None unless
/// every one reads.
fn node_list(
    key: &str,
    what: &str,
    nodes: Vec<String>,
    issues: &mut Issues,
) -> Option<Vec<(String, u16)>> {
    if nodes.is_empty() {
        issues.add(key, format!("name at least one {what} (host:port)"));
    }
    let parsed: Vec<(String, u16)> = nodes
        .iter()
        .enumerate()
        .filter_map(|(i, node)| {
            let parsed = node
                .rsplit_once(':')
                .and_then(|(host, port)| Some((host.trim_matches(['[', ']']), port.parse().ok()?)))
                .filter(|(host, _)| !host.is_empty() && !host.contains(['@', '/']))
                .map(|(host, port)| (host.to_string(), port))
                .ok_or_else(|| match node.contains('@') {
                    true => {
                        "holds credentials: put them in replay.credentials_file, not in the config"
                            .to_string()
                    }
                    false => format!("{node:?} is not host:port"),
                });
            issues.check(&format!("{key}[{i}]"), parsed)
        })
        .collect();
    (parsed.len() == nodes.len() && !nodes.is_empty()).then_some(parsed)
}

/// `PASSWORD` or `USER:PASSWORD` on the first line of a file.
fn credentials(path: &Path) -> Result<RedisCredentials, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let line = text.lines().next().unwrap_or_default().trim();
    if line.is_empty() {
        return Err(format!(
            "{}: empty: PASSWORD or USER:PASSWORD on its first line",
            path.display()
        ));
    }
    Ok(match line.split_once(':') {
        Some((user, password)) if !user.is_empty() => RedisCredentials {
            username: Some(user.to_string()),
            password: password.to_string(),
        },
        _ => RedisCredentials {
            username: None,
            password: line.trim_start_matches(':').to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_a_password_or_an_acl_user_and_its_password() {
        let dir = std::env::temp_dir().join(format!("redis-credentials-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("credentials");
        let read = |text: &str| {
            std::fs::write(&file, text).unwrap();
            credentials(&file)
        };
        let user = |u: Option<&str>, p: &str| RedisCredentials {
            username: u.map(str::to_string),
            password: p.to_string(),
        };
        assert_eq!(read("s3cret\n"), Ok(user(None, "s3cret")));
        assert_eq!(
            read("gateway:pa:ss\nignored"),
            Ok(user(Some("gateway"), "pa:ss"))
        );
        assert_eq!(read(":s3cret"), Ok(user(None, "s3cret")));
        assert!(read("\n").unwrap_err().contains("empty"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
