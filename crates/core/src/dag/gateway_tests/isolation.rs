//! Listener isolation: a request is routed only by the routes of the most specific listener of a
//! Gateway whose hostname takes it (tests/golden/dag/gateway-listener-isolation.in.yaml checks
//! the requests, in the model and through a real Envoy).

use super::super::gwroute::taken_by_narrower_listener;
use super::*;

#[test]
fn a_host_a_narrower_listener_of_the_same_port_covers_is_not_served_through_a_wider_one() {
    let listeners = [
        (80, None),
        (80, Some("*.example.com".to_string())),
        (80, Some("*.foo.example.com".to_string())),
        (80, Some("abc.foo.example.com".to_string())),
        (8080, Some("only.example.com".to_string())),
    ];
    let taken = |listener: Option<&str>, host: &str| {
        taken_by_narrower_listener(&listeners, (80, listener), host)
    };
    // Through the listener without a hostname: every named listener is narrower.
    assert!(!taken(None, "*"));
    assert!(!taken(None, "bar.com"));
    assert!(taken(None, "a.example.com"));
    assert!(taken(None, "*.example.com"));
    assert!(taken(None, "*.a.foo.example.com"));
    // Through "*.example.com".
    assert!(!taken(Some("*.example.com"), "*.example.com"));
    assert!(!taken(Some("*.example.com"), "bar.example.com"));
    assert!(taken(Some("*.example.com"), "bar.foo.example.com"));
    assert!(taken(Some("*.example.com"), "*.foo.example.com"));
    assert!(taken(Some("*.example.com"), "abc.foo.example.com"));
    // A listener on another port, and the most specific listener itself, take nothing away.
    assert!(!taken(Some("*.example.com"), "only.example.com"));
    assert!(!taken(Some("abc.foo.example.com"), "abc.foo.example.com"));
}

#[test]
fn a_route_whose_hosts_all_belong_to_narrower_listeners_is_not_accepted_and_says_why() {
    let gw = &gateway_with(
        "  - {name: wide, protocol: HTTP, port: 80, hostname: '*.example.com'}
  - {name: narrow, protocol: HTTP, port: 80, hostname: shop.example.com}
",
    );
    let mut r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - backendRefs: [{name: web, port: 80}]\n",
    );
    r = r.replace(
        "parentRefs: [{name: edge, namespace: shop}]",
        "parentRefs: [{name: edge, namespace: shop, sectionName: wide}]",
    );
    let dag = dag_of(&[CLASS, gw, SERVICES, &r]);
    assert!(
        dag.vhosts.is_empty(),
        "{:?}",
        dag.vhosts.keys().collect::<Vec<_>>()
    );
    assert_parent_condition(
        &dag,
        ("shop", "store"),
        0,
        "Accepted=false/NoMatchingListenerHostname",
        &["belong to more specific listeners of Gateway shop/edge"],
    );

    // Through the listener that takes it, the route serves the host; a wildcard host a
    // listener's hostname takes is isolated from the catch-all host.
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - backendRefs: [{name: web, port: 80}]\n",
    );
    let wide = route(
        "shop",
        "wide",
        &[],
        "  - backendRefs: [{name: api, port: 8080}]\n",
    )
    .replace("hostnames: []", "hostnames: ['*.example.com']");
    let dag = dag_of(&[CLASS, gw, SERVICES, &r, &wide]);
    assert_eq!(
        forwards_to(&dag.vhosts["shop.example.com"].routes[0]),
        ["shop/web/80*1"]
    );
    assert!(dag.vhosts["*.example.com"].isolated);
}
