//! The IngressRoute processor's tests: preparation, host claims, delegation and statuses.

use std::time::Duration;

use crate::dag::{self, Dag, Options};
use crate::store::{AnyObject, Snapshot};

use super::*;
use crate::dag::links::LinkRef;

fn mk_dag(yaml: &str) -> Dag {
    dag::build(&Snapshot::from_test_yaml(yaml), &Options::default())
}

fn status(d: &Dag, kind: Kind, ns: &str, name: &str) -> (State, Vec<String>) {
    let s = &d.statuses[&ObjectRef::new(kind, ns, name)];
    (
        s.state,
        s.messages.iter().map(ToString::to_string).collect(),
    )
}

const SVC: &str = "
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: a}
spec: {ports: [{port: 80}]}
";

#[test]
fn the_store_prepares_each_version_of_an_ingressroute_it_takes_in() {
    let root = |prefix: &str| {
        format!(
            "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: r, namespace: a, generation: 3}}
spec:
  virtualhost: {{fqdn: r.example.com}}
  routes:
  - match: {prefix}
    services: [{{name: app, port: 80}}]
  - match: /d
    delegate: {{name: v, namespace: b}}
"
        )
    };
    let mut snap = Snapshot::from_test_yaml(&root("/app"));
    let key = ObjKey::new("a", "r");
    let first = snap.ingressroutes_v1beta1[&key].clone();
    let ready = first.ready();
    assert!(ready.allowed());
    assert_eq!(ready.generation, Some(3));
    assert_eq!(ready.virtualhost.as_ref().unwrap().fqdn, "r.example.com");
    let paths: Vec<_> = ready.routes.iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, [PathMatch::prefix("/app"), PathMatch::prefix("/d")]);
    assert!(matches!(&ready.routes[0].target, Target::Backends(b) if b[0].name == "app"));
    // A delegation without a namespace names the object's own.
    assert!(matches!(&ready.routes[1].target, Target::Delegate(k) if *k == ObjKey::new("b", "v")));
    // The hashes of its links: itself, its delegate, its host, in any letter case.
    let links = [
        LinkRef::IngressRoute("a", "r"),
        LinkRef::IngressRoute("b", "v"),
        LinkRef::Host("R.Example.com"),
    ];
    let want: Vec<u64> = links.into_iter().map(LinkRef::hash).collect();
    assert_eq!(ready.link_hashes(), want);
    assert_ne!(want[0], LinkRef::IngressRoute("a", "v").hash());

    // A new version of the object is prepared again: a path that breaks the rules leaves
    // the verdict's errors and no routes, and the object compares as its object.
    let next = Snapshot::from_test_yaml(&root("app"));
    let bad = next.ingressroutes_v1beta1[&key].clone();
    assert!(!bad.ready().allowed());
    assert!(bad.ready().routes.is_empty());
    assert!(*bad != *first);
    snap.insert(AnyObject::IngressRouteV1beta1(bad.object().clone()));
    assert!(*snap.ingressroutes_v1beta1[&key] == *bad);
    let d = dag::build(&snap, &Options::default());
    let (state, messages) = status(&d, Kind::IngressRouteV1beta1, "a", "r");
    assert_eq!(state, State::Invalid);
    assert!(messages[0].contains("spec.routes[0].match"), "{messages:?}");
}

#[test]
fn v1_failure_and_timeout_policies_reach_the_model() {
    let d = mk_dag(&format!(
        "
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: r, namespace: a}}
spec:
  virtualhost: {{fqdn: t.example.com}}
  routes:
  - match: {{path: /}}
    timeoutPolicy: {{request: 1s}}
    failurePolicy: {{count: 3, perTryTimeout: 150ms}}
    services: [{{https: app, port: 80, strategy: Random}}]
  - match: {{path: /no-retry}}
    failurePolicy: {{retryPolicyEnabled: false, passiveHealthCheckEnabled: false}}
    services: [{{http: app, port: 80}}]
  - match: {{path: /defaults}}
    failurePolicy: {{}}
    services: [{{http: app, port: 80}}]
{SVC}"
    ));
    let routes = &d.vhosts["t.example.com"].routes;
    let by_path = |p: &str| routes.iter().find(|r| r.path.value() == p).unwrap();
    let root = by_path("/");
    assert_eq!(root.timeout, Some(Timeout::After(Duration::from_secs(1))));
    assert_eq!(
        root.retry,
        Some(RetryPolicy::new(3, Some(Duration::from_millis(150))))
    );
    let RouteAction::Forward(cs) = &root.action else {
        panic!("forward expected")
    };
    let c = &d.clusters[&cs[0].cluster];
    assert_eq!(c.protocol, UpstreamProtocol::Https);
    assert_eq!(c.lb, crate::api::LbStrategy::Random);
    assert_eq!(
        c.outlier_detection,
        Some(OutlierDetection { consecutive_5xx: 3 })
    );
    let off = by_path("/no-retry");
    assert_eq!(off.retry, None);
    let RouteAction::Forward(cs) = &off.action else {
        panic!("forward expected")
    };
    assert_eq!(d.clusters[&cs[0].cluster].outlier_detection, None);
    let defaults = by_path("/defaults");
    assert_eq!(defaults.retry, Some(RetryPolicy::new(1, None)));
    let RouteAction::Forward(cs) = &defaults.action else {
        panic!("forward expected")
    };
    assert_eq!(
        d.clusters[&cs[0].cluster].outlier_detection,
        Some(OutlierDetection { consecutive_5xx: 5 })
    );
}

