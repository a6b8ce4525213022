//! Differential test: for every golden routing case (tests/golden/dag/*.in.yaml) without TLS
//! Secrets, a real Envoy fed by sluice answers every request of the case exactly as the routing
//! model's reference matcher (`dag::lookup`) says: the same backend, 404 or 503. Each Service of
//! the case gets a loopback backend answering with its `namespace/name`.

mod envoy_support;
mod golden_case;

use std::path::Path;

use envoy_support::backend::Backend;
use envoy_support::harness::{Harness, slice};
use golden_case::{GoldenCase, GoldenRequest};
use sluice::cli::bootstrap::XdsProtocol;
use sluice::dag::{self, RouteAction, lookup};
use sluice::manifest::{Document, parse_documents};
use sluice::store::{AnyObject, Snapshot};
use sluice::translate::merge_slashes;

/// What the model says Envoy must answer; None when the answer is a weighted split or a redirect.
/// Envoy merges slashes in request paths before routing and sluice merges them in
/// ImplementationSpecific prefixes (see docs/xds.md); the model is asked the same question.
fn model_answer(dag: &dag::Dag, req: &GoldenRequest) -> Option<String> {
    let path = merge_slashes(&req.path);
    let headers: Vec<(&str, &str)> = req
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let r = lookup::Request {
        host: &req.host,
        path: &path,
        headers: &headers,
    };
    let Some((vhost, route)) = lookup::lookup(dag, &r) else {
        return Some("404".into());
    };
    if vhost.tls.is_some() && !route.permit_insecure {
        // The redirect names the host as the request did, without its port.
        let host = req.host.split(':').next().unwrap_or_default();
        return Some(format!("301 https://{host}{path}"));
    }
    backend_answer(dag, route)
}

/// The answer of a route that forwards (over HTTP with permitInsecure, or over HTTPS).
fn backend_answer(dag: &dag::Dag, route: &dag::Route) -> Option<String> {
    match &route.action {
        RouteAction::Unavailable(_) => Some("503".into()),
        RouteAction::Invalid(_) => Some("500".into()),
        // No golden case redirects (the Gateway API's redirects are tests/envoy_gateway_api_filters.rs's).
        RouteAction::Redirect(_) => None,
        RouteAction::Forward(cs) => {
            let live: Vec<_> = cs.iter().filter(|c| c.weight > 0).collect();
            match live.as_slice() {
                [one] => {
                    let (namespace, name) = dag.clusters[&one.cluster].service();
                    Some(sluice::api::ObjKey::new(namespace, name).to_string())
                }
                _ => None,
            }
        }
    }
}

struct Started {
    h: Harness,
    model: dag::Dag,
    case: GoldenCase,
    name: String,
    _backends: Vec<Backend>,
}

async fn start_case(path: &Path, protocol: XdsProtocol, shards: u16) -> Started {
    let text = std::fs::read_to_string(path).unwrap();
    let (case, manifests) = GoldenCase::split(&text);
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let mut backends = Vec::new();
    let mut slices = Vec::new();
    let mut objects = Vec::new();
    for (_, doc) in parse_documents(&name, &manifests).unwrap() {
        let Document::Object(obj) = doc else { continue };
        if let AnyObject::Service(svc) = &obj {
            let key = obj.key();
            let b = Backend::start(&key.to_string()).await;
            for p in svc.spec.iter().flat_map(|s| s.ports.iter().flatten()) {
                let pn = p.name.clone().unwrap_or_default();
                slices.push(slice(
                    &key.namespace,
                    &key.name,
                    &pn,
                    b.port,
                    &format!("p{}", p.port),
                ));
            }
            backends.push(b);
        }
        objects.push(obj);
    }
    for s in &slices {
        let (_, doc) = parse_documents("slice", s).unwrap().remove(0);
        if let Document::Object(o) = doc {
            objects.push(o);
        }
    }
    let options = case.dag_options();
    let mut model = dag::build(&Snapshot::from_objects(objects), &options);
    let hosts: Vec<String> = model.vhosts.keys().cloned().collect();
    for host in hosts {
        let v = model.vhosts.get_mut(&host).expect("listed above");
        for r in &mut std::sync::Arc::make_mut(v).routes {
            if let dag::PathMatch::StringPrefix(p) = &r.path {
                r.path = dag::PathMatch::StringPrefix(merge_slashes(p).into());
            }
        }
    }
    let h = Harness::start_with_configured(
        &[
            ("case.yaml", manifests.clone()),
            ("slices.yaml", slices.join("---\n")),
        ],
        protocol,
        options,
        |o| o.route_shards = sluice::translate::RouteShards::Fixed(shards),
    )
    .await;
    Started {
        h,
        model,
        case,
        name,
        _backends: backends,
    }
}

