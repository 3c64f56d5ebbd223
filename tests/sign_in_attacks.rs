//! What an attacker tries against people's sign-in, refused without harm to the other people: one
//! client starting sign-ins as fast as it can. Clients are told apart by their loopback address
//! (127.0.0.1 and 127.0.0.2).

mod support;

use ishare_gateway::scheme::openid;
use support::people::*;

const BIN: &str = "sign_in_attacks";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_starting_sign_ins_as_fast_as_it_can_leaves_the_others_theirs() {
    let env = start_people(BIN, "starts_per_address_per_minute = 3\n").await;
    let url = format!("{}/people/containers/C1", env.url);
    let greedy = client_on(&env, OTHER_CLIENT);
    for _ in 0..3 {
        let started = greedy.get(&url).send().await.unwrap();
        assert_eq!(started.status(), 200);
    }
    for _ in 0..20 {
        let refused = greedy.get(&url).send().await.unwrap();
        assert_eq!(refused.status(), 429);
        let retry_after: u64 = refused.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=20).contains(&retry_after), "{retry_after}");
        let page = refused.text().await.unwrap();
        assert_eq!(reason(&page), "too_many_logins_from_address", "{page}");
        assert!(page.contains("try again in"), "{page}");
    }

    // Everyone else still starts a sign-in.
    let other = env.bed.http.get(&url).send().await.unwrap();
    assert_eq!(other.status(), 200);
    assert!(other.text().await.unwrap().contains(openid::AUTHORIZE_PATH));
    env.stop().await;
}
