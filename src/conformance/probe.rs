//! Sending one request of a case and reading what comes back, whatever it is.

use serde_json::Value;

/// The most of an answer's body that is read: the scheme's answers are small.
const MAX_BODY: usize = 1 << 20;

/// What the target answered.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    /// The body as JSON, when it is JSON.
    pub json: Option<Value>,
    /// The body as text (pages).
    pub body: String,
}

impl Answer {
    /// The status with the reason the body gives (`error`, `reason` or `code`), for the report.
    pub fn summary(&self) -> String {
        let named = self.json.as_ref().and_then(|j| {
            ["reason", "error", "code"]
                .iter()
                .find_map(|k| j.get(*k).and_then(Value::as_str))
        });
        match named {
            Some(reason) => format!("{} {reason}", self.status),
            None => self.status.to_string(),
        }
    }

    /// The string member `name` of a JSON body.
    pub fn member(&self, name: &str) -> Option<&str> {
        self.json.as_ref()?.get(name)?.as_str()
    }

    /// Whether a JSON body has the member `name`, whatever it holds.
    pub fn holds(&self, name: &str) -> bool {
        self.json.as_ref().is_some_and(|j| j.get(name).is_some())
    }
}

/// Send a request; a transport failure is described, never hidden.
pub async fn send(request: reqwest::RequestBuilder) -> Result<Answer, String> {
    let mut resp = request.send().await.map_err(|e| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        format!("no answer: {text}")
    })?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("the answer broke off: {e}"))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!("the answer is larger than {MAX_BODY} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer {
        status,
        headers,
        json: serde_json::from_slice(&body).ok(),
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
