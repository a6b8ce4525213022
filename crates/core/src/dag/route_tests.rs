//! The Route v1alpha1 processor: which strategy and health check each upstream's cluster gets
//! (seed 004: the route's own override the spec's, an upstream's lbHealthCheck the spec's).

use crate::api::LbStrategy;
use crate::dag::{self, Cluster, Dag, Options};
use crate::store::Snapshot;

fn mk_dag(yaml: &str) -> Dag {
    dag::build(&Snapshot::from_test_yaml(yaml), &Options::default())
}

/// The cluster of Service `svc` (one per Service here).
fn cluster<'d>(d: &'d Dag, svc: &str) -> &'d Cluster {
    let found: Vec<&Cluster> = (d.clusters.values())
        .map(|c| &**c)
        .filter(|c| c.name.starts_with(&format!("finance/{svc}/")))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "clusters of {svc}: {:?}",
        d.clusters.keys().collect::<Vec<_>>()
    );
    found[0]
}

const ROUTE: &str = "
apiVersion: contour.heptio.com/v1alpha1
kind: Route
metadata: {name: r, namespace: finance}
spec:
  host: heptio.com
  strategy: Random
  lbHealthCheck: {path: /spec-health, intervalSeconds: 7}
  routes:
  - pathPrefix: /
    upstreams:
    - {serviceName: www, servicePort: 80}
    - {serviceName: canary, servicePort: 80, lbHealthCheck: {path: /own-health}}
  - pathPrefix: /ticker
    strategy: WeightedLeastRequest
    upstreams:
    - {serviceName: ticker, servicePort: 80}
";

const SERVICES: &str = "
---
apiVersion: v1
kind: Service
metadata: {name: www, namespace: finance}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: canary, namespace: finance}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: ticker, namespace: finance}
spec: {ports: [{port: 80}]}
";

#[test]
fn a_routes_strategy_overrides_the_specs_and_an_upstreams_health_check_the_specs() {
    let d = mk_dag(&format!("{ROUTE}{SERVICES}"));
    // spec.strategy for the route without one; the route's own where it has one.
    assert_eq!(cluster(&d, "www").lb, LbStrategy::Random);
    assert_eq!(cluster(&d, "canary").lb, LbStrategy::Random);
    assert_eq!(cluster(&d, "ticker").lb, LbStrategy::WeightedLeastRequest);
    // spec.lbHealthCheck for upstreams without one; an upstream's own replaces it whole.
    let hc = |svc: &str| {
        cluster(&d, svc)
            .health_check
            .clone()
            .expect("a health check")
    };
    assert_eq!(hc("www").path, "/spec-health");
    assert_eq!(hc("www").interval.as_secs(), 7);
    assert_eq!(hc("ticker").path, "/spec-health");
    assert_eq!(hc("canary").path, "/own-health");
    assert_eq!(
        hc("canary").interval.as_secs(),
        5,
        "the seed's default, not the spec's 7"
    );
    // Without spec-level settings: RoundRobin and no health check.
    let plain = ROUTE.replace("  strategy: Random\n", "").replace(
        "  lbHealthCheck: {path: /spec-health, intervalSeconds: 7}\n",
        "",
    );
    let d = mk_dag(&format!("{plain}{SERVICES}"));
    assert_eq!(cluster(&d, "www").lb, LbStrategy::RoundRobin);
    assert!(cluster(&d, "www").health_check.is_none());
    assert_eq!(cluster(&d, "ticker").lb, LbStrategy::WeightedLeastRequest);
}
