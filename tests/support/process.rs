//! Child processes of the tests (the gateway's own binary, redis-server, chromedriver, …): each in
//! a process group of its own with its output in a log file, and killed with everything it
//! started, then reaped, when its value is dropped: on success, on failure and on panic. A test
//! that fails quotes the tail of that log.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running child process, killed (with its process group) when dropped.
pub struct ChildProcess {
    name: String,
    child: std::process::Child,
    log: PathBuf,
}

impl ChildProcess {
    /// Start `command` as `name`; its standard output and error go to a log file of its own.
    pub fn spawn(name: &str, mut command: Command) -> ChildProcess {
        // The tests' HTTP clients (rustls) need the process's crypto provider, whichever test
        // runs first.
        ishare_gateway::tls::ensure_crypto_provider();
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("logs");
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join(format!(
            "{name}-{}-{}.log",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::File::create(&log).unwrap();
        command
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .process_group(0);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("{name} does not start ({:?}): {e}", command.get_program()));
        ChildProcess {
            name: name.to_string(),
            child,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send a signal (`libc::SIGHUP`, `SIGTERM`, …) to the process itself.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child this value owns and has not reaped.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// Everything the process wrote so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines the process wrote, for a failing test to quote.
    pub fn tail(&self) -> String {
        let output = self.output();
        let lines: Vec<&str> = output.lines().collect();
        let from = lines.len().saturating_sub(30);
        format!(
            "--- the last lines of {} ({}) ---\n{}",
            self.name,
            self.log.display(),
            lines[from..].join("\n")
        )
    }

    /// The exit status, if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Wait (bounded) for the process to end; panics with its log tail if it does not.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            if Instant::now() > deadline {
                panic!("{} still runs after {within:?}\n{}", self.name, self.tail());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kill the process and everything in its group at once (as a crash would), and reap it.
    pub fn kill(&mut self) {
        // SAFETY: kill(2) on the process group this child leads; the child is not reaped yet, so
        // its pid (the group's id) is not reused.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Kill every process whose command line contains `marker` (a unique directory, say): the
/// processes a child started in groups of their own.
pub fn kill_processes_naming(marker: &str) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) && pid != std::process::id() as i32 {
            // SAFETY: kill(2) on a process named by its own command line.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Poll `condition` every 20 ms until it holds or `within` has passed; whether it held.
pub async fn eventually<F, Fut>(within: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if condition().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `ishare-gateway testbed --config FILE` as a child process, once it serves (its key material is
/// made at the first start: bounded, generously for a debug build); panics with its log's tail
/// when it ends or does not start.
pub async fn testbed_process(config: &std::path::Path) -> ChildProcess {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ishare-gateway"));
    command.args(["testbed", "--config", config.to_str().unwrap()]);
    let mut testbed = ChildProcess::spawn("testbed", command);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !testbed.output().contains("Ctrl-C stops it.") {
        if let Some(status) = testbed.exited() {
            panic!("the testbed ended ({status})\n{}", testbed.tail());
        }
        assert!(
            Instant::now() < deadline,
            "the testbed did not start\n{}",
            testbed.tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    testbed
}

/// `ishare-gateway run --config FILE` as a child process, with its admin listener at `admin`.
pub struct GatewayProcess {
    pub process: ChildProcess,
    /// http://127.0.0.1:PORT of the admin listener
    pub admin: String,
}

impl GatewayProcess {
    /// Start the binary on `config` (not waiting for it to be ready).
    pub fn start(name: &str, config: &std::path::Path, admin_port: u16) -> GatewayProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ishare-gateway"));
        command.args(["run", "--config", config.to_str().unwrap()]);
        GatewayProcess {
            process: ChildProcess::spawn(name, command),
            admin: format!("http://127.0.0.1:{admin_port}"),
        }
    }

    /// The status and body of /ready, if the admin listener answers.
    pub async fn ready(&self) -> Option<(u16, serde_json::Value)> {
        let r = reqwest::Client::new()
            .get(format!("{}/ready", self.admin))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        Some((r.status().as_u16(), r.json().await.ok()?))
    }

    /// The metrics text of its admin listener.
    pub async fn metrics(&self) -> String {
        let resp = reqwest::get(format!("{}/metrics", self.admin))
            .await
            .unwrap();
        resp.text().await.unwrap()
    }

    /// The configuration generation /ready reports, if it answers.
    pub async fn generation(&self) -> Option<u64> {
        self.ready().await?.1["config_generation"].as_u64()
    }

    /// Wait (bounded) until /ready answers 200; panics with the process's log tail if the
    /// process ends or the time runs out. The generation it serves.
    pub async fn wait_ready(&mut self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = None;
        loop {
            if let Some(status) = self.process.exited() {
                panic!(
                    "the gateway ended before it was ready ({status})\n{}",
                    self.process.tail()
                );
            }
            if let Some((status, body)) = self.ready().await {
                if status == 200 {
                    return body["config_generation"].as_u64().unwrap_or_default();
                }
                last = Some((status, body));
            }
            if Instant::now() > deadline {
                panic!(
                    "the gateway was not ready within 30 s (last /ready: {last:?})\n{}",
                    self.process.tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait (bounded) until /ready answers with `needle` in its body; its status and body.
    /// Panics with the process's log tail if the process ends or the time runs out.
    pub async fn wait_ready_saying(&mut self, needle: &str) -> (u16, serde_json::Value) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = None;
        loop {
            if let Some(status) = self.process.exited() {
                panic!("the gateway ended ({status})\n{}", self.process.tail());
            }
            if let Some((status, body)) = self.ready().await {
                if body.to_string().contains(needle) {
                    return (status, body);
                }
                last = Some((status, body));
            }
            if Instant::now() > deadline {
                panic!(
                    "/ready did not say {needle:?} within 30 s (last: {last:?})\n{}",
                    self.process.tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Send SIGHUP and wait (bounded) until the generation is past `after`; the new generation.
    pub async fn reload(&self, after: u64) -> u64 {
        self.process.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(g) = self.generation().await.filter(|g| *g > after) {
                return g;
            }
            if Instant::now() > deadline {
                panic!(
                    "no reload after generation {after}\n{}",
                    self.process.tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stop with SIGTERM and wait (bounded) for the process to end: its exit status and output.
    pub async fn terminate(mut self) -> (ExitStatus, String) {
        self.process.signal(libc::SIGTERM);
        let status = self.process.wait_exit(Duration::from_secs(30)).await;
        (status, self.process.output())
    }
}
