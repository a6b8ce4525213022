//! HTTPS listeners: TLS terminated with the listener's Secret, and only the host names
//! the listener names served on it.

use super::*;

#[test]
fn https_listeners_terminate_tls_with_their_secret() {
    let gw = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: shop}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: https, protocol: HTTPS, port: 443, hostname: secure.example.com, tls: {certificateRefs: [{name: shop-tls}]}}
  - {name: plain, protocol: HTTP, port: 80, hostname: both.example.com}
  - {name: both, protocol: HTTPS, port: 443, hostname: both.example.com, tls: {certificateRefs: [{name: shop-tls}]}}
  - {name: nocert, protocol: HTTPS, port: 443, hostname: none.example.com, tls: {certificateRefs: [{name: missing}]}}
  - {name: udp, protocol: UDP, port: 9000}
";
    let secure = route("shop", "secure", &["secure.example.com"], TO_WEB);
    let both = route("shop", "both", &["both.example.com"], TO_WEB);
    let mut snap = snapshot(&[CLASS, gw, SERVICES, &secure, &both]);
    snap.insert(AnyObject::Secret(Arc::new(crate::synth::tls_secret(
        "shop", "shop-tls",
    ))));
    let dag = build(&snap, &Options::default());

    let v = &dag.vhosts["secure.example.com"];
    assert_eq!(
        v.tls.as_ref().map(|t| t.secret.as_str()),
        Some("shop/shop-tls")
    );
    assert!(
        !v.routes[0].permit_insecure,
        "an HTTPS-only host redirects plain HTTP"
    );
    let v = &dag.vhosts["both.example.com"];
    assert!(v.tls.is_some());
    assert!(
        v.routes[0].permit_insecure,
        "a host of an HTTP listener too is served over HTTP"
    );

    let g = status(&dag, Kind::Gateway, "shop", "edge")
        .gateway
        .clone()
        .unwrap();
    assert_eq!(
        conds(&g.conditions),
        [
            "Accepted=true/ListenersNotValid",
            "Programmed=true/Programmed"
        ]
    );
    let by_name = |n: &str| g.listeners.iter().find(|l| l.name == n).unwrap().clone();
    assert_eq!(by_name("https").attached_routes, 1);
    assert_eq!(by_name("both").attached_routes, 1);
    assert_eq!(by_name("plain").attached_routes, 1);
    let nocert = by_name("nocert");
    assert_eq!(
        conds(&nocert.conditions)[2],
        "ResolvedRefs=false/InvalidCertificateRef"
    );
    assert!(
        nocert.conditions[2]
            .message
            .contains("TLS Secret \"shop/missing\" not found")
    );
    let udp = by_name("udp");
    assert_eq!(
        conds(&udp.conditions)[0],
        "Accepted=false/UnsupportedProtocol"
    );
    assert!(
        udp.conditions[0]
            .message
            .contains("sluice serves HTTP, HTTPS, TLS and TCP listeners, not \"UDP\""),
        "{udp:?}"
    );
}

#[test]
fn an_https_listener_serves_named_hosts_only() {
    let gw = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: shop}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: shop-tls}]}}
";
    let anywhere = route("shop", "anywhere", &[], TO_WEB);
    let named = route("shop", "named", &["a.example.com"], TO_WEB);
    let mut snap = snapshot(&[CLASS, gw, SERVICES, &anywhere, &named]);
    snap.insert(AnyObject::Secret(Arc::new(crate::synth::tls_secret(
        "shop", "shop-tls",
    ))));
    let dag = build(&snap, &Options::default());
    assert!(!dag.vhosts.contains_key("*"));
    assert!(dag.vhosts["a.example.com"].tls.is_some());
    let p = route_parent(&dag, "shop", "anywhere");
    assert_eq!(
        conds(&p.conditions)[0],
        "Accepted=false/NoMatchingListenerHostname"
    );
    assert!(
        p.conditions[0].message.contains("serves named hosts only"),
        "{:?}",
        p.conditions[0]
    );
}
