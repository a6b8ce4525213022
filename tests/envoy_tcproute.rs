//! Real Envoy fed by sluice standalone from Gateway API TCPRoutes: a `TCP` listener of a Gateway
//! of sluice's makes Envoy listen on that port (listener `ingress_tcp_<port>`) and forward every
//! connection to the backends of the TCPRoute attached to it, weighted; a route change moves new
//! connections, and without a route the port refuses connections.
//!
//! The backends are raw TCP servers on 127.0.0.1: each connection first reads the backend's name
//! and a newline, then gets back what it sends. `Harness::start` and `Harness::write` check every
//! configuration with `envoy --mode validate` before Envoy gets it.

mod envoy_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use envoy_support::echo::EchoBackend;
use envoy_support::free_port;
use envoy_support::harness::{Harness, docs, service, slice};
use sluice::cli::bootstrap::XdsProtocol;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How long a test waits for a TCP configuration to reach Envoy.
const TCP_CONVERGE: Duration = Duration::from_secs(20);
/// The Service port the TCPRoutes' backendRefs name.
const SVC_PORT: u16 = 5432;

/// Services `db/<name>` on port [`SVC_PORT`], each with an EndpointSlice of its backend.
fn tcp_services(backends: &[(&str, &EchoBackend)]) -> String {
    let parts = (backends.iter()).flat_map(|(name, b)| {
        [
            service("db", name, SVC_PORT, ""),
            slice("db", name, "", b.port, "0"),
        ]
    });
    docs(&parts.collect::<Vec<_>>())
}

/// sluice's GatewayClass and a Gateway `db/edge` with one TCP listener on `port`.
fn tcp_gateway(port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: sluice}}
spec: {{controllerName: sluice.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: db}}
spec:
  gatewayClassName: sluice
  listeners: [{{name: db, protocol: TCP, port: {port}}}]
"
    )
}

