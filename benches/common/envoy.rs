//! A real Envoy fed by sluice's ADS server, and the steps of its route configuration updates as
//! its log tells them: for the benchmarks that time what Envoy does with an update.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use sluice::cli::bootstrap::{BootstrapArgs, XdsProtocol, build_bootstrap};

/// Envoy, stopped when dropped (also when the benchmark panics), with its bootstrap and log in a
/// directory of its own.
pub struct Envoy {
    child: Child,
    log_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Envoy {
    /// Starts `bin` with the bootstrap `sluice bootstrap` writes for the ADS server on
    /// 127.0.0.1:`xds_port` (delta xDS) and the flags docs/xds.md recommends, on one worker as in
    /// the e2e tests. Its log marks each step of an update to the microsecond.
    pub fn start(bin: &Path, xds_port: u16, admin_port: u16) -> Envoy {
        let dir = tempfile::tempdir().expect("tempdir");
        let bootstrap_path = dir.path().join("bootstrap.json");
        let bootstrap = build_bootstrap(&BootstrapArgs {
            xds_address: format!("127.0.0.1:{xds_port}"),
            out: bootstrap_path.clone(),
            xds_ca: None,
            xds_cert: None,
            xds_key: None,
            admin_port: Some(admin_port),
            admin_socket: None,
            node_id: "bench".into(),
            node_cluster: "bench".into(),
            xds_protocol: XdsProtocol::Delta,
        })
        .expect("bootstrap");
        std::fs::write(&bootstrap_path, bootstrap.to_string()).expect("write bootstrap");
        let log_path = dir.path().join("envoy.log");
        let log = std::fs::File::create(&log_path).expect("envoy log");
        let child = Command::new(bin)
            .arg("-c")
            .arg(&bootstrap_path)
            .args(["--concurrency", "1", "--ignore-unknown-dynamic-fields"])
            .args([
                "--disable-hot-restart",
                "--base-id",
                &admin_port.to_string(),
            ])
            // The two loggers whose lines mark an update's steps, timed to the microsecond.
            .args(["--component-log-level", "config:debug,rds:debug"])
            .args(["--log-format", "[%T.%f][%n] %v"])
            // Its log's times of day in UTC, as the benchmarks read the clock.
            .env("TZ", "UTC")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("envoy log"))
            .stderr(log)
            .spawn()
            .expect("start envoy");
        Envoy {
            child,
            log_path,
            _dir: dir,
        }
    }

    /// Envoy's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// When Envoy logged the three steps of an update of the HTTP route configuration, seconds of
/// the day: received; decoded, checked and its route table built (the line that says it loads the
/// new configuration comes after the table is made); accepted.
#[derive(Clone, Copy, Debug)]
pub struct Update {
    pub received: f64,
    pub built: f64,
    pub accepted: f64,
}

/// The updates of the HTTP route configuration (`ingress_http`) in Envoy's log, in order.
pub fn updates(log: &str) -> Vec<Update> {
    let seconds = |line: &str| -> Option<f64> {
        let t = line.strip_prefix('[')?.split(']').next()?;
        let mut parts = t.split(':');
        let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
        Some(
            h.parse::<f64>().ok()? * 3600.0
                + m.parse::<f64>().ok()? * 60.0
                + s.parse::<f64>().ok()?,
        )
    };
    let mut out = Vec::new();
    let mut received = None;
    let mut built = None;
    for line in log.lines() {
        let Some(t) = seconds(line) else { continue };
        if line.contains("Received DeltaDiscoveryResponse for type.googleapis.com/envoy.config.route.v3.RouteConfiguration") {
            received = Some(t);
        } else if line.contains("rds: loading new configuration: config_name=ingress_http") {
            built = Some(t);
        } else if line.contains("RouteConfiguration accepted")
            && let (Some(received), Some(built)) = (received.take(), built.take())
        {
            out.push(Update {
                received,
                built,
                accepted: t,
            });
        }
    }
    out
}
