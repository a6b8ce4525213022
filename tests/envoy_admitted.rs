//! Whatever the webhook admits, Envoy accepts. Objects of every routing kind are generated from a
//! fixed seed with values at the edges of what the rules allow (wildcards, the longest names,
//! odd but legal path and header characters, the largest weights, the shortest and longest
//! durations, every load-balancing strategy and upstream protocol, TLS with minimum versions,
//! delegation, IPv6 and unusual endpoint addresses). Those `validate_object` admits are stored,
//! built and translated like any snapshot, and `envoy --mode validate` must accept the result.
//! One object Envoy cannot load would be a NACK that stops every later change of its resource
//! type, for every tenant.
//!
//! `SLUICE_ADMITTED_ROUNDS` (default 100) bounds the run; each round is one snapshot of about 80
//! objects and one Envoy run. `SLUICE_ADMITTED_SEED` picks another sequence.

mod envoy_support;
mod rng;

use base64::Engine;
use rng::Rng;
use serde_json::{Value, json};
use sluice::dag;
use sluice::manifest::{Document, decode_value};
use sluice::store::{AnyObject, Snapshot};
use sluice::translate;
use sluice::validate::validate_object;

const NS: &str = "edge";

/// Services of the snapshot: name, port, port name.
const SERVICES: &[(&str, u16, &str)] = &[
    ("web", 80, "http"),
    ("api", 8080, ""),
    ("grpc", 65535, "h2"),
    ("tls", 443, "https"),
    ("one", 1, "x"),
];

fn longest_host(wildcard: bool) -> String {
    let mut host = if wildcard {
        "*".to_string()
    } else {
        "h".to_string()
    };
    while host.len() + 64 <= 253 {
        host.push('.');
        host.push_str(&"q".repeat(63));
    }
    host.push('.');
    host.push_str(&"z".repeat(253 - host.len()));
    host
}

fn host(rng: &mut Rng, wildcard_ok: bool) -> String {
    let mut hosts = vec![
        format!("h{}.example.com", rng.below(40)),
        "a.b.c.d.e.example.com".to_string(),
        "x-1.example".to_string(),
        "xn--bcher-kva.example".to_string(),
        "localhost".to_string(),
        "Upper.Example.COM".to_string(),
        format!("{}.example.com", "l".repeat(63)),
        longest_host(false),
    ];
    if wildcard_ok {
        hosts.push(format!("*.w{}.example.com", rng.below(10)));
        hosts.push("*.example".to_string());
        hosts.push(longest_host(true));
    }
    rng.pick(&hosts).clone()
}

fn path(rng: &mut Rng) -> String {
    rng.pick(&[
        "/",
        "/a",
        "/a/",
        "/a/b/c/",
        "/a%20b",
        "/%2F",
        "/é/ü",
        "/a;b=c",
        "/a:b@c",
        "/~user",
        "/a+b",
        "/a'b",
        "/a\"b",
        "/a*b",
        "/a$b!c",
        "/a,b",
        "/[x]",
        "/a{b}",
        "/a|b",
        "/a\\b",
        "/a^b",
        "/a`b",
        "/a<b>",
        "/...",
        "/a..b",
        "/.well-known/acme-challenge",
        "/x/",
    ])
    .to_string()
}

fn header_name(rng: &mut Rng) -> String {
    rng.pick(&[
        "x-a",
        "X-Upper",
        "x_under",
        "a!#$%&'*+-.^_`|~",
        "authorization",
        "host",
        "te",
        "content-length",
        "cookie",
        "x-very-long-header-name-that-goes-on-and-on-and-on-and-on-and-on-and-on-and-on",
    ])
    .to_string()
}

fn header_value(rng: &mut Rng) -> String {
    let long = "v".repeat(4000);
    rng.pick(&[
        "",
        "a",
        "a b",
        " lead",
        "trail ",
        "é",
        "日本",
        "%ENVIRONMENT(HOME)%",
        "%%",
        "\"q\"",
        "a;b,c",
        "{}",
        "\\",
        long.as_str(),
    ])
    .to_string()
}

