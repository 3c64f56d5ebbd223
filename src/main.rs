//! The `ishare-gateway` command.

fn main() {
    eprintln!("ishare-gateway: the gateway, testbed, demo and client commands are not built yet; run `make test`");
    std::process::exit(2);
}
