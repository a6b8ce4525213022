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

/// `sluice serve ARGS` with no reachable cluster.
fn serve(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--xds-address", "127.0.0.1:0"])
        .args(args)
        .env("KUBECONFIG", dir.path().join("missing-kubeconfig"))
        .env("HOME", dir.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .expect("sluice runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// TLS on the xDS server without a CA for client certificates serves every TLS private key to
/// any client: refused at start (both modes), naming the flags and the fix, unless asked for.
#[test]
fn xds_tls_without_client_authentication_is_refused_unless_asked_for() {
    let manifests = tempfile::tempdir().unwrap();
    let dir = manifests.path().to_str().unwrap();
    let tls = [
        "--xds-cert",
        "/nonexistent/tls.crt",
        "--xds-key",
        "/nonexistent/tls.key",
    ];
    for mode in [&[][..], &["--manifests", dir][..]] {
        let args: Vec<&str> = tls.iter().chain(mode).copied().collect();
        let (code, stderr) = serve(&args);
        assert_eq!(code, Some(2), "{stderr}");
        for needle in [
            "sluice serve: --xds-cert without --xds-ca serves xDS to any client",
            "every TLS private key",
            "add --xds-ca FILE",
            "--xds-allow-unauthenticated-clients",
        ] {
            assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
        }
        // Asked for: start-up goes on (and stops at the missing files or the missing cluster).
        let mut asked = args.clone();
        asked.push("--xds-allow-unauthenticated-clients");
        let (code, stderr) = serve(&asked);
        assert!(!stderr.contains("without --xds-ca"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_ne!(code, Some(0), "{stderr}");
    }
    // The flag means nothing with a CA, nor without a certificate.
    let (code, stderr) = serve(&["--xds-ca", "ca.crt", "--xds-allow-unauthenticated-clients"]);
    assert_eq!(code, Some(2), "{stderr}");
    let mut with_ca = tls.to_vec();
    with_ca.extend([
        "--xds-ca",
        "/nonexistent/ca.crt",
        "--xds-allow-unauthenticated-clients",
    ]);
    let (code, stderr) = serve(&with_ca);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}