fn regex(rng: &mut Rng) -> String {
    rng.pick(&[
        ".*",
        "v[0-9]+",
        "^/api/v[0-9]+/users/[a-z0-9-]{1,64}$",
        "(?i)chrome|firefox",
        r"\pL+\p{Greek}*",
        "a{1000}",
        "é+",
        r"[^\x00-\x1f]*",
        "",
        "(a|b|)",
        r"\d{3}-\d{4}",
    ])
    .to_string()
}

fn duration(rng: &mut Rng) -> String {
    rng.pick(&[
        "0s", "1ns", "1us", "1ms", "1.5s", "1m30s", "8760h", "infinity", "150ms", "0.001ms",
    ])
    .to_string()
}

fn weight(rng: &mut Rng) -> Value {
    match rng.below(6) {
        0 => Value::Null,
        1 => json!(0),
        2 => json!(1),
        3 => json!(100),
        4 => json!(1_000_000),
        _ => json!(rng.below(u32::MAX as usize) as u64),
    }
}

fn health_check(rng: &mut Rng) -> Value {
    let mut hc = json!({ "path": path(rng) });
    if rng.chance(50) {
        hc["host"] = json!(host(rng, false));
    }
    for key in [
        "intervalSeconds",
        "timeoutSeconds",
        "unhealthyThresholdCount",
        "healthyThresholdCount",
    ] {
        if rng.chance(50) {
            hc[key] = json!(rng.pick(&[0u64, 1, 2, 5, 3600, 86_400, 4_294_967_295]));
        }
    }
    hc
}

fn strategy(rng: &mut Rng) -> String {
    rng.pick(&["RoundRobin", "WeightedLeastRequest", "Random", "Cookie"])
        .to_string()
}

fn tls(rng: &mut Rng) -> Value {
    let mut t = json!({ "secretName": rng.pick(&["cert", "cert", "missing"]) });
    if rng.chance(70) {
        t["minimumProtocolVersion"] = json!(rng.pick(&["1.1", "1.2", "1.3"]));
    }
    t
}

fn metadata(name: String) -> Value {
    json!({ "name": name, "namespace": NS })
}

fn ingressroute_v1beta1(rng: &mut Rng, i: usize, names: &[String]) -> Value {
    let mut spec = json!({});
    if rng.chance(80) {
        spec["virtualhost"] = json!({ "fqdn": host(rng, false) });
        if rng.chance(40) {
            spec["virtualhost"]["tls"] = tls(rng);
        }
    }
    if rng.chance(30) {
        spec["strategy"] = json!(strategy(rng));
    }
    if rng.chance(30) {
        spec["healthCheck"] = health_check(rng);
    }
    let routes: Vec<Value> = (0..1 + rng.below(4))
        .map(|_| {
            let mut r = json!({ "match": path(rng) });
            if rng.chance(20) && !names.is_empty() {
                r["delegate"] = json!({ "name": rng.pick(names) });
            } else {
                let services: Vec<Value> = (0..1 + rng.below(3))
                    .map(|_| {
                        let (name, port, _) = *rng.pick(SERVICES);
                        let mut s = json!({ "name": name, "port": port });
                        let w = weight(rng);
                        if !w.is_null() {
                            s["weight"] = w;
                        }
                        if rng.chance(20) {
                            s["strategy"] = json!(strategy(rng));
                        }
                        if rng.chance(15) {
                            s["healthCheck"] = health_check(rng);
                        }
                        s
                    })
                    .collect();
                r["services"] = json!(services);
            }
            if rng.chance(20) {
                r["permitInsecure"] = json!(true);
            }
            r
        })
        .collect();
    spec["routes"] = json!(routes);
    json!({
        "apiVersion": "contour.heptio.com/v1beta1",
        "kind": "IngressRoute",
        "metadata": metadata(format!("b{i}")),
        "spec": spec,
    })
}

fn header_condition(rng: &mut Rng) -> Value {
    match rng.below(8) {
        0 => json!({ "cookie": header_value(rng) }),
        1 => json!({ "userAgent": header_value(rng) }),
        n => {
            let mut c = json!({ "header": header_name(rng) });
            match n {
                2 => c["value"] = json!(header_value(rng)),
                3 => c["exact"] = json!(header_value(rng)),
                4 => c["contains"] = json!(header_value(rng)),
                5 => c["notContains"] = json!(header_value(rng)),
                6 => c["present"] = json!(rng.chance(50)),
                _ => c["regex"] = json!(regex(rng)),
            }
            c
        }
    }
}

