//! Seed 000's IngressRoute metrics and `sluice_routing_objects` as a scrape of standalone mode's
//! real `/metrics` endpoint reads them (no Envoy needed): exact values for a manifest directory,
//! then the series following the files as they change, with none left behind.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use sluice::app::standalone::{StandaloneConfig, run};

#[path = "envoy_support/ports.rs"]
mod ports;

use ports::free_port;

const SERVICES: &str = "
apiVersion: v1
kind: Service
metadata: {name: app, namespace: a}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: b}
spec: {ports: [{port: 80}]}
";

/// a/root (heptio.com, v1beta1) delegates / to b/wordpress, as in seed 000's example; b/web is a
/// v1 root of its own with a vertex b/api; b/lost is an orphan; a/bad breaks its own rules.
const ROUTES: &str = "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: heptio.com}
  routes:
  - {match: /, delegate: {name: wordpress, namespace: b}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: wordpress, namespace: b}
spec:
  routes:
  - {match: /, services: [{name: app, port: 80}]}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: web, namespace: b}
spec:
  virtualhost: {fqdn: web.example.com}
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
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: lost, namespace: b}
spec:
  routes:
  - {match: /lost, services: [{name: app, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: bad, namespace: a}
spec:
  routes:
  - {match: /bad}
";

const INGRESS: &str = "
apiVersion: v1
kind: Service
metadata: {name: app, namespace: c}
spec: {ports: [{port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: site, namespace: c}
spec:
  ingressClassName: sluice
  rules:
  - host: site.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}
";

/// The samples of the metric `name`, by their labels as written (`{namespace="a"}`; `""` for
/// none).
fn samples(text: &str, name: &str) -> BTreeMap<String, f64> {
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

async fn scrape(port: u16) -> String {
    match reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await {
        Ok(r) if r.status() == 200 => r.text().await.unwrap_or_default(),
        _ => String::new(),
    }
}

/// Scrapes every 50 ms until `check` holds of the text, or 30 s pass; returns the text.
async fn scrape_until(port: u16, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = scrape(port).await;
        if check(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; last scrape:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    // Written aside and renamed: the reload never reads half a file.
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

fn stamp(text: &str) -> Option<f64> {
    samples(text, "contour_ingressroute_dagrebuild_timestamp")
        .get("")
        .copied()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_serves_the_ingressroute_gauges_of_seed_000() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    write(&manifests, "services.yaml", SERVICES);
    write(&manifests, "routes.yaml", ROUTES);
    write(&manifests, "ingress.yaml", INGRESS);
    let metrics_port = free_port();
    let cfg = StandaloneConfig {
        manifests: manifests.clone(),
        xds_address: format!("127.0.0.1:{}", free_port()).parse().unwrap(),
        xds_tls: None,
        dag_options: Default::default(),
        translate_options: Default::default(),
        debounce: Duration::from_millis(50),
        webhook: None,
        metrics_address: Some(format!("127.0.0.1:{metrics_port}").parse().unwrap()),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let sluice = tokio::spawn(run(cfg, async move {
        let _ = stopped.await;
    }));

    let text = scrape_until(metrics_port, "the first build's gauges", |t| {
        t.contains("contour_ingressroute_total{")
    })
    .await;
    assert_eq!(
        samples(&text, "contour_ingressroute_total"),
        map(&[(r#"{namespace="a"}"#, 2.0), (r#"{namespace="b"}"#, 4.0)]),
        "{text}"
    );
    assert_eq!(
        samples(&text, "contour_ingressroute_orphaned_total"),
        map(&[(r#"{namespace="a"}"#, 0.0), (r#"{namespace="b"}"#, 1.0)])
    );
    assert_eq!(
        samples(&text, "contour_ingressroute_root_total"),
        map(&[(r#"{namespace="a"}"#, 1.0), (r#"{namespace="b"}"#, 1.0)])
    );
    assert_eq!(
        samples(&text, "contour_ingressroute_valid_total"),
        map(&[
            (r#"{namespace="a",vhost="heptio.com"}"#, 1.0),
            (r#"{namespace="b",vhost="heptio.com"}"#, 1.0),
            (r#"{namespace="b",vhost="web.example.com"}"#, 2.0),
        ])
    );
    assert_eq!(
        samples(&text, "contour_ingressroute_invalid_total"),
        map(&[(r#"{namespace="a",vhost=""}"#, 1.0),])
    );
    assert!(
        text.contains("# TYPE contour_ingressroute_total gauge"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE contour_ingressroute_dagrebuild_timestamp gauge"),
        "{text}"
    );
    let first = stamp(&text).expect("the rebuild timestamp");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(first <= now && first > now - 60.0, "{first} vs now {now}");
    let objects = samples(&text, "sluice_routing_objects");
    for (labels, want) in [
        (
            r#"{group="networking.k8s.io",kind="Ingress",namespace="c",status="valid"}"#,
            1.0,
        ),
        (
            r#"{group="contour.heptio.com",kind="IngressRoute",namespace="b",status="orphaned"}"#,
            1.0,
        ),
        (
            r#"{group="projectcontour.io",kind="IngressRoute",namespace="b",status="valid"}"#,
            2.0,
        ),
        (
            r#"{group="contour.heptio.com",kind="IngressRoute",namespace="a",status="invalid"}"#,
            1.0,
        ),
    ] {
        assert_eq!(objects.get(labels), Some(&want), "{labels}\n{text}");
    }

    // a/bad is fixed into a second vertex of heptio.com, b/lost goes, and namespace c's
    // Ingress goes with its file.
    let routes = ROUTES
        .replace(
            "  - {match: /, delegate: {name: wordpress, namespace: b}}\n",
            "  - {match: /, delegate: {name: wordpress, namespace: b}}\n  - {match: /bad, delegate: {name: bad}}\n",
        )
        .replace(
            "  - {match: /bad}\n",
            "  - {match: /bad, services: [{name: app, port: 80}]}\n",
        )
        .replace(
            "---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: lost, namespace: b}
spec:
  routes:
  - {match: /lost, services: [{name: app, port: 80}]}
",
            "",
        );
    assert!(!routes.contains("lost") && routes.contains("/bad, services"));
    write(&manifests, "routes.yaml", &routes);
    std::fs::remove_file(manifests.join("ingress.yaml")).unwrap();
    let text = scrape_until(metrics_port, "the changed files' gauges", |t| {
        !t.contains(r#"vhost="""#)
            && !t.contains(r#"namespace="c""#)
            && samples(t, "contour_ingressroute_total").get(r#"{namespace="b"}"#) == Some(&3.0)
    })
    .await;
    assert_eq!(
        samples(&text, "contour_ingressroute_total"),
        map(&[(r#"{namespace="a"}"#, 2.0), (r#"{namespace="b"}"#, 3.0)])
    );
    assert_eq!(
        samples(&text, "contour_ingressroute_orphaned_total"),
        map(&[(r#"{namespace="a"}"#, 0.0), (r#"{namespace="b"}"#, 0.0)])
    );
    assert_eq!(
        samples(&text, "contour_ingressroute_valid_total"),
        map(&[
            (r#"{namespace="a",vhost="heptio.com"}"#, 2.0),
            (r#"{namespace="b",vhost="heptio.com"}"#, 1.0),
            (r#"{namespace="b",vhost="web.example.com"}"#, 2.0),
        ])
    );
    assert_eq!(
        samples(&text, "contour_ingressroute_invalid_total"),
        map(&[]),
        "no invalid IngressRoute, no series"
    );
    assert!(!text.contains(r#"kind="Ingress""#), "{text}");
    let second = stamp(&text).unwrap();
    assert!(second > first, "{second} after {first}");

    // Every IngressRoute goes: no series of them is left.
    std::fs::remove_file(manifests.join("routes.yaml")).unwrap();
    let text = scrape_until(metrics_port, "no IngressRoute series", |t| {
        !t.contains("contour_ingressroute_total{")
    })
    .await;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(
            !line.starts_with("contour_ingressroute_")
                || line.starts_with("contour_ingressroute_dagrebuild_timestamp "),
            "{line}\n{text}"
        );
        assert!(
            !line.starts_with("sluice_routing_objects"),
            "{line}\n{text}"
        );
    }
    assert!(stamp(&text).unwrap() > second);

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(20), sluice)
        .await
        .expect("standalone stops")
        .unwrap()
        .unwrap();
}
