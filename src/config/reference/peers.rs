//! The tables of the scheme's peers: the scheme owner, tokens, outbound calls, registries, delegation, the replay store and people's sign-in.

use super::table::{Key, Table, Unset};

pub const SCHEME_OWNER: Table = Table {
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
};

pub const TOKENS: Table = Table {
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
};

pub const OUTBOUND: Table = Table {
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
};

pub const REGISTRY: Table = Table {
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
};

pub const DELEGATION: Table = Table {
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
            meaning: r#"the memory decisions may take (`"100MB"`, `"1GiB"`, or bytes); the least used go first (`cache_evictions_total`). Header evidence has two caches of its own: the tokens verified may take as much, the chains evaluated a quarter of it; the decisions kept by the request as it came take another quarter"#,
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
};

pub const REPLAY: Table = Table {
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
};

pub const LOGIN: Table = Table {
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
            meaning: r#"attribute → header the backend receives (a table that replaces this set); a client's copy of each, and its look-alikes, is removed on every route. Not `Authorization`, `Cookie`, `Host`, `Content-Length`, `Transfer-Encoding`, nor a trace header in any spelling"#,
        },
    ],
};
