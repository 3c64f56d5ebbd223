//! AuthZEN requests (an evaluation, or a batch) on arbitrary bytes, read as the decision service
//! reads them. Properties, besides never panicking: a request read is JSON read one way only; a
//! batch holds at most its bound of items, a single evaluation exactly one; what is refused as a
//! whole is refused with a row of the refusal table (a 400).
#![no_main]

use ishare_gateway::gateway::decision_api::authzen::{read_request, AskedRequest};
use ishare_gateway::reading::json::read_unique;
use libfuzzer_sys::fuzz_target;

const MAX: usize = 4;

fuzz_target!(|data: &[u8]| {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let batch = first & 1 == 1;
    match read_request(body, batch, MAX) {
        Ok(asked) => {
            assert!(read_unique(body).is_ok(), "read, so read one way only");
            if let AskedRequest::Batch { items, .. } = &asked {
                assert!(batch && (1..=MAX).contains(&items.len()));
            }
            let _ = format!("{asked:?}");
        }
        Err(refusal) => assert_eq!(refusal.row().status, 400, "{refusal:?}"),
    }
});
