//! A bare pingora reverse proxy with no checks at all: the ceiling of the stack the gateway is
//! built on, for the load benchmark (`benches/load.sh`), so that the gateway's own cost shows
//! apart from the library's.
//!
//!     cargo run --release --example bare_proxy -- LISTEN UPSTREAM THREADS

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::server::configuration::ServerConf;

struct Bare {
    upstream: String,
}

#[async_trait]
impl ProxyHttp for Bare {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(
            self.upstream.as_str(),
            false,
            String::new(),
        )))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, listen, upstream, threads] = args.as_slice() else {
        eprintln!("usage: bare_proxy LISTEN UPSTREAM THREADS");
        std::process::exit(2);
    };
    let conf = ServerConf {
        threads: threads.parse().unwrap_or(1),
        work_stealing: false,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(0),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut proxy = http_proxy_service(
        &server.configuration,
        Bare {
            upstream: upstream.clone(),
        },
    );
    proxy.add_tcp(listen);
    server.add_service(proxy);
    server.run_forever();
}
