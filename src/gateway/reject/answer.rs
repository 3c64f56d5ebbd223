//! A complete answer the gateway gives itself, a refusal's from its row, and how it is written.

use super::refusals::Reject;
use super::row::Row;
use bytes::Bytes;
use http::Method;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use serde_json::{json, Value};

/// The header that names an answer's decision.
pub const DECISION_ID_HEADER: &str = "x-decision-id";

/// A complete answer the gateway gives itself.
pub struct Answer {
    pub status: u16,
    pub body: Body,
    pub headers: Vec<(&'static str, String)>,
}

/// What an answer carries: JSON for clients, a page for people.
pub enum Body {
    Json(Value),
    Html(String),
}

impl Answer {
    pub fn ok(body: Value) -> Self {
        Answer {
            status: 200,
            body: Body::Json(body),
            headers: Vec::new(),
        }
    }

    pub fn html(status: u16, page: String, headers: Vec<(&'static str, String)>) -> Self {
        Answer {
            status,
            body: Body::Html(page),
            headers,
        }
    }

    /// The answer to a refusal whose row was taken already. A person's failed sign-in is a page.
    pub fn refusal(reject: &Reject, row: Row) -> Self {
        let body = match reject {
            Reject::Login(_) => Body::Html(crate::html::page(
                "Sign-in failed",
                &format!(
                    r#"<p class="error" id="reason" data-reason="{reason}">{description}</p><p class="note">Reason: <code>{reason}</code>. Open the page you asked for again to start a new sign-in.</p>"#,
                    reason = row.reason,
                    description = crate::html::escape(&row.description),
                ),
            )),
            _ => Body::Json(json!({
                "error": row.error,
                "error_description": row.description,
                "reason": row.reason,
            })),
        };
        Answer {
            status: row.status,
            body,
            headers: reject.headers(),
        }
    }

    /// The answer naming its decision: in the `X-Decision-Id` header, and in a refusal's JSON
    /// body as `decision_id`, so that a consumer can quote it.
    pub fn for_decision(mut self, id: &str) -> Self {
        if let Body::Json(Value::Object(body)) = &mut self.body {
            if body.contains_key("reason") {
                body.insert("decision_id".into(), Value::String(id.to_string()));
            }
        }
        if !self
            .headers
            .iter()
            .any(|(name, _)| *name == DECISION_ID_HEADER)
        {
            self.headers.push((DECISION_ID_HEADER, id.to_string()));
        }
        self
    }

    fn content_type(&self) -> &'static str {
        match self.body {
            Body::Json(_) => "application/json",
            Body::Html(_) => "text/html; charset=utf-8",
        }
    }

    fn body_bytes(&self) -> Bytes {
        match &self.body {
            Body::Json(v) => Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
            Body::Html(page) => Bytes::from(page.clone()),
        }
    }

    /// The answer as an `http::Response`, for services outside the proxy (the admin listener).
    pub fn into_response(self) -> http::Response<Vec<u8>> {
        let body = self.body_bytes().to_vec();
        let mut builder = http::Response::builder()
            .status(self.status)
            .header("content-type", self.content_type())
            .header("content-length", body.len())
            .header("cache-control", "no-store");
        for (name, value) in &self.headers {
            builder = builder.header(*name, value.as_str());
        }
        builder.body(body).unwrap_or_default()
    }
}

impl From<&Reject> for Answer {
    fn from(r: &Reject) -> Self {
        Answer::refusal(r, r.row())
    }
}

/// Write an answer.
pub async fn respond(session: &mut Session, answer: &Answer) -> pingora::Result<()> {
    let body = answer.body_bytes();
    let mut resp = ResponseHeader::build(answer.status, Some(5 + answer.headers.len()))?;
    resp.insert_header("content-type", answer.content_type())?;
    resp.insert_header("content-length", body.len().to_string())?;
    if matches!(answer.body, Body::Html(_)) {
        resp.insert_header("cache-control", "no-store")?;
        resp.insert_header("x-frame-options", "DENY")?;
        resp.insert_header("content-security-policy", "frame-ancestors 'none'")?;
    }
    for (name, value) in &answer.headers {
        resp.append_header(*name, value.as_str())?;
    }
    let head_only = session.req_header().method == Method::HEAD;
    session
        .write_response_header(Box::new(resp), head_only)
        .await?;
    if !head_only {
        session.write_response_body(Some(body), true).await?;
    }
    Ok(())
}
