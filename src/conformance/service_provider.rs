//! The cases of a service provider beyond every role's: the broker pattern.

use super::cases::{wrong_status, Run, Verdict};
use super::defects::good_parts;
use super::options::Broker;
use super::probe::{send, Answer};
use crate::scheme::jwt::{SigningError, SigningIdentity};
use crate::scheme::Timestamp;
use serde_json::Value;

const G: &str = "broker";
const WITH_A_CONSUMER_ASSERTION: &str = "BROKER WITH A CONSUMER ASSERTION";
const REFUSED: &str = "401 or 403";

/// The defective consumer assertions, in the order they are sent: the good one again, then those
/// made by `Run::broker_defects`.
const DEFECTS: [&str; 5] = [
    "BROKER ASSERTION REPLAYED",
    "BROKER ASSERTION FOR ANOTHER CALLER",
    "BROKER ASSERTION EXPIRED",
    "BROKER ASSERTION INVALID SIGNATURE",
    "BROKER ASSERTION UNTRUSTED CERTIFICATE",
];

fn served(a: &Answer) -> bool {
    (200..300).contains(&a.status)
}

fn refused(a: &Answer) -> Verdict {
    if [401, 403].contains(&a.status) {
        Ok("refused".into())
    } else {
        Err(wrong_status(a.status, false).into())
    }
}

impl Run<'_> {
    /// The broker pattern at a service provider: the client calls a resource for another
    /// consumer with that consumer's client assertion (addressed to the client) in the
    /// `service_consumer_assertion` header (3.0: `serviceConsumerAssertion`). Accepted once; refused when replayed, addressed to
    /// someone else, expired, signed with a key not of its x5c, or chained to an untrusted root.
    /// A resource that serves every one of those does not use the broker pattern: one case says
    /// so, rather than each failing.
    pub async fn broker(&mut self) {
        let Some(broker) = &self.o.broker else {
            self.skip(
                G,
                WITH_A_CONSUMER_ASSERTION,
                "2xx",
                "give a resource the consumer may reach (--broker-resource) and the consumer (--consumer-as)",
            );
            return;
        };
        let token = match self.access_token(&self.o.client).await {
            Ok(t) => t,
            Err(e) => return self.broker_not_served(e),
        };
        let header = self.o.broker_header();
        let call = |assertion: &str| {
            self.o
                .http
                .get(&broker.resource)
                .bearer_auth(&token)
                .header(header, assertion)
        };
        let (good, defective) = match self.broker_assertions(broker) {
            Ok(a) => a,
            Err(e) => return self.broker_not_served(e.to_string()),
        };
        let first = self
            .case(G, WITH_A_CONSUMER_ASSERTION, "2xx", call(&good), |a| {
                if served(a) {
                    Ok("the call for the consumer is served".into())
                } else {
                    Err(wrong_status(a.status, true).into())
                }
            })
            .await;
        if !first.as_ref().is_some_and(served) {
            return self.broker_defects_not_tried("the call for the consumer was not served");
        }
        let mut answers = Vec::new();
        let replayed = std::iter::once(good.clone());
        for (name, assertion) in DEFECTS.into_iter().zip(replayed.chain(defective)) {
            answers.push((name, send(call(&assertion)).await));
        }
        if answers.iter().all(|(_, a)| a.as_ref().is_ok_and(served)) {
            let reason = format!(
                "{} served each defective {header}: it does not use the broker pattern",
                broker.resource
            );
            return self.record(
                G,
                "BROKER ASSERTION CHECKED",
                "401 or 403 for each defect",
                "2xx for each".into(),
                Err(reason),
            );
        }
        for (name, answer) in answers {
            match answer {
                Ok(a) => self.record(G, name, REFUSED, a.summary(), refused(&a)),
                Err(e) => self.record(G, name, REFUSED, "-".into(), Err(e)),
            }
        }
    }

    /// The first case failed before any call: the defects are not tried.
    fn broker_not_served(&mut self, why: String) {
        self.record(G, WITH_A_CONSUMER_ASSERTION, "2xx", "-".into(), Err(why));
        self.broker_defects_not_tried("no call for the consumer was made");
    }

    fn broker_defects_not_tried(&mut self, why: &str) {
        for name in DEFECTS {
            self.not_tried(G, name, REFUSED, why);
        }
    }

    /// The consumer's good assertion for the client, and those of `DEFECTS` after the replay:
    /// addressed to someone else, expired, signed with a key not of its x5c, and under a root
    /// nobody trusts.
    fn broker_assertions(&self, broker: &Broker) -> Result<(String, [String; 4]), SigningError> {
        let (client, stranger) = (self.client_id(), self.o.stranger());
        let now = Timestamp::now();
        let signed = |identity: &SigningIdentity, edit: &dyn Fn(&mut Value)| {
            let (header, mut claims) = good_parts(&broker.consumer, client, now);
            edit(&mut claims);
            identity.sign_parts(&header, &claims)
        };
        let good = signed(&broker.consumer, &|_| {})?;
        let defective = [
            signed(&broker.consumer, &|c| c["aud"] = Value::from(stranger))?,
            signed(&broker.consumer, &|c| {
                let past = c["iat"].as_i64().unwrap_or_default() - 300;
                c["iat"] = Value::from(past);
                c["exp"] = Value::from(past + 30);
            })?,
            signed(&broker.foreign_consumer, &|_| {})?,
            broker.foreign_consumer.client_assertion(client, now)?,
        ];
        Ok((good, defective))
    }
}
