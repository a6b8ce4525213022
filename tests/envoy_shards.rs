//! Real Envoy fed by sluice standalone with its plain-HTTP hosts spread over route shards: the
//! listener's Lua filter must pick, for every request, the shard sluice put the request's host
//! in (the same hash in Lua and in Rust), whatever the host's case or port; wildcard and
//! catch-all hosts answer from every shard; a client cannot choose the shard; the backends
//! never see the shard's header; and hosts added later are served from their shard. With
//! `auto`, shards go on and off as hosts come and go, with no request answered wrongly.

mod envoy_support;

use envoy_support::backend::Backend;
use envoy_support::harness::{Harness, docs, ingressroute, services};
use sluice::cli::bootstrap::XdsProtocol;
use sluice::translate::{AutoRouteShards, ROUTE_SHARD_HEADER, RouteShards, shard_of};

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
        |o| o.route_shards = RouteShards::Fixed(SHARDS),
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

/// Requests `host(0)` until `done`, at most 20,000 times; returns how many answered, how many
/// failed to be sent (a kept-alive connection Envoy closed as it drained the listener it
/// replaced, which a client retries), and the wrong answers.
async fn steady_traffic(
    h: &Harness,
    done: &std::sync::atomic::AtomicBool,
) -> (usize, usize, Vec<String>) {
    let (mut answered, mut unsent, mut wrong) = (0, 0, Vec::new());
    for _ in 0..20_000 {
        if done.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        match h.get(&host(0), "/", &[]).await {
            got if got == "s/a" => answered += 1,
            got if got.starts_with("error: error sending request") => unsent += 1,
            got => wrong.push(got),
        }
    }
    (answered, unsent, wrong)
}

/// Shards on at 8 hosts, off below 5.
fn auto() -> RouteShards {
    RouteShards::Auto(AutoRouteShards {
        shards: 4,
        on_at_hosts: 8,
        off_below_hosts: 5,
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_route_shards_go_on_and_off_under_traffic() {
    for protocol in [XdsProtocol::Delta, XdsProtocol::Sotw] {
        let backends = [
            Backend::start("s/a").await,
            Backend::start("s/b").await,
            Backend::start("s/c").await,
        ];
        let refs: Vec<&Backend> = backends.iter().collect();
        let h = Harness::start_configured(
            &[
                ("svc.yaml", services("s", &refs)),
                ("routes.yaml", routes(0, 6)),
            ],
            protocol,
            |o| o.route_shards = auto(),
        )
        .await;
        h.expect(&host(5), "/", &[], "s/c").await;
        let scoped = || async { h.admin("/config_dump").await.contains(ROUTE_SHARD_HEADER) };
        assert!(
            !scoped().await,
            "{protocol:?}: 6 hosts, one route configuration"
        );
        let done = std::sync::atomic::AtomicBool::new(false);
        let switches = async {
            // On: 9 hosts, the new ones served, from their shards.
            h.write("more.yaml", &routes(6, 9));
            h.expect(&host(8), "/", &[], "s/c").await;
            assert!(scoped().await, "{protocol:?}: 9 hosts, shards");
            for i in 0..9 {
                assert_eq!(
                    h.get(&host(i), "/", &[]).await,
                    ["s/a", "s/b", "s/c"][i % 3]
                );
            }
            // Off: 4 hosts.
            h.write("more.yaml", "");
            h.write("routes.yaml", &routes(0, 4));
            h.expect(&host(5), "/", &[], "404").await;
            for _ in 0..50 {
                if !scoped().await {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            assert!(
                !scoped().await,
                "{protocol:?}: 4 hosts, one route configuration"
            );
            h.write("more.yaml", &routes(10, 11));
            h.expect(&host(10), "/", &[], "s/b").await;
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        };
        let ((answered, unsent, wrong), ()) = tokio::join!(steady_traffic(&h, &done), switches);
        assert_eq!(
            wrong,
            Vec::<String>::new(),
            "{protocol:?}: {answered} answered"
        );
        assert!(
            answered > 100 && unsent * 100 <= answered,
            "{protocol:?}: {answered} answered, {unsent} not sent"
        );
    }
}
