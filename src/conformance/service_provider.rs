//! The cases of a service provider beyond every role's: the broker pattern.

use super::cases::{wrong_status, Run, STRANGER};
use super::defects::good_parts;
use super::probe::Answer;
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::vocabulary::BROKER_HEADER;
use crate::scheme::Timestamp;
use serde_json::Value;

impl Run<'_> {
    /// The broker pattern at a service provider: the client calls a resource for another
    /// consumer with that consumer's client assertion (addressed to the client) in the
    /// `service_consumer_assertion` header. Accepted once; refused when replayed, addressed to
    /// someone else, expired, signed with a key not of its x5c, or chained to an untrusted root.
    pub async fn broker(&mut self) {
        const G: &str = "broker";
        const REFUSED: &str = "401 or 403";
        let Some(broker) = &self.o.broker else {
            self.skip(
                G,
                "BROKER WITH A CONSUMER ASSERTION",
                "200",
                "give a resource the consumer may reach (--broker-resource) and the consumer (--consumer-as)",
            );
            return;
        };
        let http = self.o.http.clone();
        let client = self.client_id().to_string();
        let token = match self.access_token(&self.o.client).await {
            Ok(t) => t,
            Err(e) => {
                self.record(
                    G,
                    "BROKER WITH A CONSUMER ASSERTION",
                    "200",
                    "-".into(),
                    Err(e),
                );
                return;
            }
        };
        let call = |assertion: &str| {
            http.get(&broker.resource)
                .bearer_auth(&token)
                .header(BROKER_HEADER, assertion)
        };
        let now = Timestamp::now();
        let signed = |identity: &SigningIdentity, edit: fn(&mut Value)| {
            let (header, mut claims) = good_parts(&broker.consumer, &client, now);
            edit(&mut claims);
            identity.sign_parts(&header, &claims)
        };
        let assertion = match signed(&broker.consumer, |_| {}) {
            Ok(a) => a,
            Err(e) => {
                self.record(
                    G,
                    "BROKER WITH A CONSUMER ASSERTION",
                    "200",
                    "-".into(),
                    Err(e.to_string()),
                );
                return;
            }
        };
        self.case(
            G,
            "BROKER WITH A CONSUMER ASSERTION",
            "2xx",
            call(&assertion),
            |a| {
                if (200..300).contains(&a.status) {
                    Ok("the call for the consumer is served".into())
                } else {
                    Err(wrong_status(a.status, true).into())
                }
            },
        )
        .await;
        let refused = |a: &Answer| {
            if [401, 403].contains(&a.status) {
                Ok("refused".into())
            } else {
                Err(wrong_status(a.status, false).into())
            }
        };
        self.case(
            G,
            "BROKER ASSERTION REPLAYED",
            REFUSED,
            call(&assertion),
            refused,
        )
        .await;
        let defects = [
            (
                "BROKER ASSERTION FOR ANOTHER CALLER",
                signed(&broker.consumer, |c| c["aud"] = Value::from(STRANGER)),
            ),
            (
                "BROKER ASSERTION EXPIRED",
                signed(&broker.consumer, |c| {
                    let past = c["iat"].as_i64().unwrap_or_default() - 300;
                    c["iat"] = Value::from(past);
                    c["exp"] = Value::from(past + 30);
                }),
            ),
            (
                "BROKER ASSERTION INVALID SIGNATURE",
                signed(&broker.foreign_consumer, |_| {}),
            ),
            (
                "BROKER ASSERTION UNTRUSTED CERTIFICATE",
                broker.foreign_consumer.client_assertion(&client, now),
            ),
        ];
        for (name, assertion) in defects {
            match assertion {
                Ok(a) => {
                    self.case(G, name, REFUSED, call(&a), refused).await;
                }
                Err(e) => self.record(G, name, REFUSED, "-".into(), Err(e.to_string())),
            }
        }
    }
}
