//! Shared helpers of the real-Envoy tests: finding (installing) Envoy, validating resources with
//! `envoy --mode validate`, free ports, echo backends and bounded waits.
#![allow(dead_code)]

pub mod backend;
pub mod harness;

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

/// A free TCP port on 127.0.0.1 for a server a test starts (Envoy's listeners, its admin, sluice's
/// xDS), checked free by binding it, then released. Taken from below the kernel's ephemeral range
/// when there is room there: a port from that range (what binding port 0 gives) can be taken by
/// any outgoing connection in the moment between its release and the server's bind, and the
/// tests make many. Ports are handed out in turn from an offset of this process's id, so the
/// tests of one process never get the same port.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 10_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let span = ephemeral_low.saturating_sub(LOW);
    if span >= 1_000 {
        let start = std::process::id().wrapping_mul(7_919) % span;
        for _ in 0..span {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = LOW + (start + n) % span;
            if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
                return port as u16;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local addr")
        .port()
}
