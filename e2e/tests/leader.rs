//! Two replicas: one leader writes status; kill -9 it and the other takes over within 15 s. A
//! leader cut off from the API server (its connections stop carrying anything) steps down at its
//! renew deadline, before the other replica takes over; its Envoy keeps serving, and the status
//! of an object edited meanwhile is written once, by the new leader, and never flips back.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Envoy, Ports, Sluice, env, free_port, wait_for, wait_status};

const ROUTE: &str = "routes.contour.heptio.com";

fn route(ns: &str, prefix: &str) -> String {
    format!(
        r#"
apiVersion: contour.heptio.com/v1alpha1
kind: Route
metadata: {{name: web, namespace: {ns}}}
spec:
  host: leader-{ns}.example.com
  routes:
    - pathPrefix: {prefix}
      upstreams: [{{serviceName: web, servicePort: 80}}]
"#
    )
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn two_replicas_one_leader_writes_and_failover_within_15s() {
    let env = env();
    let ns = env.namespace("e2e-leader");
    env.apply_ok(&env.backend_service(&ns, "web", env.backend_ports[0]));
    let a = Sluice::start(&env, "replica-a", &[]);
    let b = Sluice::start(&env, "replica-b", &[]);
    let mut replicas = [a, b];
    let leader = wait_for(Duration::from_secs(30), "a leader", || {
        match replicas.iter().position(Sluice::is_leader) {
            Some(i) => Ok(i),
            None => Err("none yet".into()),
        }
    });
    let follower = 1 - leader;
    env.apply_ok(&route(&ns, "/"));
    wait_status(&env, ROUTE, &ns, "web", "Valid");
    std::thread::sleep(Duration::from_secs(1));
    assert!(replicas[leader].writes() >= 1);
    assert_eq!(replicas[follower].writes(), 0, "the follower wrote status");
    assert!(!replicas[follower].is_leader());

    // kill -9 the leader, change the object, and time until the follower has written it.
    replicas[leader].kill9();
    let killed = Instant::now();
    env.apply_ok(&route(&ns, "/v2"));
    wait_for(
        Duration::from_secs(30),
        "the follower to take over and write",
        || {
            let o = env.get(ROUTE, &ns, "web").unwrap();
            if o["status"]["observedGeneration"] == 2 {
                Ok(())
            } else {
                Err(o["status"].to_string())
            }
        },
    );
    let failover = killed.elapsed();
    assert!(replicas[follower].is_leader());
    assert!(replicas[follower].writes() >= 1);
    assert!(
        failover <= Duration::from_secs(15),
        "failover took {failover:?}"
    );
    eprintln!("failover took {failover:?}");
}

/// The value of the gauge `sluice_leader` on a replica's /metrics (None while it does not answer).
fn leader_gauge(metrics_port: u16) -> Option<bool> {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "2", "--noproxy", "*"])
        .arg(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with("sluice_leader "))?;
    Some(line.trim_end().ends_with(" 1"))
}