/// `failurePolicy.count: 0` means no retries; the ejection threshold stays Envoy's default
/// (a single 5xx does not eject a host), with or without retries turned off.
#[test]
fn a_zero_failure_count_turns_retries_off_and_keeps_the_default_ejection_threshold() {
    let d = mk_dag(&format!(
        "
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: r, namespace: a}}
spec:
  virtualhost: {{fqdn: z.example.com}}
  routes:
  - match: {{path: /}}
    failurePolicy: {{count: 0, perTryTimeout: 150ms}}
    services: [{{http: app, port: 80}}]
  - match: {{path: /no-retry}}
    failurePolicy: {{count: 0, retryPolicyEnabled: false}}
    services: [{{http: app, port: 80, strategy: Random}}]
  - match: {{path: /one}}
    failurePolicy: {{count: 1}}
    services: [{{http: app, port: 80, strategy: WeightedLeastRequest}}]
{SVC}"
    ));
    let routes = &d.vhosts["z.example.com"].routes;
    let by_path = |p: &str| routes.iter().find(|r| r.path.value() == p).unwrap();
    let outlier = |r: &Route| {
        let RouteAction::Forward(cs) = &r.action else {
            panic!("forward expected")
        };
        d.clusters[&cs[0].cluster].outlier_detection.clone()
    };
    let zero = by_path("/");
    assert_eq!(
        zero.retry,
        Some(RetryPolicy::new(0, Some(Duration::from_millis(150))))
    );
    let default = Some(OutlierDetection {
        consecutive_5xx: DEFAULT_CONSECUTIVE_5XX,
    });
    assert_eq!(DEFAULT_CONSECUTIVE_5XX, 5);
    assert_eq!(outlier(zero), default);
    let off = by_path("/no-retry");
    assert_eq!(off.retry, None);
    assert_eq!(outlier(off), default);
    // A count of 1 is both one retry and ejection after one 5xx.
    let one = by_path("/one");
    assert_eq!(one.retry.as_ref().map(|r| r.count), Some(1));
    assert_eq!(outlier(one), Some(OutlierDetection { consecutive_5xx: 1 }));
}

#[test]
fn strategy_and_health_check_fall_back_to_the_spec() {
    let d = mk_dag(&format!(
        "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: r, namespace: a}}
spec:
  virtualhost: {{fqdn: h.example.com}}
  strategy: WeightedLeastRequest
  healthCheck: {{path: /healthz, intervalSeconds: 7}}
  routes:
  - match: /
    services:
    - {{name: app, port: 80}}
    - {{name: app, port: 80, strategy: Random, healthCheck: {{path: /own}}}}
{SVC}"
    ));
    let RouteAction::Forward(cs) = &d.vhosts["h.example.com"].routes[0].action else {
        panic!("forward expected")
    };
    let inherited = &d.clusters[&cs[0].cluster];
    assert_eq!(inherited.lb, crate::api::LbStrategy::WeightedLeastRequest);
    let hc = inherited.health_check.as_ref().unwrap();
    assert_eq!((hc.path.as_str(), hc.interval.as_secs()), ("/healthz", 7));
    let own = &d.clusters[&cs[1].cluster];
    assert_eq!(own.lb, crate::api::LbStrategy::Random);
    assert_eq!(own.health_check.as_ref().unwrap().path, "/own");
    assert_eq!(inherited.protocol, UpstreamProtocol::Http);
}

