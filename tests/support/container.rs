//! The gateway's image under podman: built from the Containerfile around the binary under test
//! (`deploy/container/image --binary`), and containers of it started attached, their output in a
//! log file as a child process's, and removed when their value is dropped: on success, on failure
//! and on panic.

use super::process::ChildProcess;
use super::repo;
use std::process::Command;

/// podman's global options as `make image` passes them: runc and cgroupfs, which work where
/// crun or systemd's cgroups are refused (containers inside containers).
const GLOBAL: [&str; 4] = ["--runtime", "runc", "--cgroup-manager", "cgroupfs"];
/// Limits of `build` and `run` that such machines accept.
const LIMITS: [&str; 4] = [
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
];

/// `podman` with the global options.
pub fn podman() -> Command {
    let mut command = Command::new("podman");
    command.args(GLOBAL);
    command
}

/// `podman ARGS` run to its end: whether it succeeded, and what it printed.
pub fn podman_output(args: &[&str]) -> (bool, String) {
    let out = podman()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("podman does not start (`make test-setup` installs it): {e}"));
    (out.status.success(), super::printed(&out))
}

/// Build the image `tag` around the binary under test, as CI does: the Containerfile's
/// `prebuilt` target on the base image (made with mmdebstrap where no registry gives it).
pub fn build_image(tag: &str) {
    let out = Command::new(repo().join("deploy/container/image"))
        .env("PODMAN", format!("podman {}", GLOBAL.join(" ")))
        .env("CONTAINER_LIMITS", LIMITS.join(" "))
        .args(["--binary", env!("CARGO_BIN_EXE_ishare-gateway"), tag])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the image does not build\n{}",
        super::printed(&out)
    );
}

/// A container on the host's network, removed when dropped.
pub struct Container {
    pub name: String,
    /// `podman run`, attached: its output is the container's, its exit status the container's.
    pub process: ChildProcess,
}

impl Container {
    /// `podman run --rm --name NAME --network host OPTIONS IMAGE ARGS…`, attached.
    pub fn run(name: &str, options: &[&str], image: &str, args: &[&str]) -> Container {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut command = podman();
        command
            .args(["run", "--rm", "--name", &name, "--network", "host"])
            .args(LIMITS)
            .args(options)
            .arg(image)
            .args(args);
        Container {
            process: ChildProcess::spawn(&name, command),
            name,
        }
    }

    /// `podman kill --signal SIGNAL`: the signal to the container's main process.
    pub fn signal(&self, signal: &str) {
        let (ok, said) = podman_output(&["kill", "--signal", signal, &self.name]);
        assert!(ok, "podman kill --signal {signal} {}: {said}", self.name);
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman()
            .args(["rm", "--force", "--time", "0", &self.name])
            .output();
    }
}
