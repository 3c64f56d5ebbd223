//! A bare pingora reverse proxy with no checks at all: the ceiling of the stack the gateway is
//! built on, for the load benchmark (`benches/load.sh`), so that the gateway's own cost shows
//! apart from the library's.
//!
//!     cargo run --release --example bare_proxy -- LISTEN UPSTREAM THREADS
//!
//! It runs on the gateway's allocator (mimalloc), so that the two differ only in what they do;
//! with `BARE_ALLOCATOR=system` it runs on the C library's, which shows what the allocator gives.

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::server::configuration::ServerConf;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

/// mimalloc, or the system allocator when `BARE_ALLOCATOR=system`: chosen at the first
/// allocation, before anything else runs, and never changed after.
struct Chosen;

static CHOICE: AtomicU8 = AtomicU8::new(0);
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

impl Chosen {
    fn system(&self) -> bool {
        let mut choice = CHOICE.load(Ordering::Relaxed);
        if choice == 0 {
            // getenv does not allocate; the first allocation happens before any thread starts.
            let value = unsafe { libc::getenv(c"BARE_ALLOCATOR".as_ptr()) };
            let system = !value.is_null()
                && unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes() == b"system";
            choice = if system { SYSTEM } else { MIMALLOC };
            CHOICE.store(choice, Ordering::Relaxed);
        }
        choice == SYSTEM
    }
}

unsafe impl GlobalAlloc for Chosen {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.system() {
            true => unsafe { System.alloc(layout) },
            false => unsafe { mimalloc::MiMalloc.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match self.system() {
            true => unsafe { System.dealloc(ptr, layout) },
            false => unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match self.system() {
            true => unsafe { System.alloc_zeroed(layout) },
            false => unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match self.system() {
            true => unsafe { System.realloc(ptr, layout, new_size) },
            false => unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) },
        }
    }
}

#[global_allocator]
static ALLOCATOR: Chosen = Chosen;

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
