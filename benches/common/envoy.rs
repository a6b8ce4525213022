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
            stats_address: None,
            overload: Default::default(),
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

    /// Envoy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
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

/// Seconds of the day of a time `HH:MM:SS.ffffff`.
fn seconds_of_day(t: &str) -> Option<f64> {
    let mut parts = t.split(':').map(|p| p.parse::<f64>().ok());
    Some(parts.next()?? * 3600.0 + parts.next()?? * 60.0 + parts.next()??)
}

/// The updates of the HTTP route configuration (`ingress_http`) in Envoy's log, in order.
pub fn updates(log: &str) -> Vec<Update> {
    let seconds = |line: &str| seconds_of_day(line.strip_prefix('[')?.split(']').next()?);
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

/// A new route's way, per create, in ms after the create was sent: sluice logged the build
/// holding it as published (its "published a new build" line, written once the build is handed
/// to the xDS server, so Envoy may have received it a moment before), Envoy received the HTTP
/// route configuration, built its route table and accepted the update (its log, [`updates`]).
/// Each is the first such line at or after the create; NaN when a log has none within 10 s.
pub struct Steps {
    pub published: Vec<f64>,
    pub received: Vec<f64>,
    pub built: Vec<f64>,
    pub accepted: Vec<f64>,
}

impl Steps {
    pub fn of(&self, k: usize) -> [f64; 4] {
        [
            self.published[k],
            self.received[k],
            self.built[k],
            self.accepted[k],
        ]
    }

    pub fn missing(&self) -> usize {
        (0..self.published.len())
            .map(|k| self.of(k).iter().filter(|v| v.is_nan()).count())
            .sum()
    }
}

/// [`Steps`] of the creates sent at `sent` (Unix seconds). Both logs give times of day in UTC.
pub fn propagation_steps(sent: &[f64], sluice_log: &str, envoy_log: &str) -> Steps {
    const DAY: f64 = 86_400.0;
    // sluice's log lines start with an RFC 3339 time in UTC: 2026-12-01T23:06:46.396151Z.
    let published: Vec<f64> = sluice_log
        .lines()
        .filter(|l| l.contains("published a new build"))
        .filter_map(|l| seconds_of_day(l.split_once('T')?.1.split_once('Z')?.0))
        .collect();
    let updates = updates(envoy_log);
    // ms from the create sent at `s` (Unix seconds) to time of day `t`, if within 10 s after it.
    let after = |s: f64, t: f64| {
        let d = (t - s.rem_euclid(DAY)).rem_euclid(DAY);
        (d < 10.0).then_some(d * 1e3)
    };
    let first_published = |s: f64| {
        (published.iter())
            .filter_map(|&t| after(s, t))
            .min_by(f64::total_cmp)
            .unwrap_or(f64::NAN)
    };
    let first_update = |s: f64| {
        (updates.iter())
            .filter_map(|u| Some((after(s, u.received)?, u)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map_or([f64::NAN; 3], |(received, u)| {
                let d = |t: f64| (t - s.rem_euclid(DAY)).rem_euclid(DAY) * 1e3;
                [received, d(u.built), d(u.accepted)]
            })
    };
    let mut steps = Steps {
        published: Vec::new(),
        received: Vec::new(),
        built: Vec::new(),
        accepted: Vec::new(),
    };
    for &s in sent {
        steps.published.push(first_published(s));
        let [r, b, a] = first_update(s);
        steps.received.push(r);
        steps.built.push(b);
        steps.accepted.push(a);
    }
    steps
}