async fn check_case(path: &Path, protocol: XdsProtocol, shards: u16) -> usize {
    let Started {
        h,
        model,
        case,
        name,
        _backends,
    } = start_case(path, protocol, shards).await;
    let mut checked = 0;
    for req in &case.requests {
        let Some(want) = model_answer(&model, req) else {
            continue;
        };
        let headers: Vec<(&str, &str)> = req
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let got = {
            // The first request waits for the configuration; the others must already agree.
            if checked == 0 {
                h.expect(&req.host, &req.path, &headers, &want).await;
                want.clone()
            } else {
                h.get(&req.host, &req.path, &headers).await
            }
        };
        assert_eq!(
            got, want,
            "{name}: GET http://{}{} {:?}",
            req.host, req.path, req.headers
        );
        checked += 1;
        // TLS hosts: the same request over HTTPS (SNI = the host) reaches the route's backend.
        let lookup_req = lookup::Request {
            host: &req.host,
            path: &req.path,
            headers: &headers,
        };
        if let Some((vhost, route)) = lookup::lookup(&model, &lookup_req)
            && vhost.tls.is_some()
            && headers.is_empty()
            && let Some(want) = backend_answer(&model, route)
        {
            let sni = req
                .host
                .split(':')
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            h.expect_tls(&sni, &req.path, &want).await;
            checked += 1;
        }
    }
    eprintln!("{name}: {checked} requests agree with the model");
    checked
}

fn golden_inputs() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/dag");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".in.yaml"))
        .filter(|p| {
            let t = std::fs::read_to_string(p).unwrap();
            t.contains("kind: GoldenCase") && t.contains("requests:")
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_answers_every_golden_request_like_the_model() {
    every_golden_request(1).await;
}

/// The same with the plain-HTTP hosts spread over route shards (docs/xds.md, "Route shards"):
/// every answer is the one of a single route configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_answers_every_golden_request_like_the_model_with_route_shards() {
    every_golden_request(3).await;
}

async fn every_golden_request(shards: u16) {
    let files = golden_inputs();
    assert!(!files.is_empty(), "no golden cases found");
    let mut total = 0;
    for (i, f) in files.iter().enumerate() {
        // Alternate the xDS flavour so both serve real routing.
        let protocol = if (i + usize::from(shards)) % 2 == 0 {
            XdsProtocol::Sotw
        } else {
            XdsProtocol::Delta
        };
        total += check_case(f, protocol, shards).await;
    }
    assert!(total > 30, "only {total} requests checked");
}

/// Seed 001's path table, row by row, with the answers written out (not taken from the model).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_serves_every_row_of_the_seed_path_table() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/dag/ingress-path-table.in.yaml");
    let s = start_case(&path, XdsProtocol::Delta, 1).await;
    let rows: &[(&str, &str, &str)] = &[
        ("r01", "/", "paths/root"),
        ("r01", "/any/path", "paths/root"),
        ("r02", "/foo", "paths/exact"),
        ("r03", "/bar", "404"),
        ("r04", "/foo/", "404"),
        ("r05", "/foo", "404"),
        ("r06", "/foo", "paths/prefix"),
        ("r06", "/foo/", "paths/prefix"),
        ("r07", "/foo", "paths/prefix"),
        ("r07", "/foo/", "paths/prefix"),
        ("r08", "/aaa/bbb", "404"),
        ("r09", "/aaa/bbb", "paths/prefix"),
        ("r10", "/aaa/bbb", "paths/prefix"),
        ("r11", "/aaa/bbb/", "paths/prefix"),
        ("r12", "/aaa/bbb/ccc", "paths/prefix"),
        ("r13", "/aaa/bbbxyz", "404"),
        ("r14", "/aaa/ccc", "paths/aaa"),
        ("r15", "/aaa/bbb", "paths/aaabbb"),
        ("r16", "/ccc", "paths/root"),
        ("r17", "/ccc", "paths/fallback"),
        ("r18", "/foo", "paths/exact"),
        ("r18", "/foo/x", "paths/prefix"),
    ];
    s.h.expect("r01.example.com", "/", &[], "paths/root").await;
    for (row, p, want) in rows {
        let host = format!("{row}.example.com");
        assert_eq!(&s.h.get(&host, p, &[]).await, want, "row {row}: GET {p}");
        // The same with a port in Host and another case: same answer.
        let odd = format!("{}:8080", host.to_uppercase());
        assert_eq!(
            &s.h.get(&odd, p, &[]).await,
            want,
            "row {row}: Host {odd}, GET {p}"
        );
    }
}
