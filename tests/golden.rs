//! Golden tests for `dag::build`: every `tests/golden/dag/*.in.yaml` is built and its route table,
//! statuses and request resolutions are compared with `*.out.yaml`.
//!
//! An input may hold one document `kind: GoldenCase` with build options and requests to resolve:
//!
//! ```yaml
//! kind: GoldenCase
//! options: {rootNamespaces: [roots], ingressClassName: sluice}
//! requests:
//! - {host: foo.com, path: /aaa/bbb, headers: {x-header: a}}
//! ```
//!
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --test golden`, then review the diff.

mod golden_case;

use std::path::Path;

use golden_case::GoldenCase;

use serde::Serialize;
use sluice::dag::{self, lookup, table};
use sluice::manifest::{Document, parse_documents};
use sluice::store::Snapshot;

#[derive(Serialize)]
struct Resolution {
    request: String,
    /// `404`, or the matched route's match and backends.
    result: String,
}

#[derive(Serialize)]
struct Output {
    routes: Vec<table::TableHost>,
    statuses: Vec<table::TableStatus>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    requests: Vec<Resolution>,
}

fn run_case(input: &Path) -> String {
    let text = std::fs::read_to_string(input).unwrap();
    let (case, manifests) = GoldenCase::split(&text);
    let docs = parse_documents(&input.display().to_string(), &manifests).expect("input parses");
    let objects = docs.into_iter().map(|(src, d)| match d {
        Document::Object(o) => o,
        other => panic!("{src}: golden inputs hold only objects sluice reads, got {other:?}"),
    });
    let snapshot = Snapshot::from_objects(objects);
    let options = case.dag_options();
    let built = dag::build(&snapshot, &options);
    let requests = case
        .requests
        .iter()
        .map(|r| {
            let headers: Vec<(&str, &str)> = r
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let req = lookup::Request {
                host: &r.host,
                path: &r.path,
                headers: &headers,
            };
            let hdrs: Vec<String> = r
                .headers
                .iter()
                .map(|(k, v)| format!(" {k}: {v}"))
                .collect();
            let request = format!("{}{}{}", r.host, r.path, hdrs.join(""));
            let result = match lookup::lookup(&built, &req) {
                None => "404".to_string(),
                Some((vhost, route)) => {
                    let row = table::table_route(route, vhost.tls.is_some());
                    let hs = if row.headers.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", row.headers.join(", "))
                    };
                    format!(
                        "{} {}{} -> {}",
                        vhost.host,
                        row.match_,
                        hs,
                        row.backends.join(", ")
                    )
                }
            };
            Resolution { request, result }
        })
        .collect();
    let out = Output {
        routes: table::route_table(&built),
        statuses: table::status_table(&built),
        requests,
    };
    serde_norway::to_string(&out).unwrap()
}

#[test]
fn golden_dag() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/dag");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".in.yaml"))
        .collect();
    inputs.sort();
    let mut failures = Vec::new();
    for input in &inputs {
        let got = run_case(input);
        let out = input.to_string_lossy().replace(".in.yaml", ".out.yaml");
        if update {
            std::fs::write(&out, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&out).unwrap_or_default();
        if want != got {
            failures.push(format!("{out} differs:\n{}", diff(&want, &got)));
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden case(s) differ (UPDATE_GOLDEN=1 to regenerate):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn diff(want: &str, got: &str) -> String {
    let w: Vec<&str> = want.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let mut out = String::new();
    for i in 0..w.len().max(g.len()) {
        match (w.get(i), g.get(i)) {
            (Some(a), Some(b)) if a == b => {}
            (a, b) => {
                out.push_str(&format!(
                    "  line {}: want {:?}\n           got  {:?}\n",
                    i + 1,
                    a,
                    b
                ));
            }
        }
    }
    out
}