fn ingressroute_v1(rng: &mut Rng, i: usize) -> Value {
    let mut vh = json!({ "fqdn": host(rng, false) });
    let tcp = rng.chance(10);
    if tcp || rng.chance(40) {
        vh["tls"] = tls(rng);
    }
    let routes: Vec<Value> = (0..1 + rng.below(4))
        .map(|_| {
            let mut m = json!({});
            if rng.chance(80) {
                m["path"] = json!(path(rng));
            }
            if rng.chance(60) {
                let headers: Vec<Value> = (0..1 + rng.below(3))
                    .map(|_| header_condition(rng))
                    .collect();
                m["headers"] = json!(headers);
            }
            let backends: Vec<Value> = (0..1 + rng.below(3))
                .map(|_| {
                    let (name, port, _) = *rng.pick(SERVICES);
                    let protocol = if tcp {
                        "tcp"
                    } else {
                        *rng.pick(&["http", "https", "http2", "h2c", "https2", "h2"])
                    };
                    let mut b = json!({ protocol: name, "port": port });
                    let w = weight(rng);
                    if !w.is_null() {
                        b["weight"] = w;
                    }
                    if rng.chance(15) {
                        b["strategy"] = json!(strategy(rng));
                    }
                    if rng.chance(10) {
                        b["healthCheck"] = health_check(rng);
                    }
                    b
                })
                .collect();
            let mut r = json!({ "match": m, "services": backends });
            if rng.chance(30) {
                r["timeoutPolicy"] = json!({ "request": duration(rng) });
            }
            if rng.chance(30) {
                let mut f = json!({ "count": rng.pick(&[0u64, 1, 3, 10, 4_294_967_295]) });
                if rng.chance(50) {
                    f["perTryTimeout"] = json!(duration(rng));
                }
                if rng.chance(30) {
                    f["passiveHealthCheckEnabled"] = json!(rng.chance(50));
                }
                if rng.chance(30) {
                    f["retryPolicyEnabled"] = json!(rng.chance(50));
                }
                r["failurePolicy"] = f;
            }
            if rng.chance(15) {
                r["permitInsecure"] = json!(true);
            }
            r
        })
        .collect();
    let routes = if tcp {
        // A TCP proxy: one route of `tcp` backends, nothing to match.
        let backends: Vec<Value> = routes
            .iter()
            .flat_map(|r| r["services"].as_array().cloned().unwrap_or_default())
            .collect();
        vec![json!({ "services": backends })]
    } else {
        routes
    };
    let mut spec = json!({ "virtualhost": vh, "routes": routes });
    if rng.chance(20) {
        spec["strategy"] = json!(strategy(rng));
    }
    if rng.chance(20) {
        spec["healthCheck"] = health_check(rng);
    }
    json!({
        "apiVersion": "projectcontour.io/v1",
        "kind": "IngressRoute",
        "metadata": metadata(format!("v{i}")),
        "spec": spec,
    })
}

fn route_v1alpha1(rng: &mut Rng, i: usize) -> Value {
    let routes: Vec<Value> = (0..1 + rng.below(3))
        .map(|_| {
            let upstreams: Vec<Value> = (0..1 + rng.below(3))
                .map(|_| {
                    let (name, port, _) = *rng.pick(SERVICES);
                    let mut u = json!({ "serviceName": name, "servicePort": port });
                    let w = weight(rng);
                    if !w.is_null() {
                        u["weight"] = w;
                    }
                    if rng.chance(15) {
                        u["lbHealthCheck"] = health_check(rng);
                    }
                    u
                })
                .collect();
            let mut r = json!({ "pathPrefix": path(rng), "upstreams": upstreams });
            if rng.chance(20) {
                r["strategy"] = json!(strategy(rng));
            }
            r
        })
        .collect();
    let mut spec = json!({ "host": host(rng, false), "routes": routes });
    if rng.chance(20) {
        spec["lbHealthCheck"] = health_check(rng);
    }
    json!({
        "apiVersion": "contour.heptio.com/v1alpha1",
        "kind": "Route",
        "metadata": metadata(format!("r{i}")),
        "spec": spec,
    })
}

