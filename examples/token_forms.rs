//! Token request bodies with fresh client assertions, one per line, for loading `/connect/token`
//! (`benches/load.sh`): each assertion lives 30 s, so they are made right before the run, on every
//! core.
//!
//!     cargo run --release --example token_forms -- TESTBED_DIR PARTY_ID AUDIENCE COUNT

use ishare_gateway::scheme::assertion::ASSERTION_TYPE;
use ishare_gateway::scheme::jwt::SigningIdentity;
use ishare_gateway::scheme::party::PartyId;
use ishare_gateway::scheme::Timestamp;
use ishare_gateway::testbed::keys::party_file;
use std::io::Write;
use std::path::Path;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, party, audience, count] = args.as_slice() else {
        return Err("usage: token_forms TESTBED_DIR PARTY_ID AUDIENCE COUNT".into());
    };
    let count: usize = count.parse().map_err(|e| format!("COUNT: {e}"))?;
    let file = |kind: &str| {
        let path = party_file(Path::new(dir), party, kind);
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let id = PartyId::parse(party).map_err(|e| e.to_string())?;
    let identity =
        SigningIdentity::from_pem(id, &file("key")?, &file("chain")?).map_err(|e| e.to_string())?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let now = Timestamp::now();
    let lines: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let identity = &identity;
                scope.spawn(move || {
                    (t..count)
                        .step_by(threads)
                        .map(|_| {
                            let assertion = identity
                                .client_assertion(audience, now)
                                .map_err(|e| e.to_string())?;
                            Ok(url::form_urlencoded::Serializer::new(String::new())
                                .append_pair("grant_type", "client_credentials")
                                .append_pair("scope", "iSHARE")
                                .append_pair("client_id", party)
                                .append_pair("client_assertion_type", ASSERTION_TYPE)
                                .append_pair("client_assertion", &assertion)
                                .finish())
                        })
                        .collect::<Result<Vec<String>, String>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .map_err(|_| "a signing thread failed".to_string())?
            })
            .collect::<Result<Vec<Vec<String>>, String>>()
            .map(|v| v.concat())
    })?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in lines {
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}
