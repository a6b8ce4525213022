//! Gateways with addresses of their own (`--gateway-addresses`): each Gateway's routes are
//! served at its address only, two Gateways do not compete for a hostname, and a Gateway that
//! cannot have an address says why.

use super::*;

/// A Gateway `ns/name` of sluice's class with an HTTP listener on port 80 taking routes of its
/// namespace, created at `created` (seconds into 2026).
fn team_gateway(ns: &str, name: &str, created: u32, extra_spec: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: {ns}, generation: 1, creationTimestamp: \"2026-01-01T00:00:{created:02}Z\"}}
spec:
  gatewayClassName: sluice
{extra_spec}  listeners:
  - {{name: http, protocol: HTTP, port: 80}}
"
    )
}

/// An HTTPRoute `ns/name` on Gateway `ns/gateway` for app.example.com to Service `service`.
fn team_route(ns: &str, name: &str, gateway: &str, service: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {ns}, generation: 1}}
spec:
  parentRefs: [{{name: {gateway}}}]
  hostnames: [app.example.com]
  rules:
  - backendRefs: [{{name: {service}, port: 80}}]
---
apiVersion: v1
kind: Service
metadata: {{name: {service}, namespace: {ns}}}
spec: {{ports: [{{port: 80}}]}}
"
    )
}

fn own_addresses(pool: &str) -> Options {
    Options {
        gateway_addresses: Some(pool.parse().unwrap()),
        ..Options::default()
    }
}

fn entry<'d>(dag: &'d Dag, ns: &str, name: &str, port: u16) -> &'d Entry {
    let key = EntryKey {
        gateway: crate::api::ObjKey::new(ns, name),
        port,
    };
    dag.entries
        .get(&key)
        .unwrap_or_else(|| panic!("no entry {}: {:?}", key.name(), dag.entries))
}

fn gateway_status(dag: &Dag, ns: &str, name: &str) -> GatewayApiStatus {
    let s = status(dag, Kind::Gateway, ns, name);
    (**s.gateway.as_ref().expect("a Gateway API status")).clone()
}

#[test]
fn two_gateways_serve_the_same_hostname_each_with_its_own_routes_at_its_own_address() {
    let docs = [
        CLASS.to_string(),
        team_gateway("team-a", "ga", 1, ""),
        team_gateway("team-b", "gb", 2, ""),
        team_route("team-a", "ra", "ga", "a"),
        team_route("team-b", "rb", "gb", "b"),
    ];
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let dag = build(&snapshot(&docs), &own_addresses("127.0.1.0/24"));

    assert!(dag.vhosts.is_empty(), "nothing on Envoy's shared listeners");
    let mut seen = Vec::new();
    for (ns, gw, route, cluster) in [
        ("team-a", "ga", "ra", "team-a/a/80"),
        ("team-b", "gb", "rb", "team-b/b/80"),
    ] {
        let s = gateway_status(&dag, ns, gw);
        let [ip] = s.addresses[..] else {
            panic!("one address: {s:?}")
        };
        assert!(ip.to_string().starts_with("127.0.1."), "{ip}");
        seen.push(ip);
        let e = entry(&dag, ns, gw, 80);
        assert_eq!(e.address, ip);
        assert_eq!(e.protocol, EntryProtocol::Http);
        let v = &e.vhosts["app.example.com"];
        assert_eq!(forwards_to(&v.routes[0]), [format!("{cluster}*1")]);
        let parent = route_parent(&dag, ns, route);
        assert_eq!(conds(&parent.conditions)[0], "Accepted=true/Accepted");
        assert_eq!(
            conds(&s.conditions),
            ["Accepted=true/Accepted", "Programmed=true/Programmed"]
        );
        let listener = &s.listeners[0].conditions[1];
        assert_eq!(listener.message, format!("Envoy listens on {ip}:80 for it"));
    }
    assert_ne!(seen[0], seen[1], "each Gateway its own address");

    // Without a pool both share Envoy's one listener, and the younger route loses the host.
    let dag = build(&snapshot(&docs), &Options::default());
    assert!(dag.entries.is_empty());
    let parent = route_parent(&dag, "team-b", "rb");
    assert!(
        parent.conditions[0]
            .message
            .contains("already defined by HTTPRoute team-a/ra"),
        "{parent:?}"
    );
}

