//! The routing objects' gauges: exact values for a known set of objects, the series following
//! changes through the pipeline's full and partial builds, the timestamp, the text format.

use std::collections::BTreeMap;

use super::*;
use crate::api::ObjectRef;
use crate::app::{Pipeline, PublishPath};
use crate::dag;
use crate::manifest::{Document, parse_documents};
use crate::translate;

/// Services `app` in namespaces `a` and `b`, and IngressRoutes of both versions in both:
///
/// | object | version | state | vhost |
/// |---|---|---|---|
/// | a/root1 (fqdn `Zeta.example.com`) | v1beta1 | valid root | zeta.example.com |
/// | a/shop (root1 delegates /shop) | v1beta1 | valid | zeta.example.com |
/// | a/bad (a/shop delegates /shop/x; its route is /elsewhere) | v1beta1 | invalid | zeta.example.com |
/// | a/shared (root1 and b/root3 delegate /shared) | v1beta1 | valid | zeta.example.com (a/root1 comes first) |
/// | a/orphan2 | v1 | orphaned | |
/// | b/blog (root1 delegates /blog) | v1beta1 | valid | zeta.example.com |
/// | b/lost | v1beta1 | orphaned | |
/// | b/dup (fqdn `zeta.example.com`, a/root1 owns it) | v1beta1 | invalid root | zeta.example.com |
/// | b/broken (a route of neither services nor delegate) | v1beta1 | invalid | "" |
/// | b/root3 (fqdn `alpha.example.com`) | v1beta1 | valid root | alpha.example.com |
/// | b/root2 (fqdn `two.example.com`) | v1 | valid root | two.example.com |
/// | b/api (b/root2 delegates /api) | v1 | valid | two.example.com |
///
/// Plus an Ingress in `a`, GatewayClasses of sluice's and of another controller, and a Gateway of
/// the other's class in `b` with an HTTPRoute.
const OBJECTS: &str = "
apiVersion: v1
kind: Service
metadata: {name: app, namespace: a}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: b}
spec: {ports: [{port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root1, namespace: a}
spec:
  virtualhost: {fqdn: Zeta.example.com}
  routes:
  - {match: /, services: [{name: app, port: 80}]}
  - {match: /blog, delegate: {name: blog, namespace: b}}
  - {match: /shop, delegate: {name: shop}}
  - {match: /shared, delegate: {name: shared}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: shop, namespace: a}
spec:
  routes:
  - {match: /shop, services: [{name: app, port: 80}]}
  - {match: /shop/x, delegate: {name: bad}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: bad, namespace: a}
spec:
  routes:
  - {match: /elsewhere, services: [{name: app, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: shared, namespace: a}
spec:
  routes:
  - {match: /shared, services: [{name: app, port: 80}]}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: orphan2, namespace: a}
spec:
  routes:
  - {match: {path: /o}, backends: [{http: app, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: blog, namespace: b}
spec:
  routes:
  - {match: /blog, services: [{name: app, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: lost, namespace: b}
spec:
  routes:
  - {match: /lost, services: [{name: app, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: dup, namespace: b}
spec:
  virtualhost: {fqdn: zeta.example.com}
  routes:
  - {match: /, services: [{name: app, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: broken, namespace: b}
spec:
  routes:
  - {match: /broken}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root3, namespace: b}
spec:
  virtualhost: {fqdn: alpha.example.com}
  routes:
  - {match: /, services: [{name: app, port: 80}]}
  - {match: /shared, delegate: {name: shared, namespace: a}}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: root2, namespace: b}
spec:
  virtualhost: {fqdn: two.example.com}
  routes:
  - {match: {path: /}, backends: [{http: app, port: 80}]}
  - {match: {path: /api}, delegate: {name: api}}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: api, namespace: b}
spec:
  routes:
  - {match: {path: /api}, backends: [{http: app, port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: a}
spec:
  ingressClassName: sluice
  rules:
  - host: web.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: not-ours, namespace: b}
spec:
  gatewayClassName: other
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: elsewhere, namespace: b}
spec:
  parentRefs: [{name: not-ours}]
  rules:
  - backendRefs: [{name: app, port: 80}]
";

/// The objects of a YAML stream.
fn objects(yaml: &str) -> Vec<crate::store::AnyObject> {
    parse_documents("test.yaml", yaml)
        .expect("test input parses")
        .into_iter()
        .filter_map(|(_, d)| match d {
            Document::Object(o) => Some(o),
            _ => None,
        })
        .collect()
}

/// A pipeline with its metrics in a registry, and the text a scrape reads.
struct Scraped {
    pipeline: Pipeline,
    registry: prometheus_client::registry::Registry,
}

impl Scraped {
    fn new() -> Scraped {
        let pipeline = Pipeline::new(dag::Options::default(), translate::Options::default());
        let mut registry = prometheus_client::registry::Registry::default();
        pipeline.register_metrics(&mut registry);
        Scraped { pipeline, registry }
    }

    fn text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }

    /// The samples of the metric `name`, by their labels as written (`{namespace="a"}`).
    fn samples(&self, name: &str) -> BTreeMap<String, f64> {
        samples(&self.text(), name)
    }
}

/// The samples of the metric `name` in a text exposition, by their labels as written.
pub(crate) fn samples(text: &str, name: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = rest.rsplit_once(' ')?;
            if !(labels.is_empty() || labels.starts_with('{')) {
                return None;
            }
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn map(entries: &[(&str, f64)]) -> BTreeMap<String, f64> {
    entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn state(dag: &Dag, kind: Kind, ns: &str, name: &str) -> State {
    dag.statuses[&ObjectRef::new(kind, ns, name)].state
}

#[test]
fn the_gauges_count_the_statuses_of_the_build() {
    let m = Scraped::new();
    let snapshot = Snapshot::from_objects(objects(OBJECTS));
    let dag = m.pipeline.publish(&snapshot);
    // The states the table of OBJECTS says (the gauges below count these).
    use Kind::{IngressRouteV1 as V1, IngressRouteV1beta1 as V1beta1};
    for (kind, ns, name, want) in [
        (V1beta1, "a", "root1", State::Valid),
        (V1beta1, "a", "shop", State::Valid),
        (V1beta1, "a", "bad", State::Invalid),
        (V1beta1, "a", "shared", State::Valid),
        (V1, "a", "orphan2", State::Orphaned),
        (V1beta1, "b", "blog", State::Valid),
        (V1beta1, "b", "lost", State::Orphaned),
        (V1beta1, "b", "dup", State::Invalid),
        (V1beta1, "b", "broken", State::Invalid),
        (V1beta1, "b", "root3", State::Valid),
        (V1, "b", "root2", State::Valid),
        (V1, "b", "api", State::Valid),
        (Kind::Ingress, "a", "web", State::Valid),
        (Kind::GatewayClass, "", "sluice", State::Valid),
        (Kind::GatewayClass, "", "other", State::Ignored),
        (Kind::Gateway, "b", "not-ours", State::Ignored),
        (Kind::HttpRoute, "b", "elsewhere", State::Ignored),
    ] {
        assert_eq!(state(&dag, kind, ns, name), want, "{kind:?} {ns}/{name}");
    }
    assert_eq!(
        dag.statuses[&ObjectRef::new(V1beta1, "a", "shared")].description,
        "delegated from IngressRoute a/root1"
    );

    assert_eq!(
        m.samples("contour_ingressroute_total"),
        map(&[(r#"{namespace="a"}"#, 5.0), (r#"{namespace="b"}"#, 7.0)])
    );
    assert_eq!(
        m.samples("contour_ingressroute_orphaned_total"),
        map(&[(r#"{namespace="a"}"#, 1.0), (r#"{namespace="b"}"#, 1.0)])
    );
    assert_eq!(
        m.samples("contour_ingressroute_root_total"),
        map(&[(r#"{namespace="a"}"#, 1.0), (r#"{namespace="b"}"#, 3.0)])
    );
    assert_eq!(
        m.samples("contour_ingressroute_valid_total"),
        map(&[
            (r#"{namespace="a",vhost="zeta.example.com"}"#, 3.0),
            (r#"{namespace="b",vhost="alpha.example.com"}"#, 1.0),
            (r#"{namespace="b",vhost="two.example.com"}"#, 2.0),
            (r#"{namespace="b",vhost="zeta.example.com"}"#, 1.0),
        ])
    );
    assert_eq!(
        m.samples("contour_ingressroute_invalid_total"),
        map(&[
            (r#"{namespace="a",vhost="zeta.example.com"}"#, 1.0),
            (r#"{namespace="b",vhost=""}"#, 1.0),
            (r#"{namespace="b",vhost="zeta.example.com"}"#, 1.0),
        ])
    );
    assert_totals_add_up(&m.text());

    let objects = m.samples("sluice_routing_objects");
    let of = |group: &str, kind: &str, ns: &str, status: &str| {
        let labels =
            format!(r#"{{group="{group}",kind="{kind}",namespace="{ns}",status="{status}"}}"#);
        objects.get(&labels).copied()
    };
    let heptio = "contour.heptio.com";
    let contour = "projectcontour.io";
    let gateway = "gateway.networking.k8s.io";
    let ingress = "networking.k8s.io";
    for (group, kind, ns, status, want) in [
        (ingress, "Ingress", "a", "valid", 1.0),
        (ingress, "Ingress", "a", "invalid", 0.0),
        (ingress, "Ingress", "a", "orphaned", 0.0),
        (ingress, "Ingress", "a", "ignored", 0.0),
        (heptio, "IngressRoute", "a", "valid", 3.0),
        (heptio, "IngressRoute", "a", "invalid", 1.0),
        (heptio, "IngressRoute", "a", "orphaned", 0.0),
        (contour, "IngressRoute", "a", "orphaned", 1.0),
        (contour, "IngressRoute", "a", "valid", 0.0),
        (heptio, "IngressRoute", "b", "valid", 2.0),
        (heptio, "IngressRoute", "b", "invalid", 2.0),
        (heptio, "IngressRoute", "b", "orphaned", 1.0),
        (contour, "IngressRoute", "b", "valid", 2.0),
        (gateway, "HTTPRoute", "b", "ignored", 1.0),
        (gateway, "HTTPRoute", "b", "valid", 0.0),
        (gateway, "Gateway", "b", "ignored", 1.0),
        (gateway, "GatewayClass", "", "valid", 1.0),
        (gateway, "GatewayClass", "", "ignored", 1.0),
        (gateway, "GatewayClass", "", "invalid", 0.0),
    ] {
        assert_eq!(
            of(group, kind, ns, status),
            Some(want),
            "{group} {kind} {ns} {status}"
        );
    }
    // Four statuses for each kind and namespace that has objects, none for the others.
    assert_eq!(objects.len(), 4 * 8, "{objects:#?}");
    assert_eq!(of(contour, "IngressRoute", "c", "valid"), None);
    assert_eq!(of(ingress, "Ingress", "b", "valid"), None);
}

/// `contour_ingressroute_total` is orphaned + valid + invalid in every namespace, and every
/// namespace of one is in the others.
fn assert_totals_add_up(text: &str) {
    let total = samples(text, "contour_ingressroute_total");
    let mut sum: BTreeMap<String, f64> = samples(text, "contour_ingressroute_orphaned_total");
    for name in [
        "contour_ingressroute_valid_total",
        "contour_ingressroute_invalid_total",
    ] {
        for (labels, v) in samples(text, name) {
            // {namespace="a",vhost="…"} → {namespace="a"}
            let ns = labels.split(',').next().unwrap().to_string() + "}";
            *sum.entry(ns).or_default() += v;
        }
    }
    assert_eq!(total, sum, "{text}");
}

#[test]
fn series_follow_changes_through_partial_builds_and_none_goes_stale() {
    let m = Scraped::new();
    let mut s = Snapshot::from_objects(objects(OBJECTS));
    assert_eq!(m.pipeline.publish_counted(&s).1, PublishPath::Full);
    let text = m.text();
    assert!(text.contains(r#"contour_ingressroute_invalid_total{namespace="b",vhost=""} 1"#));

    // b/broken goes: its series ({namespace="b",vhost=""}, only it had one) goes with it.
    let v1beta1 = Kind::IngressRouteV1beta1;
    assert!(s.remove(v1beta1, &ObjKey::new("b", "broken")));
    let (_, path) = m.pipeline.publish_counted(&s);
    assert!(matches!(path, PublishPath::Partial { .. }), "{path:?}");
    let text = m.text();
    assert!(!text.contains(r#"vhost="""#), "{text}");
    assert_eq!(
        samples(&text, "contour_ingressroute_total")[r#"{namespace="b"}"#],
        6.0
    );
    assert_totals_add_up(&text);

    // a/bad keeps to the space delegated to it: valid, delegated from a/root1.
    for o in objects(
        "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: bad, namespace: a}
spec:
  routes:
  - {match: /shop/x, services: [{name: app, port: 80}]}
",
    ) {
        s.insert(o);
    }
    let (dag, path) = m.pipeline.publish_counted(&s);
    assert!(matches!(path, PublishPath::Partial { .. }), "{path:?}");
    assert_eq!(state(&dag, v1beta1, "a", "bad"), State::Valid);
    let text = m.text();
    let zeta_a = r#"{namespace="a",vhost="zeta.example.com"}"#;
    assert_eq!(
        samples(&text, "contour_ingressroute_valid_total")[zeta_a],
        4.0
    );
    // No invalid one is left there: no series of zero.
    assert!(
        !samples(&text, "contour_ingressroute_invalid_total").contains_key(zeta_a),
        "{text}"
    );
    assert_totals_add_up(&text);

    // Namespace b empties of IngressRoutes: no contour_* series names it; the HTTPRoute there
    // keeps its own.
    let keys: Vec<_> = s.ingressroutes_v1beta1.keys().cloned().collect();
    for k in keys.iter().filter(|k| &*k.namespace == "b") {
        s.remove(v1beta1, k);
    }
    for name in ["root2", "api"] {
        s.remove(Kind::IngressRouteV1, &ObjKey::new("b", name));
    }
    let (dag, _) = m.pipeline.publish_counted(&s);
    let text = m.text();
    for line in text.lines().filter(|l| l.starts_with("contour_")) {
        assert!(!line.contains(r#"namespace="b""#), "{line}\n{text}");
    }
    assert!(
        !text.contains(r#"kind="IngressRoute",namespace="b""#),
        "{text}"
    );
    assert!(
        text.contains(r#"kind="HTTPRoute",namespace="b",status="ignored"} 1"#),
        "{text}"
    );
    // a/root1 delegates to b/blog, gone: it is invalid (still serving its host, and counted
    // under it); a/shared is reached from a/root1 alone.
    assert_eq!(state(&dag, v1beta1, "a", "root1"), State::Invalid);
    assert_eq!(state(&dag, v1beta1, "a", "shared"), State::Valid);
    assert_eq!(
        samples(&text, "contour_ingressroute_total"),
        map(&[(r#"{namespace="a"}"#, 5.0)])
    );
    assert_eq!(
        samples(&text, "contour_ingressroute_valid_total"),
        map(&[(zeta_a, 3.0)])
    );
    assert_eq!(
        samples(&text, "contour_ingressroute_invalid_total"),
        map(&[(zeta_a, 1.0)])
    );
    assert_totals_add_up(&text);
    // The partial builds' counts are a full build's.
    let full = dag::build(&s, &dag::Options::default());
    assert_eq!(
        Counts::of(&dag, &s.ingressroutes_v1beta1, &s.ingressroutes_v1),
        Counts::of(&full, &s.ingressroutes_v1beta1, &s.ingressroutes_v1),
    );

    // Everything goes: no IngressRoute series at all.
    let m2 = Scraped::new();
    m2.pipeline.publish(&s);
    m2.pipeline.publish(&Snapshot::default());
    let text = m2.text();
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("contour_ingressroute_total")
                || l.starts_with("sluice_routing_objects")),
        "{text}"
    );
}

#[test]
fn the_rebuild_timestamp_moves_with_each_rebuild_only() {
    let m = Scraped::new();
    let stamp = |m: &Scraped| {
        m.samples("contour_ingressroute_dagrebuild_timestamp")
            .get("")
            .copied()
    };
    assert_eq!(stamp(&m), None, "no build yet");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let mut s = crate::synth::snapshot(crate::synth::Shape {
        routing_objects: 20,
        endpoints_per_service: 2,
        unrelated_secrets: 0,
    });
    m.pipeline.publish(&s);
    let first = stamp(&m).expect("a timestamp after the first build");
    assert!(first >= before && first < before + 60.0, "{first} {before}");
    // A scrape does not move it.
    assert_eq!(stamp(&m), Some(first));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let key = s.ingressroutes_v1beta1.keys().next().unwrap().clone();
    s.remove(Kind::IngressRouteV1beta1, &key);
    assert!(matches!(
        m.pipeline.publish_counted(&s).1,
        PublishPath::Partial { .. }
    ));
    let second = stamp(&m).unwrap();
    assert!(second > first, "{second} after {first}");
    // An endpoint-only change does not build the model again.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let slice = s.endpoint_slices().keys().next().unwrap().clone();
    s.remove(Kind::EndpointSlice, &slice);
    assert_eq!(m.pipeline.publish_counted(&s).1, PublishPath::Endpoints);
    assert_eq!(stamp(&m), Some(second));
}

#[test]
fn counts_of_a_build_are_made_once_and_match_a_full_build_after_random_changes() {
    let metrics = ObjectMetrics::default();
    let p = Pipeline::new(dag::Options::default(), translate::Options::default());
    let mut s = crate::synth::snapshot(crate::synth::Shape {
        routing_objects: 300,
        endpoints_per_service: 1,
        unrelated_secrets: 0,
    });
    let mut rng = sluice_core::test_rng::Rng::new(7);
    for round in 0..20 {
        let dag = p.publish(&s);
        drop(metrics.rebuilt(&dag, &s));
        let (first, _) = metrics.counts();
        let (again, _) = metrics.counts();
        assert!(Arc::ptr_eq(
            first.as_ref().unwrap(),
            again.as_ref().unwrap()
        ));
        let full = dag::build(&s, &dag::Options::default());
        let counts = Counts::of(&full, &s.ingressroutes_v1beta1, &s.ingressroutes_v1);
        assert_eq!(*first.unwrap(), counts, "round {round}");
        // Take out a few IngressRoutes (roots orphan their vertices).
        for _ in 0..3 {
            let n = s.ingressroutes_v1beta1.len();
            if n == 0 {
                break;
            }
            let key = s
                .ingressroutes_v1beta1
                .keys()
                .nth(rng.below(n))
                .unwrap()
                .clone();
            s.remove(Kind::IngressRouteV1beta1, &key);
        }
    }
}

#[test]
fn label_values_are_escaped() {
    let m = Scraped::new();
    let snapshot = Snapshot::from_objects(objects(
        r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: odd, namespace: a}
spec:
  virtualhost: {fqdn: "x\"y\\z"}
  routes:
  - {match: /, services: [{name: app, port: 80}]}
"#,
    ));
    let dag = m.pipeline.publish(&snapshot);
    assert_eq!(
        state(&dag, Kind::IngressRouteV1beta1, "a", "odd"),
        State::Invalid
    );
    let text = m.text();
    assert!(
        text.contains(r#"contour_ingressroute_invalid_total{namespace="a",vhost="x\"y\\z"} 1"#),
        "{text}"
    );
}
