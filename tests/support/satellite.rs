//! A satellite as real ones are: a proxy in front of a testbed participant that, as told, lacks
//! endpoints, sends token answers without `Cache-Control`, accepts a client assertion twice, or
//! reads the query of `/parties` before its token. It counts the requests it is sent, by path.

use super::served::Served;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How the satellite departs from its upstream.
#[derive(Clone, Debug, Default)]
pub struct Quirks {
    /// Paths answered 404; one ending in `/` stands for every path below it.
    pub missing: Vec<&'static str>,
    /// Answers carry no `Cache-Control` (nor `Pragma`).
    pub cacheable: bool,
    /// A client assertion that was answered before gets that answer again.
    pub replays_accepted: bool,
    /// `GET /parties` without a query is 400, whether a token comes with it or not.
    pub query_before_token: bool,
}

struct Shared {
    upstream: String,
    http: reqwest::Client,
    quirks: Quirks,
    /// The path of every request, in order.
    paths: Mutex<Vec<String>>,
    /// Token answers by the client assertion they answered.
    answered: Mutex<HashMap<String, (StatusCode, HeaderMap, Bytes)>>,
}

/// A running satellite; stop it at the end.
pub struct Satellite {
    pub url: String,
    shared: Arc<Shared>,
    served: Served,
}

impl Satellite {
    /// Serve on an ephemeral loopback port, forwarding to `upstream` with `http`.
    pub async fn start(upstream: &str, http: reqwest::Client, quirks: Quirks) -> Satellite {
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            http,
            quirks,
            paths: Mutex::default(),
            answered: Mutex::default(),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let served = Served::start(app).await;
        Satellite {
            url: served.url(),
            shared,
            served,
        }
    }

    /// How many requests came for paths that `matching` accepts.
    pub fn requests(&self, matching: impl Fn(&str) -> bool) -> usize {
        let paths = self.shared.paths.lock().unwrap();
        paths.iter().filter(|p| matching(p)).count()
    }

    pub async fn stop(self) {
        self.served
            .stop()
            .await
            .expect("the satellite stops cleanly");
    }
}

async fn answer(State(s): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    s.paths.lock().unwrap().push(path.clone());
    let quirks = &s.quirks;
    let missing = quirks.missing.iter().any(|m| match m.strip_suffix('/') {
        Some(dir) => path.starts_with(&format!("{dir}/")),
        None => path == *m,
    });
    if missing {
        return (StatusCode::NOT_FOUND, "no such endpoint").into_response();
    }
    if quirks.query_before_token && path == "/parties" && request.uri().query().is_none() {
        return (StatusCode::BAD_REQUEST, "a query parameter is required").into_response();
    }
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let assertion = (quirks.replays_accepted && path == "/connect/token")
        .then(|| {
            url::form_urlencoded::parse(&body)
                .find(|(k, _)| k == "client_assertion")
                .map(|(_, v)| v.into_owned())
        })
        .flatten();
    if let Some(seen) = assertion
        .as_ref()
        .and_then(|a| s.answered.lock().unwrap().get(a).cloned())
    {
        return seen.into_response();
    }
    let mut forward = s
        .http
        .request(parts.method, format!("{}{}", s.upstream, parts.uri));
    for name in [header::AUTHORIZATION, header::CONTENT_TYPE] {
        if let Some(v) = parts.headers.get(&name) {
            forward = forward.header(name, v);
        }
    }
    let upstream = forward.body(body).send().await.unwrap();
    let status = upstream.status();
    let mut headers = upstream.headers().clone();
    for name in [
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::CONNECTION,
    ] {
        headers.remove(name);
    }
    if quirks.cacheable {
        headers.remove(header::CACHE_CONTROL);
        headers.remove(header::PRAGMA);
    }
    let answer = (status, headers, upstream.bytes().await.unwrap());
    if let Some(assertion) = assertion {
        s.answered.lock().unwrap().insert(assertion, answer.clone());
    }
    answer.into_response()
}
