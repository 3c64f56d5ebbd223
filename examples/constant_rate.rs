//! A constant-rate (open-loop) HTTP/1.1 load generator, for the latency rows of the load benchmark
//! (`benches/load.sh`): a closed loop such as wrk's sends the next request only when an answer
//! has come back, so a slow server slows the load down and its latency looks better than it is.
//!
//!     cargo run --release --example constant_rate -- URL RATE SECONDS CONNECTIONS [HEADER...]
//!
//! Request `k` is due at `k / RATE` seconds after the start, on connection `k % CONNECTIONS`.
//! A thread of its own releases each request when it is due, with the operating system's
//! high-resolution sleep (the async runtime's timers tick by the millisecond, which would send
//! the requests of each millisecond at once, in bursts that a slower server answers later).
//! Its latency runs from when it was due if its connection was still busy with an earlier answer
//! then (the wait is the server's), and from when it was sent otherwise (a late release is the
//! generator's, not the server's). Prints one tab-separated line: due, answered, non-2xx, errors,
//! then p50, p90, p99, p99.9 and the maximum in milliseconds, and the latest a request was
//! released after it was due, in milliseconds: that long, the generator's core did not run it
//! (busy with the generator's other work or paused), so a latency up to that long may be the
//! generator's.

use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

struct Target {
    address: String,
    request: Vec<u8>,
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    non_2xx: u64,
    errors: u64,
}

fn target(url: &str, headers: &[String]) -> Result<Target, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("URL: only http:// is supported")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\n");
    for header in headers {
        if !header.contains(':') || header.contains(['\r', '\n']) {
            return Err(format!(
                "HEADER must be `name: value` on one line: {header:?}"
            ));
        }
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    Ok(Target {
        address: authority.to_string(),
        request: request.into_bytes(),
    })
}

/// The end of the head in `buf`, the status and the body's length, once the head is complete.
fn head(buf: &[u8]) -> Result<Option<(usize, u16, usize)>, String> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let text = std::str::from_utf8(&buf[..end]).map_err(|_| "answer head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("answer has no status line")?;
    let mut length = None;
    for line in lines {
        let (name, value) = line.split_once(':').ok_or("malformed answer header")?;
        if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(
                "chunked answers are not supported: the server must send Content-Length".into(),
            );
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.trim().parse().map_err(|_| "bad Content-Length")?);
        }
    }
    Ok(Some((end + 4, status, length.unwrap_or(0))))
}

/// One exchange on `stream`: the status of the answer.
async fn exchange(
    stream: &mut TcpStream,
    target: &Target,
    buf: &mut Vec<u8>,
) -> Result<u16, String> {
    stream
        .write_all(&target.request)
        .await
        .map_err(|e| e.to_string())?;
    buf.clear();
    loop {
        if let Some((body_start, status, length)) = head(buf)? {
            while buf.len() < body_start + length {
                read_more(stream, buf).await?;
            }
            if buf.len() > body_start + length {
                return Err("the server sent more than one answer".into());
            }
            return Ok(status);
        }
        read_more(stream, buf).await?;
    }
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
    let mut chunk = [0u8; 16 * 1024];
    match stream.read(&mut chunk).await {
        Ok(0) => Err("connection closed".into()),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Releases request `k` to its connection when it is due; how late it released the latest one.
/// A release later than the sleep's own slack means the generator's core did not run it.
fn pace(
    start: Instant,
    interval: Duration,
    total: u64,
    connections: Vec<UnboundedSender<Instant>>,
) -> Duration {
    let mut latest = Duration::ZERO;
    for k in 0..total {
        let due = start + interval.mul_f64(k as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        latest = latest.max(Instant::now().saturating_duration_since(due));
        let _ = connections[(k % connections.len() as u64) as usize].send(due);
    }
    latest
}

async fn connection(target: std::sync::Arc<Target>, mut due: UnboundedReceiver<Instant>) -> Tally {
    let mut tally = Tally::default();
    let mut stream = None;
    let mut buf = Vec::with_capacity(4096);
    let mut free_at = Instant::now();
    while let Some(due) = due.recv().await {
        let sent = Instant::now();
        let from = if free_at > due { due } else { sent };
        if stream.is_none() {
            match TcpStream::connect(&target.address).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    stream = Some(s);
                }
                Err(_) => {
                    tally.errors += 1;
                    free_at = Instant::now();
                    continue;
                }
            }
        }
        let Some(s) = stream.as_mut() else { continue };
        match exchange(s, &target, &mut buf).await {
            Ok(status) => {
                let done = Instant::now();
                tally.latencies_us.push((done - from).as_micros() as u64);
                if !(200..300).contains(&status) {
                    tally.non_2xx += 1;
                }
                free_at = done;
            }
            Err(_) => {
                tally.errors += 1;
                stream = None;
                free_at = Instant::now();
            }
        }
    }
    tally
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: constant_rate URL RATE SECONDS CONNECTIONS [HEADER...]";
    let (Some(url), Some(rate), Some(seconds), Some(connections)) =
        (args.get(1), args.get(2), args.get(3), args.get(4))
    else {
        return Err(usage.into());
    };
    let rate: f64 = rate.parse().map_err(|_| format!("RATE: {usage}"))?;
    let seconds: f64 = seconds.parse().map_err(|_| format!("SECONDS: {usage}"))?;
    let connections: u64 = connections
        .parse()
        .map_err(|_| format!("CONNECTIONS: {usage}"))?;
    if !(rate > 0.0 && seconds > 0.0 && connections > 0) {
        return Err("RATE, SECONDS and CONNECTIONS must be positive".into());
    }
    let target = std::sync::Arc::new(target(url, &args[5..])?);
    let total = (rate * seconds).round() as u64;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (tallies, late) = runtime.block_on(async {
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..connections).map(|_| unbounded_channel()).unzip();
        let tasks: Vec<_> = receivers
            .into_iter()
            .map(|r| tokio::spawn(connection(target.clone(), r)))
            .collect();
        let start = Instant::now() + Duration::from_millis(50);
        let pacer = std::thread::spawn(move || pace(start, interval, total, senders));
        let mut tallies = Vec::new();
        for task in tasks {
            tallies.push(task.await.map_err(|e| e.to_string())?);
        }
        let late = pacer.join().map_err(|_| "the pacing thread failed")?;
        Ok::<_, String>((tallies, late))
    })?;
    let mut all = Tally::default();
    for t in tallies {
        all.latencies_us.extend(t.latencies_us);
        all.non_2xx += t.non_2xx;
        all.errors += t.errors;
    }
    all.latencies_us.sort_unstable();
    let l = &all.latencies_us;
    println!(
        "{total}\t{}\t{}\t{}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{:.3}",
        l.len(),
        all.non_2xx,
        all.errors,
        percentile(l, 50.0),
        percentile(l, 90.0),
        percentile(l, 99.0),
        percentile(l, 99.9),
        percentile(l, 100.0),
        late.as_secs_f64() * 1e3,
    );
    Ok(())
}