/// A TCPRoute `db/db` on Gateway `edge` whose one rule forwards to `backends` (name, weight).
fn tcp_route(backends: &[(&str, u32)]) -> String {
    let refs = (backends.iter())
        .map(|(name, w)| format!("{{name: {name}, port: {SVC_PORT}, weight: {w}}}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {{name: db, namespace: db}}
spec:
  parentRefs: [{{name: edge}}]
  rules: [{{backendRefs: [{refs}]}}]
"
    )
}

/// What one connection to Envoy's TCP port got.
#[derive(Debug, PartialEq)]
enum Dial {
    /// Nothing listens on the port.
    Refused,
    /// A backend's greeting (its name), with the connection still open.
    Reached(String),
    /// Anything else: a timeout, a close before the greeting, another error.
    Failed(String),
}

/// Connects to 127.0.0.1:`port` and reads the backend's greeting; returns the connection too
/// when a backend answered.
async fn dial(port: u16) -> (Dial, Option<BufReader<TcpStream>>) {
    let step = Duration::from_secs(3);
    let stream = match tokio::time::timeout(step, TcpStream::connect(("127.0.0.1", port))).await {
        Err(_) => return (Dial::Failed("connect timed out".into()), None),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return (Dial::Refused, None);
        }
        Ok(Err(e)) => return (Dial::Failed(format!("connect: {e}")), None),
        Ok(Ok(s)) => s,
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    match tokio::time::timeout(step, reader.read_line(&mut line)).await {
        Err(_) => (Dial::Failed("no greeting within 3 s".into()), None),
        Ok(Err(e)) => (Dial::Failed(format!("read: {e}")), None),
        Ok(Ok(0)) => (Dial::Failed("closed before a greeting".into()), None),
        Ok(Ok(_)) => (Dial::Reached(line.trim_end().to_string()), Some(reader)),
    }
}

/// Envoy's log tail and listeners, for failure messages.
async fn envoy_state(h: &Harness) -> String {
    format!(
        "Envoy listeners:\n{}\nEnvoy log:\n{}",
        h.admin("/listeners").await,
        h.envoy_log_tail()
    )
}

/// Dials `port` until a connection gets `want`, then returns that connection; panics after
/// [`TCP_CONVERGE`] naming the last outcome.
async fn expect_dial(h: &Harness, port: u16, want: Dial) -> Option<BufReader<TcpStream>> {
    let deadline = Instant::now() + TCP_CONVERGE;
    loop {
        let (got, conn) = dial(port).await;
        if got == want {
            return conn;
        }
        if Instant::now() >= deadline {
            panic!(
                "127.0.0.1:{port}: want {want:?}, still {got:?} after {TCP_CONVERGE:?}\n{}",
                envoy_state(h).await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A TCPRoute forwards the connections of its Gateway listener's port to its backend, both
/// ways; rewriting it to another backend moves new connections; deleting it closes the port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcproute_forwards_its_listener_port_follows_changes_and_closes_when_removed() {
    let a = EchoBackend::start("db-a").await;
    let b = EchoBackend::start("db-b").await;
    let port = free_port();
    // The Gateway and its route share a file, rewritten at each step.
    let gateway_and = |route: &str| docs(&[tcp_gateway(port), route.to_string()]);
    let h = Harness::start(
        &[
            ("svc.yaml", tcp_services(&[("db-a", &a), ("db-b", &b)])),
            ("gateway.yaml", gateway_and(&tcp_route(&[("db-a", 1)]))),
        ],
        XdsProtocol::Delta,
    )
    .await;

    // The first connection reads A's greeting, and bytes go through Envoy and back.
    let mut conn = (expect_dial(&h, port, Dial::Reached("db-a".into())).await)
        .expect("a connection that reached db-a");
    let sent = b"sluice forwards raw bytes\n";
    conn.write_all(sent).await.expect("write through Envoy");
    let mut back = vec![0u8; sent.len()];
    let echoed = tokio::time::timeout(Duration::from_secs(5), conn.read_exact(&mut back)).await;
    assert!(
        matches!(echoed, Ok(Ok(_))),
        "no echo through Envoy: {echoed:?}"
    );
    assert_eq!(back, sent, "the echo differs from what was sent");
    drop(conn);
    let listeners = h.admin("/listeners").await;
    assert!(
        listeners.contains(&format!("ingress_tcp_{port}::127.0.0.1:{port}")),
        "Envoy has no listener ingress_tcp_{port} on 127.0.0.1:{port}:\n{listeners}"
    );

    // The route rewritten to B: new connections reach B, and only B.
    h.write("gateway.yaml", &gateway_and(&tcp_route(&[("db-b", 1)])));
    expect_dial(&h, port, Dial::Reached("db-b".into())).await;
    for _ in 0..10 {
        assert_eq!(dial(port).await.0, Dial::Reached("db-b".into()));
    }

    // The route removed: Envoy stops listening on the port; no connection reaches a backend.
    h.write("gateway.yaml", &tcp_gateway(port));
    expect_dial(&h, port, Dial::Refused).await;
    let seen = (a.connections(), b.connections());
    for _ in 0..5 {
        assert_eq!(dial(port).await.0, Dial::Refused);
    }
    assert_eq!(
        (a.connections(), b.connections()),
        seen,
        "a backend got a connection after the TCPRoute was removed"
    );
}

/// A TCPRoute with two backends of equal weight sends connections to both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcproutes_weighted_backends_share_the_connections() {
    let a = EchoBackend::start("db-a").await;
    let b = EchoBackend::start("db-b").await;
    let port = free_port();
    let h = Harness::start(
        &[
            ("svc.yaml", tcp_services(&[("db-a", &a), ("db-b", &b)])),
            ("gateway.yaml", tcp_gateway(port)),
            ("route.yaml", tcp_route(&[("db-a", 1), ("db-b", 1)])),
        ],
        XdsProtocol::Delta,
    )
    .await;

    // Wait for the listener (either backend), then count up to 60 connections: with weights
    // 1:1, all on one side once in 2^59 runs.
    let deadline = Instant::now() + TCP_CONVERGE;
    while !matches!(dial(port).await.0, Dial::Reached(_)) {
        if Instant::now() >= deadline {
            panic!(
                "127.0.0.1:{port}: no backend reached after {TCP_CONVERGE:?}\n{}",
                envoy_state(&h).await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..60 {
        let got = match dial(port).await.0 {
            Dial::Reached(name) => name,
            other => format!("{other:?}"),
        };
        *seen.entry(got).or_default() += 1;
        if seen.contains_key("db-a") && seen.contains_key("db-b") {
            break;
        }
    }
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        ["db-a", "db-b"],
        "connections per outcome: {seen:?}\n{}",
        envoy_state(&h).await
    );
}
