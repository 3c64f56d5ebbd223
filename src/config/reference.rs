//! The reference of `gateway.toml`: every key, what leaving it out means, and what it does, in the
//! order of the sample `conf/gateway.toml`. `markdown` writes the book's page from it
//! (docs/src/reference/configuration.md); the configuration's tests hold the committed page to it,
//! its defaults to `defaults.rs`, and its keys to those the reader accepts.

use super::defaults;
use std::fmt::Write;

/// A table of `gateway.toml`.
pub struct Table {
    /// As written: `identity`, `listener` …; empty for the keys at the top level.
    pub name: &'static str,
    /// Written `[[name]]`: each one a table of its own.
    pub array: bool,
    /// What the table is for, and what leaving it out means.
    pub about: &'static str,
    pub keys: &'static [Key],
}

/// One row of a table: keys that go together, what leaving them out means, and what they do.
pub struct Key {
    /// As written in the table; `tls.certificate` for a key of a table inside it.
    pub names: &'static [&'static str],
    pub unset: Unset,
    pub meaning: &'static str,
}

/// What a key left out means.
pub enum Unset {
    /// The value `defaults.rs` holds for it.
    Defaults,
    /// As said here: `required`, `none`, or what the value is then.
    Means(&'static str),
}

impl Table {
    /// `[name]` or `[[name]]`.
    pub fn heading(&self) -> String {
        match (self.name, self.array) {
            ("", _) => "Top level".to_string(),
            (name, true) => format!("`[[{name}]]`"),
            (name, false) => format!("`[{name}]`"),
        }
    }

