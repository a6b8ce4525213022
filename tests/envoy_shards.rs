//! Real Envoy fed by sluice standalone with its plain-HTTP hosts spread over route shards: the
//! listener's Lua filter must pick, for every request, the shard sluice put the request's host
//! in (the same hash in Lua and in Rust), whatever the host's case or port; wildcard and
//! catch-all hosts answer from every shard; a client cannot choose the shard; the backends
//! never see the shard's header; and hosts added later are served from their shard.

mod envoy_support;

use envoy_support::backend::Backend;
use envoy_support::harness::{Harness, docs, ingressroute, services};
use sluice::cli::bootstrap::XdsProtocol;
use sluice::translate::{ROUTE_SHARD_HEADER, shard_of};

const SHARDS: u16 = 5;
const HOSTS: usize = 24;

fn host(i: usize) -> String {
    format!("app-{i}.shards.example.com")
}

fn routes(first: usize, last: usize) -> String {
    let mut parts = Vec::new();
    for i in first..last {
        let backend = ["a", "b", "c"][i % 3];
        let route = format!("  - match: /\n    services: [{{name: {backend}, port: 80}}]\n");
        parts.push(ingressroute("s", &format!("app-{i}"), &host(i), &route));
    }
    docs(&parts)
}

fn ingress(name: &str, host: Option<&str>, backend: &str) -> String {
    let host = host.map_or(String::new(), |h| format!("host: \"{h}\"\n    "));
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: s}}\nspec:\n  ingressClassName: sluice\n  rules:\n  - {host}http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: {backend}, port: {{number: 80}}}}}}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_routed_by_the_shard_of_its_host() {
    let backends = [
        Backend::start("s/a").await,
        Backend::start("s/b").await,
        Backend::start("s/c").await,
        Backend::start("s/wild").await,
        Backend::start("s/rest").await,
    ];
    let shards: std::collections::BTreeSet<usize> =
        (0..HOSTS).map(|i| shard_of(&host(i), SHARDS)).collect();
    assert_eq!(
        shards.len(),
        usize::from(SHARDS),
        "the hosts fall in every shard"
    );
    let others = docs(&[
        ingress("wild", Some("*.wild.example.com"), "wild"),
        ingress("rest", None, "rest"),
    ]);
    let refs: Vec<&Backend> = backends.iter().collect();
    let h = Harness::start_configured(
        &[
            ("svc.yaml", services("s", &refs)),
            ("routes.yaml", routes(0, HOSTS)),
            ("others.yaml", others),
        ],
        XdsProtocol::Delta,
        |o| o.http_route_shards = SHARDS,
    )
    .await;
    h.expect(&host(0), "/", &[], "s/a").await;
    for i in 0..HOSTS {
        let want = ["s/a", "s/b", "s/c"][i % 3];
        let name = host(i);
        assert_eq!(h.get(&name, "/", &[]).await, want, "{name}");
        assert_eq!(
            h.get(&name.to_uppercase(), "/", &[]).await,
            want,
            "{name} in upper case"
        );
        assert_eq!(
            h.get(&format!("{name}:8080"), "/x", &[]).await,
            want,
            "{name}:8080"
        );
        // A shard the client names is not the one that routes.
        let wrong = ((shard_of(&name, SHARDS) + 1) % usize::from(SHARDS)).to_string();
        let asked = [(ROUTE_SHARD_HEADER, wrong.as_str())];
        assert_eq!(
            h.get(&name, "/", &asked).await,
            want,
            "{name} asking for {wrong}"
        );
    }
    for b in &backends[..3] {
        assert!(b.hits() > 0);
        assert_eq!(
            b.last_header(ROUTE_SHARD_HEADER),
            Vec::<String>::new(),
            "{}",
            b.name
        );
    }
    // Wildcard and catch-all hosts, from requests of every shard.
    for i in 0..20 {
        let wild = format!("w{i}.wild.example.com");
        assert_eq!(h.get(&wild, "/", &[]).await, "s/wild", "{wild}");
        let other = format!("n{i}.elsewhere.example.org");
        assert_eq!(h.get(&other, "/", &[]).await, "s/rest", "{other}");
    }
    assert_eq!(h.get("", "/", &[]).await, "s/rest", "no host at all");
    // Hosts added later are served from their shard.
    h.write("more.yaml", &routes(HOSTS, HOSTS + 6));
    for i in HOSTS..HOSTS + 6 {
        h.expect(&host(i), "/", &[], ["s/a", "s/b", "s/c"][i % 3])
            .await;
    }
}