/// The API server's address in a kubeconfig (`server: https://HOST:PORT`).
fn api_server_address(kubeconfig: &std::path::Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).expect("read the kubeconfig");
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("a server in the kubeconfig");
    server.trim().trim_start_matches("https://").to_string()
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn a_leader_cut_off_from_the_api_server_steps_down_and_statuses_never_flip() {
    let env = env();
    let ns = env.namespace("e2e-partition");
    env.apply_ok(&env.backend_service(&ns, "web", env.backend_ports[0]));
    env.apply_ok(&env.backend_service(&ns, "web2", env.backend_ports[1]));
    let host = format!("leader-{ns}.example.com");
    let backend = |i: usize| format!("backend-{}", env.backend_ports[i]);

    // Replica a reaches the API server through a proxy the test can freeze.
    let proxy = freeze::Proxy::start(&api_server_address(&env.sluice_kubeconfig()));
    let kubeconfig = env.work.join("sluice-partition.kubeconfig");
    let direct = std::fs::read_to_string(env.sluice_kubeconfig()).unwrap();
    let upstream = api_server_address(&env.sluice_kubeconfig());
    std::fs::write(
        &kubeconfig,
        direct.replace(&upstream, &format!("127.0.0.1:{}", proxy.port)),
    )
    .unwrap();
    let (metrics_a, metrics_b) = (free_port(), free_port());
    let ports_a = Ports::new();
    let mut args: Vec<String> = ["serve", "--namespace", "sluice-system", "--identity"]
        .map(String::from)
        .to_vec();
    args.push("partition-a".into());
    args.extend(ports_a.serve_flags());
    args.extend(["--metrics-address".into(), format!("127.0.0.1:{metrics_a}")]);
    let a = Sluice::spawn(&env, "partition-a", &args, &kubeconfig);
    // a leads first (a Lease left by an earlier test expires within 15 s), then b starts.
    wait_for(
        Duration::from_secs(40),
        "replica a to lead",
        || match leader_gauge(metrics_a) {
            Some(true) => Ok(()),
            other => Err(format!("sluice_leader: {other:?}")),
        },
    );
    let b = Sluice::start(
        &env,
        "partition-b",
        &["--metrics-address".into(), format!("127.0.0.1:{metrics_b}")],
    );
    wait_for(
        Duration::from_secs(30),
        "replica b to follow",
        || match leader_gauge(metrics_b) {
            Some(false) => Ok(()),
            other => Err(format!("sluice_leader: {other:?}")),
        },
    );
    let envoy = Envoy::start(&env, &ports_a, "partition-a");
    env.apply_ok(&route(&ns, "/"));
    wait_status(&env, ROUTE, &ns, "web", "Valid");
    envoy.wait_answer(&host, "/", 200, &backend(0));

    // Every version of the object from here on, as the API server sends them to a watch.
    let history = env.work.join(format!("partition-{ns}.json"));
    let mut watcher = std::process::Command::new(&env.kubectl)
        .args(["get", ROUTE, "-n", &ns, "web", "--watch", "-o", "json"])
        .stdout(std::fs::File::create(&history).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kubectl get --watch");
    std::thread::sleep(Duration::from_secs(1));
    let writes_a = a.writes();

    // Cut a off: its connections to the API server carry nothing from now on.
    proxy.freeze();
    let frozen = Instant::now();
    let mut stepped_down: Option<Duration> = None;
    let mut took_over: Option<Duration> = None;
    let mut edited = false;
    while frozen.elapsed() < Duration::from_secs(40) {
        let (la, lb) = (leader_gauge(metrics_a), leader_gauge(metrics_b));
        assert!(
            !(la == Some(true) && lb == Some(true)),
            "both replicas lead {:?} after a was cut off",
            frozen.elapsed()
        );
        if la == Some(false) && stepped_down.is_none() {
            stepped_down = Some(frozen.elapsed());
        }
        if lb == Some(true) && took_over.is_none() {
            took_over = Some(frozen.elapsed());
        }
        // Envoy keeps what a gave it.
        let (code, body) = envoy.get(&host, "/");
        assert!(
            code == 200 && body.contains(&backend(0)),
            "Envoy stopped serving while its sluice was cut off: {code} {body}"
        );
        if stepped_down.is_some() && !edited {
            // An edit only b can see and write the status of.
            env.apply_ok(&route(&ns, "/").replace("serviceName: web,", "serviceName: web2,"));
            edited = true;
        }
        if took_over.is_some()
            && env.get(ROUTE, &ns, "web").unwrap()["status"]["observedGeneration"] == 2
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let stepped_down = stepped_down.expect("a never stepped down while cut off");
    let took_over = took_over.expect("b never took over");
    eprintln!(
        "a stepped down {stepped_down:?} after it was cut off; b took over after {took_over:?}"
    );
    assert!(
        stepped_down <= Duration::from_secs(8),
        "a stepped down only {stepped_down:?} after it was cut off (renew deadline 7 s)"
    );
    wait_status(&env, ROUTE, &ns, "web", "Valid");
    assert_eq!(a.writes(), writes_a, "a wrote status while cut off");

    // a gets through again: it follows, its Envoy gets the edit, nothing flips.
    proxy.thaw();
    envoy.wait_answer(&host, "/", 200, &backend(1));
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(leader_gauge(metrics_a), Some(false));
    assert_eq!(leader_gauge(metrics_b), Some(true));
    assert_eq!(a.writes(), writes_a, "a wrote status after it stepped down");
    let _ = watcher.kill();
    let _ = watcher.wait();
    let text = std::fs::read_to_string(&history).unwrap();
    let versions: Vec<Value> = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .expect("kubectl printed JSON objects");
    // The status of each version (its generation and verdict), each change once.
    let mut statuses: Vec<(Value, Value)> = Vec::new();
    for v in &versions {
        let status = &v["status"];
        let key = (
            status["observedGeneration"].clone(),
            status["currentStatus"].clone(),
        );
        if statuses
            .last()
            .is_none_or(|(g, s)| (g, s) != (&key.0, &key.1))
        {
            statuses.push(key);
        }
    }
    eprintln!(
        "{} versions of the object over the episode; statuses: {statuses:?}",
        versions.len()
    );
    assert_eq!(
        statuses,
        [
            (Value::from(1), Value::from("Valid")),
            (Value::from(2), Value::from("Valid"))
        ],
        "the status flipped"
    );
    // What a write that arrives late meets: sluice sends the resourceVersion it saw as a
    // precondition, and the API server refuses a status apply made from an older version.
    let current = env.get(ROUTE, &ns, "web").unwrap();
    let stale = versions[0]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(
        current["metadata"]["resourceVersion"].as_str(),
        Some(stale.as_str())
    );
    let late = format!(
        "apiVersion: contour.heptio.com/v1alpha1\nkind: Route\nmetadata: {{name: web, namespace: {ns}, resourceVersion: \"{stale}\"}}\nstatus: {{currentStatus: Invalid, description: late}}\n"
    );
    let out = env.kubectl_in(
        &[
            "apply",
            "--server-side",
            "--subresource=status",
            "--field-manager=sluice",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(&late),
    );
    assert!(
        !out.ok && out.stderr.contains("modified"),
        "a stale status apply: {out:?}"
    );
    assert_eq!(
        env.get(ROUTE, &ns, "web").unwrap()["status"],
        current["status"]
    );
    drop((a, b, envoy, proxy));
}

/// A TCP proxy on loopback in front of the API server that can be frozen: while frozen it still
/// accepts connections but carries no byte in either direction on any connection, as a network
/// that stopped carrying packets; thawed, it carries what it held and everything after (what a
/// network that heals delivers: TCP resends what it could not before).
mod freeze {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    pub struct Proxy {
        pub port: u16,
        frozen: Arc<AtomicBool>,
        stopped: Arc<AtomicBool>,
        sockets: Arc<Mutex<Vec<TcpStream>>>,
    }

    impl Proxy {
        pub fn start(upstream: &str) -> Proxy {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
            listener.set_nonblocking(true).unwrap();
            let port = listener.local_addr().unwrap().port();
            let proxy = Proxy {
                port,
                frozen: Arc::default(),
                stopped: Arc::default(),
                sockets: Arc::default(),
            };
            let (frozen, stopped, sockets) = (
                proxy.frozen.clone(),
                proxy.stopped.clone(),
                proxy.sockets.clone(),
            );
            let upstream = upstream.to_string();
            std::thread::spawn(move || {
                while !stopped.load(Ordering::SeqCst) {
                    let client = match listener.accept() {
                        Ok((c, _)) => c,
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                    };
                    client.set_nonblocking(false).unwrap();
                    let Ok(server) = TcpStream::connect(&upstream) else {
                        continue;
                    };
                    {
                        let mut s = sockets.lock().unwrap();
                        s.push(client.try_clone().unwrap());
                        s.push(server.try_clone().unwrap());
                    }
                    for (from, to) in [
                        (client.try_clone().unwrap(), server.try_clone().unwrap()),
                        (server, client),
                    ] {
                        let frozen = frozen.clone();
                        std::thread::spawn(move || pump(from, to, &frozen));
                    }
                }
            });
            proxy
        }

        pub fn freeze(&self) {
            self.frozen.store(true, Ordering::SeqCst);
        }

        pub fn thaw(&self) {
            self.frozen.store(false, Ordering::SeqCst);
        }
    }

    /// Copies `from` to `to`, holding what it read while frozen; passes the end on.
    fn pump(mut from: TcpStream, mut to: TcpStream, frozen: &AtomicBool) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            while frozen.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            while frozen.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    }

    impl Drop for Proxy {
        fn drop(&mut self) {
            self.stopped.store(true, Ordering::SeqCst);
            self.thaw();
            for s in self.sockets.lock().unwrap().iter() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}