#[test]
fn tcp_backends_become_the_vhost_tcp_proxy() {
    let crt = include_str!("../../../../tests/golden/dag/ir-tls.in.yaml");
    // Reuse the Secret of the TLS golden case.
    let secret = crt
        .split("\n---\n")
        .find(|d| d.contains("kind: Secret"))
        .unwrap();
    let d = mk_dag(&format!(
        "{secret}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: tcp, namespace: web}}
spec:
  virtualhost:
    fqdn: tcp.example.com
    tls: {{secretName: site-tls}}
  routes:
  - services: [{{tcp: db, port: 5432, weight: 3}}, {{tcp: db2, port: 5432}}]
---
apiVersion: v1
kind: Service
metadata: {{name: db, namespace: web}}
spec: {{ports: [{{port: 5432}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: db2, namespace: web}}
spec: {{ports: [{{port: 5432}}]}}
"
    ));
    let v = &d.vhosts["tcp.example.com"];
    assert!(v.routes.is_empty());
    assert!(v.tls.is_some());
    let proxy = v.tcp_proxy.as_ref().expect("tcp proxy");
    let got: Vec<(UpstreamProtocol, u32)> = proxy
        .iter()
        .map(|w| (d.clusters[&w.cluster].protocol, w.weight))
        .collect();
    assert_eq!(
        got,
        vec![(UpstreamProtocol::Tcp, 3), (UpstreamProtocol::Tcp, 0)]
    );
    assert_eq!(
        status(&d, Kind::IngressRouteV1, "web", "tcp").0,
        State::Valid
    );
}

#[test]
fn v1_vertex_without_path_leaves_a_path_delegation() {
    let d = mk_dag(&format!(
        "
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: root, namespace: a}}
spec:
  virtualhost: {{fqdn: p.example.com}}
  routes:
  - match: {{path: /foo}}
    delegate: {{name: v}}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: v, namespace: a}}
spec:
  routes:
  - match: {{headers: [{{header: x, value: a}}]}}
    services: [{{http: app, port: 80}}]
{SVC}"
    ));
    assert_eq!(
            status(&d, Kind::IngressRouteV1, "a", "v"),
            (
                State::Invalid,
                vec![
                    "spec.routes[0].match.path: absent (everything) is outside the prefix \"/foo\" delegated by IngressRoute a/root".to_string()
                ]
            )
        );
    let r = &d.vhosts["p.example.com"].routes[0];
    assert_eq!(
        r.action,
        RouteAction::Unavailable(
            "delegate a/v has routes outside the space delegated to it".into()
        )
    );
}

#[test]
fn delegation_depth_is_bounded() {
    // root -> v0 -> v1 -> ... -> v39: delegations past the 32nd are not followed.
    let mut yaml = "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: deep.example.com}
  routes:
  - match: /
    delegate: {name: v0}
"
    .to_string();
    for i in 0..40 {
        yaml.push_str(&format!(
            "---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: v{i}, namespace: a}}
spec:
  routes:
  - match: /
    delegate: {{name: v{}}}
",
            i + 1
        ));
    }
    let d = mk_dag(&yaml);
    // v31 is reached by the 32nd delegation; its own delegation would be the 33rd.
    assert_eq!(
            status(&d, Kind::IngressRouteV1beta1, "a", "v31"),
            (
                State::Invalid,
                vec![
                    "spec.routes[0].delegate: IngressRoute a/v32 is not followed: delegation chains are limited to 32 delegations".to_string()
                ]
            )
        );
    assert_eq!(
        status(&d, Kind::IngressRouteV1beta1, "a", "v30").0,
        State::Valid
    );
    assert_eq!(
        status(&d, Kind::IngressRouteV1beta1, "a", "v32").0,
        State::Orphaned
    );
    let r = &d.vhosts["deep.example.com"].routes[0];
    assert_eq!(
        r.source,
        ObjectRef::new(Kind::IngressRouteV1beta1, "a", "v31")
    );
    // v40 does not exist: never reached, so the missing delegate is not reported.
    assert_eq!(
        status(&d, Kind::IngressRouteV1beta1, "a", "v39").0,
        State::Orphaned
    );
}

/// Level k delegates to level k+1 twice; `headers` puts a different header condition on each.
fn diamonds(levels: usize, headers: bool) -> String {
    // Level k delegates a(k) and a(k)/y; a(k) = a(k-1)/y/x{k} lies inside the narrower a(k-1)/y.
    let path = |k: usize| -> String {
        let mut p: String = (0..k).map(|i| format!("/x{i}/y")).collect();
        p.push_str(&format!("/x{k}"));
        p
    };
    let leaf = if headers {
        "/leaf".to_string()
    } else {
        format!("{}/y/leaf", path(levels - 1))
    };
    let mut yaml = String::new();
    for k in 0..levels {
        let vh = if k == 0 {
            "  virtualhost: {fqdn: diamond.example.com}\n"
        } else {
            ""
        };
        // Path mode: both delegations of level k lie inside the narrower one of level k-1.
        let (m1, m2) = if headers {
            (
                format!("{{headers: [{{header: x-{k}, value: a}}]}}"),
                format!("{{headers: [{{header: x-{k}, value: b}}]}}"),
            )
        } else {
            (
                format!("{{path: {}}}", path(k)),
                format!("{{path: {}/y}}", path(k)),
            )
        };
        yaml.push_str(&format!(
            "---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: v{k}, namespace: a}}
spec:
{vh}  routes:
  - match: {m1}
    delegate: {{name: v{}}}
  - match: {m2}
    delegate: {{name: v{}}}
",
            k + 1,
            k + 1
        ));
    }
    yaml.push_str(&format!(
        "---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: v{levels}, namespace: a}}
spec:
  routes:
  - match: {{path: {leaf}}}
    services: [{{http: app, port: 80}}]
{SVC}"
    ));
    yaml
}