fn ingress_backend(rng: &mut Rng) -> Value {
    let (name, port, port_name) = *rng.pick(SERVICES);
    let port = if !port_name.is_empty() && rng.chance(50) {
        json!({ "name": port_name })
    } else {
        json!({ "number": port })
    };
    json!({ "service": { "name": name, "port": port } })
}

fn ingress(rng: &mut Rng, i: usize) -> Value {
    let rules: Vec<Value> = (0..1 + rng.below(3))
        .map(|_| {
            let paths: Vec<Value> = (0..1 + rng.below(3))
                .map(|_| {
                    let mut p = json!({
                        "path": path(rng),
                        "pathType": rng.pick(&["Prefix", "Exact", "ImplementationSpecific"]),
                        "backend": ingress_backend(rng),
                    });
                    if rng.chance(5) {
                        p.as_object_mut().unwrap().remove("path");
                    }
                    p
                })
                .collect();
            let mut rule = json!({ "http": { "paths": paths } });
            // The API server takes Ingress hosts in lower case only (IngressRoute fqdns keep
            // the generator's upper-case host).
            if rng.chance(85) {
                rule["host"] = json!(host(rng, true).to_ascii_lowercase());
            }
            rule
        })
        .collect();
    let mut spec = json!({ "ingressClassName": "sluice", "rules": rules });
    if rng.chance(15) {
        spec["defaultBackend"] = ingress_backend(rng);
    }
    if rng.chance(30) {
        let hosts: Vec<String> = (0..1 + rng.below(2))
            .map(|_| host(rng, true).to_ascii_lowercase())
            .collect();
        spec["tls"] = json!([{ "hosts": hosts, "secretName": rng.pick(&["cert", "missing"]) }]);
    }
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata(format!("i{i}")),
        "spec": spec,
    })
}

/// Services, their EndpointSlices (odd but valid addresses and ports) and TLS Secrets.
fn supporting_objects() -> Vec<Value> {
    let mut out = Vec::new();
    for (name, port, port_name) in SERVICES {
        let mut p = json!({ "port": port });
        if !port_name.is_empty() {
            p["name"] = json!(port_name);
        }
        out.push(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(name.to_string()),
            "spec": { "ports": [p] },
        }));
        for (suffix, address_type, addresses, target) in [
            (
                "v4",
                "IPv4",
                json!(["10.0.0.1", "0.0.0.0", "255.255.255.255"]),
                65535,
            ),
            (
                "v6",
                "IPv6",
                json!(["::1", "fe80::1", "2001:db8::ffff:1"]),
                1,
            ),
            ("fqdn", "FQDN", json!(["db.example.com"]), 5432),
            ("zero", "IPv4", json!(["10.0.0.9"]), 0),
        ] {
            out.push(json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": format!("{name}-{suffix}"),
                    "namespace": NS,
                    "labels": { "kubernetes.io/service-name": name },
                },
                "addressType": address_type,
                "ports": [{ "name": port_name, "port": target, "protocol": "TCP" }],
                "endpoints": [{ "addresses": addresses, "conditions": { "ready": true } }],
            }));
        }
    }
    let ck = rcgen::generate_simple_self_signed(vec!["edge.example.com".to_string()]).unwrap();
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    out.push(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata("cert".to_string()),
        "type": "kubernetes.io/tls",
        "data": { "tls.crt": b64(ck.cert.pem()), "tls.key": b64(ck.signing_key.serialize_pem()) },
    }));
    out
}

fn object(value: Value) -> Option<AnyObject> {
    match decode_value(value) {
        Ok(Document::Object(o)) => Some(o),
        _ => None,
    }
}

