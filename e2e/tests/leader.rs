//! Two replicas: one leader writes status; kill -9 it and the other takes over within 15 s.

use std::time::{Duration, Instant};

use crate::support::{Sluice, env, wait_for, wait_status};

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
