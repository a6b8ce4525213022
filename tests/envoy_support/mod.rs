//! Shared helpers of the real-Envoy tests: finding (installing) Envoy, validating resources with
//! `envoy --mode validate`, free ports, echo, scripted, TLS and WebSocket backends, Gateway API
//! and certificate fixtures, and bounded waits.
#![allow(dead_code)]

pub mod backend;
pub mod echo;
pub mod gateway;
pub mod harness;
mod ports;
pub mod scripted;
pub mod tls;
pub mod websocket;

pub use ports::free_port;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use prost::Message;
use sluice::translate::{Resources, static_config::build_static_bootstrap};

/// The Envoy binary: `$ENVOY_BIN`, else what `scripts/ensure-envoy.sh` installs into `.venv/`.
pub fn envoy_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(b) = std::env::var("ENVOY_BIN")
            && !b.is_empty()
        {
            return PathBuf::from(b);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new("bash")
            .arg(root.join("scripts/ensure-envoy.sh"))
            .arg(root)
            .output()
            .expect("run scripts/ensure-envoy.sh");
        assert!(
            out.status.success(),
            "scripts/ensure-envoy.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(!path.is_empty(), "ensure-envoy.sh printed no path");
        PathBuf::from(path)
    })
    .clone()
}

/// Runs `envoy --mode validate` on the resources wrapped as static configuration; panics with
/// Envoy's output when it refuses them.
pub fn assert_envoy_accepts(resources: &Resources, label: &str) {
    let bootstrap = build_static_bootstrap(resources).expect("static bootstrap");
    if let Err(output) = envoy_validate(&bootstrap) {
        panic!("envoy --mode validate refused snapshot {label}:\n{output}");
    }
}

/// `envoy --mode validate` of a bootstrap: Err holds Envoy's output when it refuses it.
pub fn envoy_validate(
    bootstrap: &envoy_types::pb::envoy::config::bootstrap::v3::Bootstrap,
) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("static.pb");
    std::fs::write(&path, bootstrap.encode_to_vec()).expect("write bootstrap");
    let out = Command::new(envoy_bin())
        .arg("--mode")
        .arg("validate")
        .arg("-c")
        .arg(&path)
        .arg("--log-level")
        .arg("warn")
        .arg("--disable-hot-restart")
        .output()
        .expect("run envoy --mode validate");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