#[test]
fn diamonds_are_walked_once_per_space() {
    // 2^30 delegation paths, but only two spaces per vertex: linear work.
    let d = mk_dag(&diamonds(30, false));
    assert_eq!(status(&d, Kind::IngressRouteV1, "a", "v30").0, State::Valid);
    let routes = &d.vhosts["diamond.example.com"].routes;
    assert_eq!(routes.len(), 1, "{routes:?}");
    assert!(routes[0].path.value().ends_with("/x28/y/x29/y/leaf"));
}

#[test]
fn exponential_header_delegation_hits_the_visit_budget() {
    // Every level doubles the distinct header spaces: 2^30 visits without a bound.
    let d = mk_dag(&diamonds(30, true));
    let refused = d
        .statuses
        .values()
        .flat_map(|s| &s.messages)
        .filter(|m| {
            m.to_string().ends_with(
                "the delegation graph of IngressRoute a/v0 needs more than 1272 vertex visits",
            )
        })
        .count();
    assert!(refused > 0);
    let routes: usize = d.vhosts.values().map(|v| v.routes.len()).sum();
    // 31 IngressRoutes: 1024 + 8 * 31 = 1272 visits for the root, two routes each at most.
    assert!(routes <= 2 * 1272, "{routes} routes");
}

#[test]
fn inherited_conditions_can_make_two_vertex_routes_the_same() {
    let d = mk_dag(&format!(
        "
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: root, namespace: a}}
spec:
  virtualhost: {{fqdn: same.example.com}}
  routes:
  - match: {{path: /foo, headers: [{{header: x, value: a}}]}}
    delegate: {{name: v}}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: v, namespace: a}}
spec:
  routes:
  - match: {{path: /foo}}
    services: [{{http: app, port: 80}}]
  - match: {{path: /foo, headers: [{{header: x, value: a}}]}}
    services: [{{http: app, port: 80}}]
{SVC}"
    ));
    assert_eq!(
            status(&d, Kind::IngressRouteV1, "a", "v"),
            (
                State::Invalid,
                vec![
                    "spec.routes[1].match: is the same match as spec.routes[0] once the conditions delegated by IngressRoute a/root are added".to_string()
                ]
            )
        );
    assert_eq!(d.vhosts["same.example.com"].routes.len(), 1);
}

#[test]
fn repeated_matches_are_found_in_small_and_large_vertices_alike() {
    // The last route repeats the first once the delegated condition is added; the routes
    // between differ. Few routes are compared pair by pair, many through a table.
    for n in [3, 40] {
        let mut yaml = String::from(
            "
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: same.example.com}
  routes:
  - match: {path: /, headers: [{header: x, value: a}]}
    delegate: {name: v}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: v, namespace: a}
spec:
  routes:
  - match: {path: /p, headers: [{header: x, value: a}]}
    services: [{http: app, port: 80}]
",
        );
        for i in 1..n - 1 {
            yaml.push_str(&format!(
                "  - match: {{path: /p{i}}}\n    services: [{{http: app, port: 80}}]\n"
            ));
        }
        yaml.push_str("  - match: {path: /p}\n    services: [{http: app, port: 80}]\n");
        yaml.push_str(SVC);
        let d = mk_dag(&yaml);
        let last = n - 1;
        assert_eq!(
            status(&d, Kind::IngressRouteV1, "a", "v"),
            (
                State::Invalid,
                vec![format!(
                    "spec.routes[{last}].match: is the same match as spec.routes[0] once the conditions delegated by IngressRoute a/root are added"
                )]
            ),
            "{n} routes"
        );
        assert_eq!(
            d.vhosts["same.example.com"].routes.len(),
            n - 1,
            "{n} routes"
        );
    }
}

#[test]
fn a_vertex_reached_twice_reports_each_problem_once() {
    let d = mk_dag(
        "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: twice.example.com}
  routes:
  - match: /a
    delegate: {name: v}
  - match: /a/b
    delegate: {name: v}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: v, namespace: a}
spec:
  routes:
  - match: /a/b/c
    services: [{name: missing, port: 80}]
",
    );
    assert_eq!(
        status(&d, Kind::IngressRouteV1beta1, "a", "v"),
        (
            State::Invalid,
            vec!["spec.routes[0].services[0]: Service \"a/missing\" not found".to_string()]
        )
    );
    assert_eq!(d.vhosts["twice.example.com"].routes.len(), 1);
}