#[test]
fn every_snapshot_of_admitted_objects_is_one_envoy_accepts() {
    let rounds = std::env::var("SLUICE_ADMITTED_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100u64);
    let supporting: Vec<AnyObject> = supporting_objects()
        .into_iter()
        .map(|v| object(v).expect("supporting objects decode"))
        .collect();
    let seed = std::env::var("SLUICE_ADMITTED_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x00AD_0017_7ED5u64);
    let mut rng = Rng(seed | 1);
    let (mut admitted_total, mut refused_total, mut routes_total) = (0, 0, 0);
    let (mut tls_hosts, mut tcp_hosts, mut clusters) = (0, 0, 0);
    for round in 0..rounds {
        let mut objects = supporting.clone();
        let mut admitted = 0;
        let names: Vec<String> = (0..20).map(|i| format!("b{i}")).collect();
        for i in 0..80 {
            let value = match rng.below(4) {
                0 => ingressroute_v1beta1(&mut rng, i, &names),
                1 => ingressroute_v1(&mut rng, i),
                2 => route_v1alpha1(&mut rng, i),
                _ => ingress(&mut rng, i),
            };
            let Some(obj) = object(value) else {
                refused_total += 1;
                continue;
            };
            if validate_object(&obj).allowed() {
                objects.push(obj);
                admitted += 1;
            } else {
                refused_total += 1;
            }
        }
        admitted_total += admitted;
        let snapshot = Snapshot::from_objects(objects);
        let model = dag::build(&snapshot, &dag::Options::default());
        routes_total += model.vhosts.values().map(|v| v.routes.len()).sum::<usize>();
        tls_hosts += model.vhosts.values().filter(|v| v.tls.is_some()).count();
        tcp_hosts += model
            .vhosts
            .values()
            .filter(|v| v.tcp_proxy.is_some())
            .count();
        clusters += model.clusters.len();
        let resources = translate::build(&model, &translate::Options::default());
        envoy_support::assert_envoy_accepts(&resources, &format!("round {round}"));
    }
    eprintln!(
        "{rounds} rounds: {admitted_total} objects admitted, {refused_total} refused; \
         {routes_total} routes, {tls_hosts} TLS hosts, {tcp_hosts} TCP hosts, {clusters} clusters"
    );
    // The generator reaches both sides of the rules, and the admitted objects route.
    assert!(
        tls_hosts > 0 && tcp_hosts > 0,
        "TLS and TCP hosts are generated"
    );
    assert!(clusters > rounds as usize * 5, "{clusters} clusters");
    assert!(
        admitted_total > rounds as usize * 30,
        "{admitted_total} admitted"
    );
    assert!(
        refused_total > rounds as usize * 5,
        "{refused_total} refused"
    );
    assert!(routes_total > rounds as usize * 40, "{routes_total} routes");
}

/// Envoy adds a route's weights in 32 bits and refuses a route configuration whose sum is past
/// them. The heaviest route the webhook admits, 128 services of the largest weight, is far below;
/// a 129th service is refused, with its field, even in a manifest no API server has seen.
#[test]
fn the_heaviest_route_the_webhook_admits_is_one_envoy_accepts() {
    let route = |services: usize| {
        let backends: Vec<Value> = (0..services)
            .map(|k| {
                let (name, port, _) = SERVICES[k % SERVICES.len()];
                json!({ "http": name, "port": port, "weight": 1_000_000 })
            })
            .collect();
        object(json!({
            "apiVersion": "projectcontour.io/v1",
            "kind": "IngressRoute",
            "metadata": metadata(format!("heavy{services}")),
            "spec": {
                "virtualhost": { "fqdn": format!("heavy{services}.example.com") },
                "routes": [{ "services": backends }],
            },
        }))
        .expect("decodes")
    };
    let refused = validate_object(&route(129));
    assert_eq!(
        refused
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>(),
        [
            "spec.routes[0].services: holds 129 services; a route may name at most 128 (list each Service once, with its weight)"
        ]
    );
    let heaviest = route(128);
    assert!(validate_object(&heaviest).allowed());
    let mut objects: Vec<AnyObject> = supporting_objects()
        .into_iter()
        .map(|v| object(v).expect("decodes"))
        .collect();
    objects.push(heaviest);
    let model = dag::build(&Snapshot::from_objects(objects), &dag::Options::default());
    assert_eq!(model.vhosts.len(), 1);
    let resources = translate::build(&model, &translate::Options::default());
    envoy_support::assert_envoy_accepts(&resources, "heaviest route");
}
