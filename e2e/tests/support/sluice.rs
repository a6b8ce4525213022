//! `sluice serve` processes of the tests: started, stopped with SIGTERM or kill -9, their logs
//! and status writes read.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// One `sluice serve` process in cluster mode.
pub struct Sluice {
    child: Option<Child>,
    pid_file: PathBuf,
    pub log: PathBuf,
}

impl Sluice {
    /// Starts `sluice serve` with this identity and extra flags, logging to the work dir.
    pub fn start(env: &Env, identity: &str, extra: &[String]) -> Sluice {
        let mut args: Vec<String> = [
            "serve",
            "--namespace",
            "sluice-system",
            "--identity",
            identity,
        ]
        .map(String::from)
        .to_vec();
        args.extend_from_slice(extra);
        // Never the default xDS port: replicas (and other software) must not collide.
        if !extra.iter().any(|a| a == "--xds-address") {
            args.extend(Ports::new().serve_flags());
        }
        Sluice::spawn(env, identity, &args, &env.sluice_kubeconfig())
    }

    /// Starts `sluice ARGS` as the user of `kubeconfig`, logging to the work dir.
    pub fn spawn(env: &Env, name: &str, args: &[String], kubeconfig: &Path) -> Sluice {
        Sluice::spawn_with(env, name, args, kubeconfig, &[])
    }

    /// [`Sluice::spawn`] with more environment variables (`vars`).
    pub fn spawn_with(
        env: &Env,
        name: &str,
        args: &[String],
        kubeconfig: &Path,
        vars: &[(String, String)],
    ) -> Sluice {
        let n = std::fs::read_dir(&env.work).map(|d| d.count()).unwrap_or(0);
        let log = env.work.join(format!("sluice-{name}-{n}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .env("RUST_LOG", "info")
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("sluice starts");
        // e2e/run.sh kills whatever is left on exit, even when this test process is killed.
        let pid_file = env.work.join(format!("test-sluice-{}.pid", child.id()));
        let _ = std::fs::write(&pid_file, child.id().to_string());
        Sluice {
            child: Some(child),
            pid_file,
            log,
        }
    }

    /// The process id while it runs.
    #[allow(dead_code)] // used by benches/cluster.rs and benches/contour.rs
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Status writes this process made so far (one log line each).
    pub fn writes(&self) -> usize {
        self.log_text().matches("status written").count()
    }

    /// Lines of the log containing `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.log_text().matches(needle).count()
    }

    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        wait_for(
            timeout,
            &format!("{needle:?} in {}", self.log.display()),
            || {
                if self.log_text().contains(needle) {
                    Ok(())
                } else {
                    Err(tail(&self.log_text()))
                }
            },
        );
    }

    pub fn is_leader(&self) -> bool {
        self.count("became leader") > self.count("lost the lease") + self.count("stepping down")
    }

    /// `kill -9`: no cleanup at all (the Lease stays held until it expires).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            let _ = std::fs::remove_file(&self.pid_file);
        }
    }

    /// SIGTERM and wait (then SIGKILL after 10 s).
    pub fn terminate(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = c.kill();
        let _ = c.wait();
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        self.terminate();
    }
}