#[test]
fn an_address_asked_for_is_honoured_or_refused_with_the_reason() {
    let kept = team_gateway("team-a", "ga", 3, "  addresses: []\n");
    let asked = team_gateway(
        "team-b",
        "gb",
        1,
        "  addresses: [{type: IPAddress, value: 127.0.1.9}]\n",
    );
    let outside = team_gateway(
        "team-c",
        "gc",
        2,
        "  addresses: [{type: IPAddress, value: 198.51.100.1}]\n",
    );
    let fake = team_gateway(
        "team-d",
        "gd",
        4,
        "  addresses: [{type: test/fake-invalid-type, value: x}]\n",
    );
    let docs = [CLASS, &kept, &asked, &outside, &fake];
    let dag = build(&snapshot(&docs), &own_addresses("127.0.1.0/24"));
    let ip = |ns, name| gateway_status(&dag, ns, name).addresses;
    let dealt = ip("team-a", "ga");
    assert!(
        dealt.len() == 1 && dealt[0].to_string() != "127.0.1.9",
        "{dealt:?}"
    );
    assert_eq!(
        ip("team-b", "gb"),
        ["127.0.1.9".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(
        entry(&dag, "team-b", "gb", 80).address.to_string(),
        "127.0.1.9"
    );

    let c = gateway_status(&dag, "team-c", "gc");
    assert!(c.addresses.is_empty());
    assert_eq!(
        conds(&c.conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=false/AddressNotUsable"
        ]
    );
    assert!(
        c.conditions[1]
            .message
            .contains("198.51.100.1 is not in sluice's Gateway address pool")
    );
    let d = gateway_status(&dag, "team-d", "gd");
    assert_eq!(
        conds(&d.conditions),
        [
            "Accepted=false/UnsupportedAddress",
            "Programmed=false/Invalid"
        ]
    );
    let no_entry = |ns: &str, name: &str| {
        !(dag.entries.keys()).any(|k| &*k.gateway.namespace == ns && &*k.gateway.name == name)
    };
    assert!(no_entry("team-c", "gc") && no_entry("team-d", "gd"));
}

#[test]
fn a_used_up_pool_leaves_the_youngest_gateway_unprogrammed() {
    let docs = [
        CLASS.to_string(),
        team_gateway("team-a", "ga", 1, ""),
        team_gateway("team-b", "gb", 2, ""),
    ];
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let dag = build(&snapshot(&docs), &own_addresses("127.0.1.5"));
    assert_eq!(
        entry(&dag, "team-a", "ga", 80).address.to_string(),
        "127.0.1.5"
    );
    let b = gateway_status(&dag, "team-b", "gb");
    assert_eq!(
        conds(&b.conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=false/AddressNotAssigned"
        ]
    );
}

#[test]
fn an_https_port_gets_its_hosts_by_sni_and_its_certificate_for_the_rest() {
    let cert = rcgen::generate_simple_self_signed(vec!["shop.example.com".into()]).unwrap();
    let indent = |pem: String| pem.replace('\n', "\n      ");
    let listeners = gateway_with(
        "  - name: https
    protocol: HTTPS
    port: 443
    tls: {certificateRefs: [{name: cert}]}
",
    );
    let gw = format!(
        "{listeners}---
apiVersion: v1
kind: Secret
metadata: {{name: cert, namespace: shop}}
type: kubernetes.io/tls
stringData:
  tls.crt: |
      {}
  tls.key: |
      {}
",
        indent(cert.cert.pem()),
        indent(cert.signing_key.serialize_pem())
    );
    let gw = gw.as_str();
    let r = route("shop", "store", &["shop.example.com"], TO_WEB);
    let dag = build(
        &snapshot(&[CLASS, gw, SERVICES, &r]),
        &own_addresses("127.0.1.0/24"),
    );
    let e = entry(&dag, "shop", "edge", 443);
    assert_eq!(e.protocol, EntryProtocol::Tls);
    assert_eq!(e.default_secret.as_deref(), Some("shop/cert"));
    let v = &e.vhosts["shop.example.com"];
    assert_eq!(v.tls.as_ref().map(|t| t.secret.as_str()), Some("shop/cert"));
    assert!(dag.secrets.get("shop/cert").is_some());
}

#[test]
fn the_class_lists_the_address_features_only_with_a_pool() {
    let features = |options: &Options| {
        let dag = build(&snapshot(&[CLASS]), options);
        let s = status(&dag, Kind::GatewayClass, "", "sluice");
        s.gateway.as_ref().unwrap().supported_features.clone()
    };
    let with = features(&own_addresses("127.0.1.0/24"));
    let without = features(&Options::default());
    for f in super::super::gateway::OWN_ADDRESS_FEATURES {
        assert!(with.contains(&f) && !without.contains(&f), "{f}");
    }
    let mut sorted = with.clone();
    sorted.sort_unstable();
    assert_eq!(with, sorted);
}

#[test]
fn a_redirect_without_scheme_or_port_keeps_the_port_of_the_gateways_listener() {
    let gw = &gateway_with(
        "  - {name: http, protocol: HTTP, port: 80}\n  - {name: alt, protocol: HTTP, port: 8090}\n",
    );
    let redirect =
        "  - filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org}}]\n";
    let r = route("shop", "store", &["shop.example.com"], redirect);
    let dag = build(&snapshot(&[CLASS, gw, &r]), &own_addresses("127.0.1.0/24"));
    let port_of = |port| {
        let v = &entry(&dag, "shop", "edge", port).vhosts["shop.example.com"];
        match &v.routes[0].action {
            RouteAction::Redirect(r) => r.port,
            other => panic!("not a redirect: {other:?}"),
        }
    };
    assert_eq!(port_of(8090), Some(8090));
    assert_eq!(
        port_of(80),
        None,
        "the scheme's own port is left out of the URL"
    );
}
