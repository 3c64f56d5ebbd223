//! The processes `cluster` starts (Redis, HAProxy, the gateways): each in a process group of its
//! own with its output in a log file, stopped with what it started when dropped; and the ports and
//! secret files they are given.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A process of the cluster, in a process group of its own, its output in a log file; stopped
/// (with everything it started) when dropped.
pub struct Child {
    name: String,
    child: std::process::Child,
    log: PathBuf,
}

impl Child {
    pub fn spawn(name: &str, mut command: Command, logs: &Path) -> Result<Child, String> {
        let log = logs.join(format!("{name}.log"));
        // Appended to: a child started again (a restart in the walk-through) keeps its first log.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let err = file.try_clone().map_err(|e| e.to_string())?;
        // A group of its own, so that Ctrl-C reaches the cluster alone (which stops each in
        // turn); and killed if the cluster itself dies (the parent-death signal follows the
        // thread that spawns: every child is spawned on the thread that runs the cluster).
        command
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .process_group(0);
        // SAFETY: prctl(2) is async-signal-safe; it only sets this child's parent-death signal.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("{name} ({:?}) does not start: {e}", command.get_program()))?;
        Ok(Child {
            name: name.to_string(),
            child,
            log,
        })
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child this value owns and has not reaped.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// Whether it ended, and how; an error that quotes its log.
    pub fn ended(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok().flatten()?;
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        Some(format!(
            "{} ended ({status}); the end of {}:\n{}",
            self.name,
            self.log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ))
    }

    /// SIGTERM, and wait (at most `within`) for it to end.
    pub async fn stop(&mut self, within: Duration) -> bool {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on the process group this child leads; not reaped yet, so its id is
            // not reused.
            unsafe {
                libc::kill(-(self.child.id() as i32), libc::SIGKILL);
            }
            let _ = self.child.wait();
        }
    }
}

/// A free loopback port for a process to bind a moment later: never one handed out before by this
/// process, and below the range the system picks ports from (for `bind` to port 0 and for
/// outgoing connections), so that no other socket is given it meanwhile.
pub fn free_port() -> Result<u16, String> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let system_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (system_low.saturating_sub(12_000).max(1024), system_low);
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let random = ring::rand::SystemRandom::new();
    for _ in 0..1000 {
        let bytes: [u8; 2] = ring::rand::generate(&random)
            .map_err(|_| "the system's random source failed")?
            .expose();
        let port = low + u16::from_le_bytes(bytes) % (high - low);
        if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return Ok(port);
        }
    }
    Err(format!("no free port between {low} and {high}"))
}

/// Write a secret readable by its owner alone.
pub fn write_secret(path: &Path, contents: &[u8]) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(contents))
        .map_err(|e| format!("{}: {e}", path.display()))
}
