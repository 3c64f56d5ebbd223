//! The tables of what the gateway serves and where it forwards: the top level, its identity, listeners, upstreams, the admin listener, rules, forwarding and the server's bounds.

use super::table::{Key, Table, Unset};

pub const TOP: Table = Table {
    name: "",
    array: false,
    about: r#"Keys before the first table."#,
    keys: &[
        Key {
            names: &["scheme"],
            unset: Unset::Defaults,
            meaning: r#"the scheme's name: the token scope, the action prefix (`iSHARE.READ`) and, in 3.0, the framework's id its records' claims name"#,
        },
        Key {
            names: &["dataspaces"],
            unset: Unset::Means(r#"none"#),
            meaning: r#"the data spaces the gateway serves in, by their 3.0 ids (`["EU.DS.MOB.NL.LOGISTICS"]`, the participant registry's `/dataspaces`): a data owner's registry designated for one of them is asked before its framework-wide or default one, after one designated for this service provider (3.0 records, and 2.x `auth_registries` by their `dataspace_id`; one designated for another data space is not asked), and a role a party holds in one of them (3.0 `dataspaceRole`, while a member) counts as its role"#,
        },
        Key {
            names: &["scheme_version"],
            unset: Unset::Means(r#"the scheme owner's"#),
            meaning: r#"the version the gateway's own endpoints speak: `/capabilities` as `capabilitiesToken` with 3.0's `publicServices`/`restrictedServices`, or 1.9's `capabilities_token`; the return path of people's sign-in (`/openid_connect1.0/return` in 1.9, `/return` from 2.0)"#,
        },
        Key {
            names: &["public_url"],
            unset: Unset::Means(r#"the first listener"#),
            meaning: r#"the base URL in `/capabilities`"#,
        },
    ],
};

pub const IDENTITY: Table = Table {
    name: "identity",
    array: false,
    about: r#"Required: who the gateway is in the scheme."#,
    keys: &[
        Key {
            names: &["party_id"],
            unset: Unset::Means(r#"required"#),
            meaning: r#"e.g. `"EU.EORI.NL000000003"` (or `did:ishare:…`)"#,
        },
        Key {
            names: &["name"],
            unset: Unset::Means(r#"the party id"#),
            meaning: r#"for logs"#,
        },
        Key {
            names: &["key"],
            unset: Unset::Means(r#"required"#),
            meaning: r#"PEM private key (RSA ≥ 2048); also derives the access-token key, so replicas with the same key accept each other's tokens"#,
        },
        Key {
            names: &["certificate_chain"],
            unset: Unset::Means(r#"required"#),
            meaning: r#"PEM chain, leaf first, up to the root on the trusted list; checked to belong to `key`"#,
        },
    ],
};

pub const LISTENER: Table = Table {
    name: "listener",
    array: true,
    about: r#"At least one: the addresses the gateway serves on."#,
    keys: &[
        Key {
            names: &["address"],
            unset: Unset::Means(r#"required"#),
            meaning: r#"`"0.0.0.0:443"`, `"[::]:8080"`"#,
        },
        Key {
            names: &["tls.certificate", "tls.key"],
            unset: Unset::Means(r#"none: plain HTTP"#),
            meaning: r#"PEM files (RSA or ECDSA); TLS 1.2/1.3, HTTP/2 and HTTP/1.1 by ALPN; the gateway's order of cipher suites, TLS 1.3 AES-128-GCM-SHA256 first"#,
        },
        Key {
            names: &["tls.client_ca"],
            unset: Unset::Means(r#"none"#),
            meaning: r#"verify client certificates against these CAs"#,
        },
        Key {
            names: &["tls.client_auth"],
            unset: Unset::Means(r#"`"optional"`"#),
            meaning: r#"or `"required"` (with `client_ca`)"#,
        },
        Key {
            names: &["max_connections"],
            unset: Unset::Defaults,
            meaning: r#"open connections at most; more are closed at once (`connections_closed_total{reason="limit"}`)"#,
        },
    ],
};

pub const UPSTREAM: Table = Table {
    name: "upstream",
    array: true,
    about: r#"The backends routes forward to."#,
    keys: &[
        Key {
            names: &["name"],
            unset: Unset::Means(r#"required"#),
            meaning: r#"referenced by routes"#,
        },
        Key {
            names: &["addresses"],
            unset: Unset::Means(r#"required"#),
            meaning: r#"`["10.0.0.5:8080", "10.0.0.6:8080"]`; round robin over the healthy ones"#,
        },
        Key {
            names: &["tls"],
            unset: Unset::Means(r#"`false`"#),
            meaning: r#"TLS to the backend, always verified"#,
        },
        Key {
            names: &["sni"],
            unset: Unset::Means(r#"the address's host"#),
            meaning: r#"the name the backend's certificate must carry"#,
        },
        Key {
            names: &["ca_file"],
            unset: Unset::Means(r#"platform roots"#),
            meaning: r#"roots for the backend's certificate"#,
        },
        Key {
            names: &["host_header"],
            unset: Unset::Means(r#"the client's"#),
            meaning: r#"Host sent to the backend"#,
        },
        Key {
            names: &["connect_timeout"],
            unset: Unset::Defaults,
            meaning: r#"a backend that does not accept in time: 504"#,
        },
        Key {
            names: &["read_timeout", "write_timeout"],
            unset: Unset::Defaults,
            meaning: r#"a backend too slow to answer: 504"#,
        },
        Key {
            names: &["health_check.kind"],
            unset: Unset::Means(r#"`"tcp"`; `"http"` with a `health_check.path`"#),
            meaning: r#"how backends are checked: `"tcp"` connects (with `tls`, through a handshake verified as requests are); `"http"` asks `health_check.path`"#,
        },
        Key {
            names: &["health_check.path"],
            unset: Unset::Means(r#"required with `"http"`"#),
            meaning: r#"the path to GET; a 2xx answer is healthy"#,
        },
        Key {
            names: &["health_check.interval"],
            unset: Unset::Defaults,
            meaning: r#"a round of checks takes at most twice `connect_timeout` plus `read_timeout`; a backend whose check has not answered by then keeps its last verdict"#,
        },
    ],
};

pub const ADMIN: Table = Table {
    name: "admin",
    array: false,
    about: r#"The admin listener ([Metrics and admin endpoints](metrics.md)); without it, none."#,
    keys: &[
        Key {
            names: &["address"],
            unset: Unset::Means(r#"required"#),
            meaning: r#"`/metrics`, `/live`, `/ready`, `POST /purge`; keep it private (`check` warns of an address on every interface, `0.0.0.0` or `[::]`)"#,
        },
        Key {
            names: &["purge_secret_file"],
            unset: Unset::Means(r#"none"#),
            meaning: r#"a file of 32 bytes or more of secret text that `POST /purge` callers send as `Authorization: Bearer …`; without it `/purge` answers 404 `purge_not_configured`. `check` warns of a file every user may read (`chmod o-rwx`)"#,
        },
    ],
};

pub const RULES: Table = Table {
    name: "rules",
    array: false,
    about: r#"Where the rules are ([Writing rules](../guides/rules.md))."#,
    keys: &[Key {
        names: &["directory"],
        unset: Unset::Defaults,
        meaning: r#"every `*.toml` in it, in name order"#,
    }],
};

pub const FORWARDING: Table = Table {
    name: "forwarding",
    array: false,
    about: r#"What the backend is told, and which client headers it never receives."#,
    keys: &[
        Key {
            names: &["party_header"],
            unset: Unset::Defaults,
            meaning: r#"the authenticated consumer's id for the backend; a client's copy (and look-alikes such as `X_Consumer_Party_Id`) is removed. Neither party header may be spelt like a credential of the scheme or a trace header (`traceparent`, `tracestate`, `b3`, `X-B3-*`), which tracing sets"#,
        },
        Key {
            names: &["original_consumer_header"],
            unset: Unset::Defaults,
            meaning: r#"for a broker (`service_consumer_assertion`): the consumer it acts for; a client's copy is removed"#,
        },
        Key {
            names: &["strip_headers"],
            unset: Unset::Defaults,
            meaning: r#"client headers the backend never receives (in any spelling a backend folds into the same name: `X_Forwarded_Host`, `X.Forwarded.Host`): method and path overrides, forwarding details a client could forge (host, scheme, address), and the client certificate or user a proxy in front would vouch for. The gateway sets `X-Forwarded-For` and `X-Forwarded-Proto` (the client's copies and their look-alikes are removed) and passes `Host` (unless the upstream sets `host_header`)"#,
        },
        Key {
            names: &["forwarded_for"],
            unset: Unset::Defaults,
            meaning: r#"`X-Forwarded-For` for the backend: `"replace"`, the address the gateway saw alone; `"append"`, the client's header with that address appended"#,
        },
        Key {
            names: &["trusted_proxies"],
            unset: Unset::Defaults,
            meaning: r#"peers (addresses or networks, `"10.0.0.0/8"`) whose `X-Forwarded-For` is appended to, as with `"append"`, and whose `X-Forwarded-Proto` (`http` or `https`, one value) the backend receives: the balancers in front of the gateway. The client's address for sign-in bounds is then the last one they forwarded"#,
        },
    ],
};

pub const SERVER: Table = Table {
    name: "server",
    array: false,
    about: r#"Threads, protocols, and the deadlines and bounds of client connections."#,
    keys: &[
        Key {
            names: &["threads"],
            unset: Unset::Defaults,
            meaning: r#"worker threads"#,
        },
        Key {
            names: &["work_stealing"],
            unset: Unset::Defaults,
            meaning: r#"`false`: each thread serves the connections it accepted, as nginx's workers do (the fastest for many short requests); `true`: idle threads take over work queued on busy ones (for few connections with very uneven requests)"#,
        },
        Key {
            names: &["h2c"],
            unset: Unset::Defaults,
            meaning: r#"plain listeners also accept HTTP/2 with prior knowledge"#,
        },
        Key {
            names: &["keepalive_timeout"],
            unset: Unset::Defaults,
            meaning: r#"an idle connection (HTTP/1.1 keep-alive, HTTP/2) is closed after this"#,
        },
        Key {
            names: &["header_timeout"],
            unset: Unset::Defaults,
            meaning: r#"a request's header must arrive within this from its first byte (a drip-fed header holds a connection no longer)"#,
        },
        Key {
            names: &["body_timeout"],
            unset: Unset::Defaults,
            meaning: r#"each read of a request body, and each write of an answer, must complete within this"#,
        },
        Key {
            names: &["body_deadline"],
            unset: Unset::Defaults,
            meaning: r#"a whole request body must arrive within this, one second more for every `body_min_rate` bytes received (a body dripped slower is cut off)"#,
        },
        Key {
            names: &["body_min_rate"],
            unset: Unset::Defaults,
            meaning: r#"bytes per second a request body must average once `body_deadline` has passed"#,
        },
        Key {
            names: &["h2_max_streams"],
            unset: Unset::Defaults,
            meaning: r#"concurrent HTTP/2 streams per connection, counted until the gateway's work on each ends (also when the client resets it); each open stream also counts against its listener's `max_connections` (a stream over either: 503 `listener_full`)"#,
        },
        Key {
            names: &["handshake_timeout"],
            unset: Unset::Defaults,
            meaning: r#"a TLS handshake must complete within this"#,
        },
        Key {
            names: &["grace_period", "graceful_shutdown_timeout"],
            unset: Unset::Defaults,
            meaning: r#"on SIGTERM: stop accepting, let requests finish"#,
        },
        Key {
            names: &["pid_file", "upgrade_sock"],
            unset: Unset::Means(r#"pingora's (`/tmp/pingora.pid`, `/tmp/pingora_upgrade.sock`)"#),
            meaning: r#"for graceful upgrades"#,
        },
    ],
};
