//! A person's browser, scripted, for the demo and the tests: it opens a page of a gateway that asks
//! for a sign-in, submits the form that takes it to the identity provider, signs in and consents
//! on the testbed identity provider's page, and comes back with a session. The same steps a browser
//! takes, over HTTP, with its cookies.

use crate::html::{form_of, unescape};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// One answer as the browser saw it.
#[derive(Clone, Debug)]
pub struct Page {
    pub url: String,
    pub status: u16,
    pub location: Option<String>,
    /// The Set-Cookie headers as sent.
    pub set_cookies: Vec<String>,
    pub body: String,
}

/// What a sign-in went through.
#[derive(Clone, Debug)]
pub struct SignIn {
    /// The identity provider's login page.
    pub login_page: Page,
    /// Where the identity provider sent the browser back to (the gateway's return URL, with the
    /// code and state, or an error).
    pub return_url: String,
    /// The gateway's answer to the return.
    pub returned: Page,
    /// The page first asked for, after the sign-in (when the return opened a session).
    pub landing: Option<Page>,
}

pub struct Browser {
    http: reqwest::Client,
    /// Cookies by name (one site: the gateway's; the identity provider sets none).
    pub cookies: BTreeMap<String, String>,
}

/// `location` resolved against `base`.
fn resolve(base: &str, location: &str) -> Result<String, String> {
    url::Url::parse(base)
        .and_then(|b| b.join(location))
        .map(|u| u.to_string())
        .map_err(|e| format!("{location}: {e}"))
}

impl Browser {
    /// A browser that trusts the testbed's CA (PEM) and follows no redirect by itself.
    pub fn new(ca_pem: &[u8]) -> Result<Browser, String> {
        Browser::on(ca_pem, None)
    }

    /// The same, its connections leaving from `address` of this machine: to servers that count
    /// clients by address, another client.
    pub fn on(ca_pem: &[u8], address: Option<IpAddr>) -> Result<Browser, String> {
        let http = crate::tls::outbound_builder(
            &crate::tls::OutboundTrust {
                ca_pem: Some(ca_pem.to_vec()),
                system_roots: false,
            },
            std::time::Duration::from_secs(10),
        )
        .map_err(|e| e.to_string())?
        .local_address(address)
        .build()
        .map_err(|e| e.to_string())?;
        Ok(Browser {
            http,
            cookies: BTreeMap::new(),
        })
    }

    async fn send(&mut self, request: reqwest::RequestBuilder, url: &str) -> Result<Page, String> {
        let mut request = request;
        if !self.cookies.is_empty() {
            let cookie = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            request = request.header("cookie", cookie);
        }
        let answer = request.send().await.map_err(|e| format!("{url}: {e}"))?;
        let set_cookies: Vec<String> = answer
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        for set in answer.headers().get_all("set-cookie") {
            let Some((pair, _)) = set
                .to_str()
                .ok()
                .map(|s| s.split_once(';').unwrap_or((s, "")))
            else {
                continue;
            };
            if let Some((name, value)) = pair.split_once('=') {
                if value.is_empty() {
                    self.cookies.remove(name.trim());
                } else {
                    self.cookies
                        .insert(name.trim().to_string(), value.to_string());
                }
            }
        }
        let status = answer.status().as_u16();
        let location = answer
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .map(|l| resolve(url, l))
            .transpose()?;
        let body = answer.text().await.map_err(|e| format!("{url}: {e}"))?;
        Ok(Page {
            url: url.to_string(),
            status,
            location,
            set_cookies,
            body,
        })
    }

    pub async fn get(&mut self, url: &str) -> Result<Page, String> {
        let request = self.http.get(url);
        self.send(request, url).await
    }

    pub async fn post(&mut self, url: &str, form: &[(String, String)]) -> Result<Page, String> {
        let request = self.http.post(url).form(form);
        self.send(request, url).await
    }

    /// Submit the first form of `page` with its hidden fields and `more`, from the page's origin
    /// (as browsers say in `Origin`).
    pub async fn submit(&mut self, page: &Page, more: &[(&str, &str)]) -> Result<Page, String> {
        let (action, mut fields) =
            form_of(&page.body).ok_or_else(|| format!("{} shows no form", page.url))?;
        fields.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let action = resolve(&page.url, &action)?;
        let origin = url::Url::parse(&page.url)
            .map_err(|e| format!("{}: {e}", page.url))?
            .origin()
            .ascii_serialization();
        let request = self
            .http
            .post(&action)
            .header("origin", origin)
            .form(&fields);
        self.send(request, &action).await
    }

    /// Open `url` at a gateway, sign in as `username` with `password` consenting to every scope
    /// asked, and come back: each step's answer.
    pub async fn sign_in(
        &mut self,
        url: &str,
        username: &str,
        password: &str,
    ) -> Result<SignIn, String> {
        let start = self.get(url).await?;
        if start.status != 200 {
            return Err(format!(
                "{url} answered {} instead of the way to sign in",
                start.status
            ));
        }
        let login_page = self.submit(&start, &[]).await?;
        if login_page.status != 200 {
            return Err(format!(
                "the identity provider answered {}: {}",
                login_page.status,
                html_text(&login_page.body)
            ));
        }
        let scopes: Vec<String> = login_page
            .body
            .split("name=\"scope\" value=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next().map(unescape))
            .collect();
        let mut answer: Vec<(&str, &str)> = vec![
            ("username", username),
            ("password", password),
            ("decision", "allow"),
        ];
        answer.extend(scopes.iter().map(|s| ("scope", s.as_str())));
        let consented = self.submit(&login_page, &answer).await?;
        let return_url = consented.location.clone().ok_or_else(|| {
            format!(
                "the identity provider did not send the browser back ({}): {}",
                consented.status,
                html_text(&consented.body)
            )
        })?;
        let returned = self.get(&return_url).await?;
        let landing = match (&returned.location, returned.status) {
            (Some(next), 303) => Some(self.get(&next.clone()).await?),
            _ => None,
        };
        Ok(SignIn {
            login_page,
            return_url,
            returned,
            landing,
        })
    }
}

/// The text of an HTML page without its markup, for messages.
pub fn html_text(page: &str) -> String {
    let body = page.split("<main>").nth(1).unwrap_or(page);
    let mut out = String::new();
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    unescape(&out.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html;

    #[test]
    fn the_text_of_a_page_is_its_words() {
        let page = html::page("Signed in", "<p>On <b>to</b> the page &amp; more.</p>");
        assert_eq!(html_text(&page), "Signed in On to the page & more.");
    }
}
