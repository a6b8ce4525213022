//! `sluice serve` in cluster mode without a reachable cluster: a clean error and exit code 1, never
//! a panic (the runtime and signal handlers must be set up before start-up work).

use std::process::Command;

#[test]
fn cluster_mode_without_kubeconfig_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "serve",
            "--xds-address",
            "127.0.0.1:0",
            "--identity",
            "cli-test",
        ])
        .env("KUBECONFIG", dir.path().join("missing-kubeconfig"))
        .env("HOME", dir.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .expect("sluice runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("sluice serve: no Kubernetes configuration"),
        "{stderr}"
    );
}

#[test]
fn ingress_status_address_and_envoy_service_exclude_each_other() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--xds-address", "127.0.0.1:0"])
        .args([
            "--ingress-status-address",
            "192.0.2.1",
            "--envoy-service",
            "a/b",
        ])
        .output()
        .expect("sluice runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("--ingress-status-address and --envoy-service exclude each other"),
        "{stderr}"
    );
}
