//! The tables of what the gateway tells its operators: its log, the decision log, the decision service and tracing.

use super::table::{Key, Table, Unset};

pub const LOG: Table = Table {
    name: "log",
    array: false,
    about: r#"The log and the access log (target `access`)."#,
    keys: &[
        Key {
            names: &["format"],
            unset: Unset::Means(r#"`"text"`"#),
            meaning: r#"or `"json"` (one object per line)"#,
        },
        Key {
            names: &["level"],
            unset: Unset::Defaults,
            meaning: r#"`RUST_LOG` overrides. Lines any client could write with every connection it opens are left out: rustls's warnings about what a client sent (an IP address as the server name, as wrk and OpenSSL-based clients send it; a warning alert) unless the level names `rustls` (`"info,rustls=warn"`), and pingora's error line for a client that went away or stalled mid-request (`Fail to proxy: Downstream …`) unless it names `pingora_proxy` (a request whose head had arrived is still counted in `requests_total` with the outcome `client_error`, and a head too slow in `connections_closed_total`)"#,
        },
    ],
};

pub const DECISION_LOG: Table = Table {
    name: "decision_log",
    array: false,
    about: r#"One JSON line per decision ([The decision-log line](decision-log.md)); without it, no decision log."#,
    keys: &[
        Key {
            names: &["path"],
            unset: Unset::Means(r#"required"#),
            meaning: r#"a file (appended to; opened anew at every reload, so a rotated log is written anew) or `"-"` for stdout: one JSON line per decision ([The decision-log line](decision-log.md))"#,
        },
        Key {
            names: &["mask"],
            unset: Unset::Defaults,
            meaning: r#"fields written as `"[masked]"`: `path`, `caller`, `caller.id`, `caller.acting_for`, `values`, `mask`, `mask.access_subject`, `mask.identifiers`, `evidence.issuers`, `description`"#,
        },
        Key {
            names: &["max_line_bytes"],
            unset: Unset::Defaults,
            meaning: r#"a longer line keeps only the fields that identify the decision, and says `"truncated": true`"#,
        },
        Key {
            names: &["queue"],
            unset: Unset::Defaults,
            meaning: r#"lines waiting to be written; when the writer falls behind, more are dropped and counted (`decision_log_lines_total{result="dropped"}`), never waited for"#,
        },
    ],
};

pub const DECISION_API: Table = Table {
    name: "decision_api",
    array: false,
    about: r#"The decision service for nginx, Envoy and AuthZEN ([The decision service](../guides/decision-service.md)); without it, none."#,
    keys: &[
        Key {
            names: &["address"],
            unset: Unset::Means(r#"required"#),
            meaning: r#"the decision service's listener ([The decision service](../guides/decision-service.md)): nginx `auth_request` at `/nginx`, Envoy's HTTP `ext_authz` under `/ext_authz`, AuthZEN; keep it private: `"127.0.0.1:9902"`. A change of its addresses or TLS takes effect at a restart"#,
        },
        Key {
            names: &["grpc_address"],
            unset: Unset::Means(r#"none"#),
            meaning: r#"Envoy's gRPC `ext_authz` (`envoy.service.auth.v3.Authorization/Check`), h2c, or TLS with `tls`"#,
        },
        Key {
            names: &["tls.certificate", "tls.key"],
            unset: Unset::Means(r#"none: plain HTTP (h2c for gRPC)"#),
            meaning: r#"PEM files, as for a listener"#,
        },
        Key {
            names: &["tls.client_ca", "tls.client_auth"],
            unset: Unset::Means(r#"none, `"optional"`"#),
            meaning: r#"client certificates of these CAs; `"required"`: every caller shows one (mTLS), which also authenticates AuthZEN callers"#,
        },
        Key {
            names: &["bearer_secret_file"],
            unset: Unset::Means(r#"none"#),
            meaning: r#"a file of 32 bytes or more of secret text that AuthZEN callers send as `Authorization: Bearer …`; without it or a client certificate, AuthZEN answers 401. `check` warns of a file every user may read (`chmod o-rwx`)"#,
        },
        Key {
            names: &["max_body_bytes"],
            unset: Unset::Defaults,
            meaning: r#"the largest AuthZEN body, and the largest body Envoy's checks carry (HTTP, or gRPC: a `CheckRequest` of more than this and 256 KiB of head is answered 413 `body_too_large`, `RESOURCE_EXHAUSTED`; of more than four times that at start-up, the transport refuses it unread, `OUT_OF_RANGE`); larger: 413"#,
        },
        Key {
            names: &["max_batch"],
            unset: Unset::Defaults,
            meaning: r#"the most evaluations in one AuthZEN batch"#,
        },
        Key {
            names: &["timeout"],
            unset: Unset::Defaults,
            meaning: r#"a request's header must arrive, and its decision be made, within this (503 `decision_timeout`; over gRPC the same refusal, `UNAVAILABLE`, as the table answers it; a check that arrives more than a second later than this is dropped by the transport)"#,
        },
        Key {
            names: &["policy_decision_point"],
            unset: Unset::Means(r#"none: no discovery document (404 `no_policy_decision_point`)"#),
            meaning: r#"AuthZEN's Policy Decision Point identifier, the https URL PEPs know the service by (`"https://pdp.example.com"`: a host and port, no path, query or fragment); `/.well-known/authzen-configuration` names it and the endpoints under it, whatever `Host` a request carries"#,
        },
    ],
};

pub const TRACING: Table = Table {
    name: "tracing",
    array: false,
    about: r#"OpenTelemetry spans of every request and of the calls made for it ([Tracing](tracing.md)); changes take effect at a restart. Without it nothing is traced, and a client's `traceparent`/`tracestate` pass to the backend untouched."#,
    keys: &[
        Key {
            names: &["otlp_endpoint"],
            unset: Unset::Defaults,
            meaning: r#"the collector's OTLP/HTTP traces endpoint (protobuf), `http://` or `https://` (verified against the `[outbound]` roots); no credentials in it: headers the collector needs come from `OTEL_EXPORTER_OTLP_HEADERS`"#,
        },
        Key {
            names: &["service_name"],
            unset: Unset::Defaults,
            meaning: r#"the `service.name` of the spans"#,
        },
        Key {
            names: &["sample_ratio"],
            unset: Unset::Defaults,
            meaning: r#"the share of new traces recorded, from `0.0` to `1.0`; a trace continued from a client follows the client's sampled flag"#,
        },
        Key {
            names: &["accept_client_context"],
            unset: Unset::Defaults,
            meaning: r#"continue the trace a client's valid `traceparent` names (and pass on its `tracestate`); `false`: every request starts a trace of its own, and the client's trace context goes no further"#,
        },
        Key {
            names: &["b3"],
            unset: Unset::Defaults,
            meaning: r#"the backend also receives the gateway's trace context in Zipkin's B3 headers: `"single"` (`b3`), `"multi"` (`X-B3-TraceId`, `X-B3-SpanId`, `X-B3-Sampled`); a client's B3 headers never reach the backend while tracing is on, as its `traceparent` does not"#,
        },
    ],
};
