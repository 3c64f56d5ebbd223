//! The balancer in front of a fleet: HAProxy's configuration, as the cluster command writes it, the
//! fleet tests run it and the book's "Several instances" guide describes it.

use std::path::Path;

/// One gateway instance as the balancer sees it.
pub struct Backend {
    pub name: String,
    /// host:port of its plain listener
    pub address: String,
    pub admin_port: u16,
}

/// HAProxy in front of gateway instances, as the book's "Several instances" guide describes: TLS
/// at the front (with `certificate`, the chain and key in one file) or plain HTTP, round robin
/// over the instances that are ready (over the live ones when none is: a Redis outage makes every
/// instance unready, and what needs no store should still pass), retries of idempotent requests on
/// another instance, and each answer naming the instance that gave it (`X-Instance`). It tells the
/// instances the client's address (`option forwardfor`, the client's own `X-Forwarded-For`
/// removed first) and scheme (`X-Forwarded-Proto`, its own value): they list it in
/// `trusted_proxies`.
pub fn haproxy_config(port: u16, certificate: Option<&Path>, backends: &[Backend]) -> String {
    let servers: String = backends
        .iter()
        .map(|b| {
            format!(
                "  server {} {} check port {}\n",
                b.name, b.address, b.admin_port
            )
        })
        .collect();
    let tls = certificate
        .map(|c| format!(" ssl crt {}", c.display()))
        .unwrap_or_default();
    format!(
        r#"global
  maxconn 4000
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response response-timeout
  default-server inter 500ms fall 2 rise 2
frontend gateways
  bind 127.0.0.1:{port}{tls}
  http-request del-header X-Forwarded-For
  option forwardfor
  http-request set-header X-Forwarded-Proto https if {{ ssl_fc }}
  http-request set-header X-Forwarded-Proto http if !{{ ssl_fc }}
  http-request disable-l7-retry unless METH_GET || METH_HEAD || METH_OPTIONS
  use_backend ready if {{ nbsrv(ready) gt 0 }}
  default_backend live
backend ready
  balance roundrobin
  option httpchk GET /ready
  http-check expect status 200
  http-response set-header X-Instance %s
{servers}backend live
  balance roundrobin
  option httpchk GET /live
  http-check expect status 200
  http-response set-header X-Instance %s
{servers}"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line with its addresses, ports and certificate paths made alike, as the guide writes
    /// them for a deployment and the cluster for this machine.
    fn alike(line: &str) -> String {
        let token = |t: &str| {
            if t.ends_with(".pem") {
                "PEM".to_string()
            } else if t.chars().any(|c| c.is_ascii_digit())
                && t.chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == ':')
            {
                "ADDRESS".to_string()
            } else {
                t.to_string()
            }
        };
        line.split_whitespace()
            .map(token)
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_guides_excerpt_is_what_the_cluster_writes() {
        let guide = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/src/guides/instances.md"
        ))
        .expect("the guide");
        let excerpt = guide
            .split("does all of this:")
            .nth(1)
            .and_then(|rest| rest.split("```").nth(1))
            .expect("the guide's HAProxy excerpt");
        let backends = ["a", "b"].map(|name| Backend {
            name: name.into(),
            address: "127.0.0.1:8080".into(),
            admin_port: 9901,
        });
        let written = haproxy_config(8443, Some(Path::new("/tmp/gateway.pem")), &backends);
        let written: Vec<String> = written.lines().map(alike).collect();
        let missing: Vec<&str> = excerpt
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter(|l| !written.contains(&alike(l)))
            .collect();
        assert!(
            missing.is_empty(),
            "not in the cluster's configuration: {missing:#?}"
        );
    }
}