    /// A key's whole name, as `defaults::documented` writes it: `scheme_owner.refresh`.
    pub fn path(&self, key: &str) -> String {
        match self.name {
            "" => key.to_string(),
            table => format!("{table}.{key}"),
        }
    }
}

/// The reference page, in Markdown.
pub fn markdown() -> String {
    let documented = defaults::documented();
    let mut page = String::from(INTRO);
    for table in TABLES {
        let _ = write!(page, "\n## {}\n\n", table.heading());
        if !table.about.is_empty() {
            let _ = writeln!(page, "{}\n", table.about);
        }
        page.push_str("| key | default | meaning |\n|---|---|---|\n");
        for key in table.keys {
            let names: Vec<String> = key.names.iter().map(|n| format!("`{n}`")).collect();
            let unset = match key.unset {
                Unset::Means(text) => text.to_string(),
                Unset::Defaults => key
                    .names
                    .iter()
                    .map(|n| {
                        let path = table.path(n);
                        let value = documented.iter().find(|(k, _)| *k == path);
                        value.map_or_else(
                            || format!("no default for {path}"),
                            |(_, v)| format!("`{v}`"),
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            let _ = writeln!(page, "| {} | {unset} | {} |", names.join(", "), key.meaning);
        }
    }
    page
}

const INTRO: &str = "# gateway.toml

<!-- Written by src/config/reference.rs: `UPDATE_DOCS=1 cargo test --lib configuration_reference` writes it anew. -->

Relative paths are relative to the file; durations are written `\"5s\"`, `\"10m\"`, `\"1h\"`; sizes
`\"64MiB\"`, `\"100MB\"` or a number of bytes. Unknown keys are errors, named with their line and the
known key they resemble (`adresses`: did you mean `addresses`?). `ishare-gateway check --config
gateway.toml` reports every problem at once, with its file and key. `conf/gateway.toml` is a
commented sample; the rules' keys (`policies/*.toml`) are in
[Writing rules](../guides/rules.md#a-route-with-every-key).
";

/// Every table and key of `gateway.toml`.
pub const TABLES: &[Table] = &[
    Table {
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
    },
    Table {
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
    },
    Table {
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
    },
    Table {
        name: "scheme_owner",
        array: false,
        about: r#"Required: the scheme owner (in 3.0, the participant registry), whose root and trusted list every chain is checked against."#,
        keys: &[
            Key {
                names: &["url"],
                unset: Unset::Means(r#"required"#),
                meaning: r#"e.g. `"https://satellite.example"`"#,
            },
            Key {
                names: &["party_id"],
                unset: Unset::Means(r#"required"#),
                meaning: r#"the scheme owner's id; its answers must be signed by a certificate naming it"#,
            },
            Key {
                names: &["root_fingerprint", "root_certificate"],
                unset: Unset::Means(r#"one of these or `trusted_list_file`"#),
                meaning: r#"the root the scheme owner signs under (SHA-256 hex, or a PEM file)"#,
            },
            Key {
                names: &["trusted_list_file"],
                unset: Unset::Means(r#"fetched"#),
                meaning: r#"a JSON array of trusted-list entries used instead of `/trusted_list`"#,
            },
            Key {
                names: &["refresh"],
                unset: Unset::Defaults,
                meaning: r#"trusted-list refresh; also on an unknown root (at most every 30 s), and after a failed call to the scheme owner (after 1 s, then 2, 4 … up to 30 s, until it answers). A list older than 3 × `refresh` is not used: trust fails closed (503) until it is refreshed"#,
            },
            Key {
                names: &["party_cache_ttl"],
                unset: Unset::Defaults,
                meaning: r#"party records (unknown parties: 1 min), fetched by `/parties/{id}`; a scheme owner that answers 404 there for a party its search `/parties?eori=` finds lacks that endpoint, and is asked by the search alone from then on"#,
            },
            Key {
                names: &["timeout"],
                unset: Unset::Defaults,
                meaning: r#"calls to the scheme owner"#,
            },
            Key {
                names: &["party_lookups_per_second"],
                unset: Unset::Defaults,
                meaning: r#"party records fetched at most (five times as many at once); beyond it, requests that need an uncached record get 503 `scheme_owner_busy`. Tokens under one certificate (a client assertion, evidence, a broker's consumer assertion) may name at most 6 signers a minute whose records are not cached yet, each after its signature verified: a certificate is one party's, so one that names ever new parties gets 503 `scheme_owner_busy` itself, not everyone else"#,
            },
            Key {
                names: &["scheme_version"],
                unset: Unset::Defaults,
                meaning: r#"the version of the scheme the scheme owner speaks, and every peer not configured with its own (data owners, registries found in party records): `"1.9"`, `"2.0"`, `"2.1"`, `"2.2"` or `"3.0"` ([Scheme versions](../concepts/scheme-versions.md#evidence-in-each-version))"#,
            },
        ],
    },
    Table {
        name: "tokens",
        array: false,
        about: r#"The access tokens the gateway issues at its token endpoints."#,
        keys: &[
            Key {
                names: &["lifetime"],
                unset: Unset::Defaults,
                meaning: r#"`expires_in`"#,
            },
            Key {
                names: &["clock_leeway"],
                unset: Unset::Defaults,
                meaning: r#"for `iat`/`exp`/`nbf` of assertions and evidence (at most 30 s)"#,
            },
            Key {
                names: &["paths"],
                unset: Unset::Defaults,
                meaning: r#"token endpoints (`/connect/token` is always one)"#,
            },
            Key {
                names: &["allow_rs384_rs512"],
                unset: Unset::Defaults,
                meaning: r#"accept RS384/RS512 besides RS256 from every peer (peers of 2.1 or later, by the scheme owner's version or their own, sign client assertions and evidence with them anyway)"#,
            },
        ],
    },
    Table {
        name: "outbound",
        array: false,
        about: r#"TLS to the scheme owner, registries, the identity provider and the trace collector: always verified."#,
        keys: &[
            Key {
                names: &["ca_file"],
                unset: Unset::Means(r#"none"#),
                meaning: r#"extra CA certificates; without them `check` warns of each https address of the scheme owner, a registry or the identity provider: a certificate from a private CA fails every call (`UnknownIssuer`)"#,
            },
            Key {
                names: &["system_roots"],
                unset: Unset::Means(r#"`true` without `ca_file`, else `false`"#),
                meaning: r#"also trust the platform's roots"#,
            },
        ],
    },
    Table {
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
                meaning: r#"how backends are checked: `"tcp"` connects; `"http"` asks `health_check.path`"#,
            },
            Key {
                names: &["health_check.path"],
                unset: Unset::Means(r#"required with `"http"`"#),
                meaning: r#"the path to GET; a 2xx answer is healthy"#,
            },
            Key {
                names: &["health_check.interval"],
                unset: Unset::Defaults,
                meaning: r#""#,
            },
        ],
    },
    Table {
        name: "registry",
        array: true,
        about: r#"Authorisation registries that rules may name. A registry found in a data owner's party record (`registry = "owner"`) is asked at the address the record gives, with every other setting of the `[[registry]]` of its party id where one is configured: its paths, version, masks, previous steps and `addresses_us_as`."#,
        keys: &[
            Key {
                names: &["name", "party_id", "url"],
                unset: Unset::Means(r#"required"#),
                meaning: r#"the name `"owner"` is taken: a route's `registry = "owner"` is the data owner's choice"#,
            },
            Key {
                names: &["token_path", "delegation_path"],
                unset: Unset::Means(r#"`"/connect/token"`, `"/delegation"`"#),
                meaning: r#"where this registry serves tokens and delegation evidence, also when it is found in a data owner's record: FIWARE Keyrock serves them at `"/oauth2/token"` and `"/ar/delegation"`. A 404 web page there is 502 `registry_endpoint_missing`, never a "no policy""#,
            },
            Key {
                names: &["scheme_version"],
                unset: Unset::Means(r#"the scheme owner's"#),
                meaning: r#"the version this registry speaks: how its evidence is read and its masks written"#,
            },
            Key {
                names: &["previous_steps"],
                unset: Unset::Means(r#"`"none"`"#),
                meaning: r#"what the gateway sends in a mask's `previous_steps`: `"none"` (it asks as a service provider named in the mask), or `"consumer_assertion"`: the client assertion the consumer sent to the gateway's token endpoint, kept (the latest per consumer) until its `exp` — 30 s, so a request later than that is 401 `previous_steps_unavailable` — in memory and, in a fleet on Redis, there too, so that every instance can forward it (without Redis answering, a request that needs it is 503 `replay_store_unavailable`). A broker's request (`service_consumer_assertion`) forwards the consumer's assertion to the broker and then the broker's own from its token request: a chain of consent from the consumer to the gateway. For registries that insist on an assertion in `previous_steps` (FIWARE Keyrock)"#,
            },
            Key {
                names: &["mask_licences"],
                unset: Unset::Means(r#"`true`"#),
                meaning: r#"whether masks sent to it name the route's `licences` (`policySets[].target.environment.licenses`); `false` for a registry whose request schema refuses that member (FIWARE Keyrock): the route's licences are then judged on the evidence only"#,
            },
            Key {
                names: &["addresses_us_as"],
                unset: Unset::Means(
                    r#"its answers must be addressed (`aud`) to the gateway's party id"#,
                ),
                meaning: r#"the id this registry writes in `aud` of its answers to the gateway where it uses one of its own: FIWARE Keyrock addresses its evidence to the user id it keeps for the gateway's client. Accepted only in the answers to the gateway's own calls to this registry (over the call it authenticated), never in evidence a client presents; `check` says so. Without it such an answer is 502 `registry_evidence_not_for_us`, naming both ids"#,
            },
        ],
    },
    Table {
        name: "delegation",
        array: false,
        about: r#"Decisions made with a registry's evidence, their cache, and how evidence is read."#,
        keys: &[
            Key {
                names: &["registry_timeout"],
                unset: Unset::Defaults,
                meaning: r#"a registry slower than this is a 503, never a forward"#,
            },
            Key {
                names: &["cache_ttl"],
                unset: Unset::Defaults,
                meaning: r#"longest a Permit is cached (never past the evidence's `notOnOrAfter`, nor a route's `max_decision_age`); `POST /purge` drops entries before that"#,
            },
            Key {
                names: &["deny_cache_ttl"],
                unset: Unset::Defaults,
                meaning: r#"Denies are cached briefly; errors never"#,
            },
            Key {
                names: &["cache_size"],
                unset: Unset::Defaults,
                meaning: r#"the memory decisions may take (`"100MB"`, `"1GiB"`, or bytes); the least used go first (`cache_evictions_total`). Header evidence has two caches of its own: the tokens verified may take as much, the chains evaluated a quarter of it"#,
            },
            Key {
                names: &["header_evidence_max_age"],
                unset: Unset::Defaults,
                meaning: r#"the oldest `iat` of an evidence token accepted, in a header or from a registry, and the longest its `exp` may lie after its `iat`"#,
            },
            Key {
                names: &["registry_calls_per_minute"],
                unset: Unset::Defaults,
                meaning: r#"registry calls (decisions not in the cache) one caller may cause per minute, in bursts of a minute's worth; beyond, 429 `too_many_registry_calls` with `Retry-After`"#,
            },
            Key {
                names: &["ignored_members"],
                unset: Unset::Means(r#"`{}`"#),
                meaning: r#"per issuer (party id), members of its evidence that no version of the scheme defines, dropped before evaluation: `"EU.EORI.NL000000004" = ["policySets[].policies[].rules[].comment"]`. Any other member not understood denies (`evidence_member_not_understood`); members the scheme defines (`conditions`, `effect` …) cannot be listed"#,
            },
        ],
    },
    Table {
        name: "replay",
        array: false,
        about: r#"Where the `jti`s of accepted client assertions are kept, and for a fleet its Redis, which sign-ins, sessions and purges share too ([Several instances](../guides/instances.md))."#,
        keys: &[
            Key {
                names: &["store"],
                unset: Unset::Defaults,
                meaning: r#"where the `jti`s of accepted client assertions are kept (token requests, broker assertions), each until its assertion can no longer be accepted: `"memory"` for one instance, `"redis"` for several behind one balancer (they then also accept each other's tokens, which share the identity's key)"#,
            },
            Key {
                names: &["url"],
                unset: Unset::Means(r#"none"#),
                meaning: r#"with `store = "redis"` on one server: `redis://host:port/db` (`rediss://` for TLS); credentials in it are refused: they go in `credentials_file`"#,
            },
            Key {
                names: &["sentinels", "master_name"],
                unset: Unset::Means(r#"none"#),
                meaning: r#"instead of `url`: Redis Sentinels (`["10.0.0.7:26379", …]`) and the name they know the master by; the gateway uses the master they name, and after a failover the new one, without a restart ([Several instances](../guides/instances.md))"#,
            },
            Key {
                names: &["db"],
                unset: Unset::Means(r#"`0`"#),
                meaning: r#"with `sentinels`: the database on the master"#,
            },
            Key {
                names: &["cluster"],
                unset: Unset::Means(r#"none"#),
                meaning: r#"instead of `url`: a Redis Cluster (Valkey's speaks the same protocol; the tests run Redis 7), by some of its nodes (`["10.0.0.7:6379", …]`); the gateway learns the rest from them, follows slots as they move and masters as replicas take over, without a restart. Every key of one gateway's party carries the same hash tag (`{PARTY}:…`), so that each operation stays on one slot; purges are published to the cluster and heard on any node ([Several instances](../guides/instances.md))"#,
            },
            Key {
                names: &["tls"],
                unset: Unset::Means(r#"`false`"#),
                meaning: r#"with `sentinels` or `cluster`: TLS to the Sentinels and the master, or to every node of the cluster"#,
            },
            Key {
                names: &["credentials_file"],
                unset: Unset::Means(r#"none"#),
                meaning: r#"`PASSWORD` (the default user) or `USER:PASSWORD` (an ACL user) on its first line, for Redis and the Sentinels alike; keep it readable by the gateway's user or group alone (`check` warns of one every user may read)"#,
            },
            Key {
                names: &["ca_file"],
                unset: Unset::Means(r#"platform roots"#),
                meaning: r#"CA certificates for Redis over TLS"#,
            },
            Key {
                names: &["timeout"],
                unset: Unset::Defaults,
                meaning: r#"a Redis call slower than this refuses the assertion (503 `replay_store_unavailable`): never a replay accepted"#,
            },
            Key {
                names: &["capacity"],
                unset: Unset::Defaults,
                meaning: r#"the memory store's most `jti`s at once; a full store refuses (503 `replay_store_full`) rather than forget one early"#,
            },
        ],
    },
    Table {
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
    },
    Table {
        name: "rules",
        array: false,
        about: r#"Where the rules are ([Writing rules](../guides/rules.md))."#,
        keys: &[Key {
            names: &["directory"],
            unset: Unset::Defaults,
            meaning: r#"every `*.toml` in it, in name order"#,
        }],
    },
    Table {
        name: "forwarding",
        array: false,
        about: r#"What the backend is told, and which client headers it never receives."#,
        keys: &[
            Key {
                names: &["party_header"],
                unset: Unset::Defaults,
                meaning: r#"the authenticated consumer's id for the backend; a client's copy (and look-alikes such as `X_Consumer_Party_Id`) is removed"#,
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
    },
    Table {
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
                unset: Unset::Means(
                    r#"pingora's (`/tmp/pingora.pid`, `/tmp/pingora_upgrade.sock`)"#,
                ),
                meaning: r#"for graceful upgrades"#,
            },
        ],
    },
    Table {
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
    },
    Table {
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
    },
    Table {
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
                unset: Unset::Means(
                    r#"none: no discovery document (404 `no_policy_decision_point`)"#,
                ),
                meaning: r#"AuthZEN's Policy Decision Point identifier, the https URL PEPs know the service by (`"https://pdp.example.com"`: a host and port, no path, query or fragment); `/.well-known/authzen-configuration` names it and the endpoints under it, whatever `Host` a request carries"#,
            },
        ],
    },
    Table {
        name: "login",
        array: false,
        about: r#"People sign in at an identity provider ([People signing in](../guides/people.md)); without it, no route may ask for a sign-in."#,
        keys: &[
            Key {
                names: &["identity_provider", "url"],
                unset: Unset::Means(r#"required"#),
                meaning: r#"the identity provider's party id and base URL"#,
            },
            Key {
                names: &["scheme_version"],
                unset: Unset::Means(r#"the scheme owner's"#),
                meaning: r#"the version the identity provider speaks: `"1.9"` (`/openid_connect1.0/…`, userinfo by POST) or `"2.0"` to `"3.0"` (`/connect/…`, userinfo by GET; 3.0 answers `userinfoToken`)"#,
            },
            Key {
                names: &["scope"],
                unset: Unset::Defaults,
                meaning: r#"what is asked for: `openid` and attribute scopes (`profile`: first_name, last_name, gender; `company`: company_id, company_name; `email`)"#,
            },
            Key {
                names: &["session_lifetime"],
                unset: Unset::Defaults,
                meaning: r#"a session ends after this (cookie and store)"#,
            },
            Key {
                names: &["cookie_name"],
                unset: Unset::Defaults,
                meaning: r#"the session cookie (Secure, HttpOnly, SameSite=Lax, Path=/); it must start with `__Host-` (no other subdomain can plant one); `<name>-login` binds a sign-in to its browser. A backend's `Set-Cookie` for either is removed"#,
            },
            Key {
                names: &["session_secret_file"],
                unset: Unset::Means(r#"a random key per start"#),
                meaning: r#"32 bytes or more of secret the cookies are sealed with; required with `[replay] store = "redis"`: give every instance the same file"#,
            },
            Key {
                names: &["logout_path"],
                unset: Unset::Defaults,
                meaning: r#"a GET shows a page whose button signs out; a POST from the gateway's own pages ends the session"#,
            },
            Key {
                names: &["starts_per_second"],
                unset: Unset::Defaults,
                meaning: r#"sign-ins started per second at most, by all clients together (each signs a request object); more get 429 `too_many_logins`"#,
            },
            Key {
                names: &["starts_per_address_per_minute"],
                unset: Unset::Defaults,
                meaning: r#"sign-ins started per minute at most from one client address (an IPv6 address's /64), as many of them at once; more get 429 `too_many_logins_from_address`, and take nothing from `starts_per_second`. `0`: no bound per address. Behind a balancer listed in `[forwarding] trusted_proxies`, the address is the one it forwards"#,
            },
            Key {
                names: &["headers"],
                unset: Unset::Means(
                    r#"`sub = "X-Person-Id"`, `first_name = "X-Person-First-Name"`, `last_name = "X-Person-Last-Name"`, `gender = "X-Person-Gender"`, `company_id = "X-Person-Company-Id"`, `company_name = "X-Person-Company-Name"`, `email = "X-Person-Email"`"#,
                ),
                meaning: r#"attribute → header the backend receives (a table that replaces this set); a client's copy of each, and its look-alikes, is removed on every route"#,
            },
        ],
    },
    Table {
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
    },
];
