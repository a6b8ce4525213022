//! Frontend client certificate validation (docs/gateway-api.md, "Frontend client certificate
//! validation"): a Gateway's `spec.tls.frontend`, the listener conditions of each way a CA
//! reference fails, and the validation each port of the Gateway's address gets.

use super::*;

/// A CA certificate's PEM (self-signed, as a CA's own certificate is).
fn ca_pem(name: &str) -> String {
    rcgen::generate_simple_self_signed(vec![name.to_string()])
        .unwrap()
        .cert
        .pem()
}

/// ConfigMap `ns/name` with a CA certificate under `ca.crt`.
fn ca_config_map(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{ca.crt: {:?}}}\n",
        ca_pem(name)
    )
}

/// A usable TLS Secret `shop/server`.
fn server_secret() -> String {
    let c = rcgen::generate_simple_self_signed(vec!["shop.example.com".into()]).unwrap();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: server, namespace: shop}}\ntype: kubernetes.io/tls\nstringData: {{tls.crt: {:?}, tls.key: {:?}}}\n",
        c.cert.pem(),
        c.signing_key.serialize_pem()
    )
}

/// Gateway `shop/edge` with `frontend` (the flow mapping of `spec.tls.frontend`), HTTPS
/// listeners `https` (443), `alt` (9443), `other` (7443) and an HTTP listener `http` (80).
fn frontend_gateway(frontend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: shop, generation: 3}}
spec:
  gatewayClassName: sluice
  tls: {{frontend: {frontend}}}
  listeners:
  - {{name: https, protocol: HTTPS, port: 443, tls: {{certificateRefs: [{{name: server}}]}}}}
  - {{name: alt, protocol: HTTPS, port: 9443, hostname: alt.example.com, tls: {{certificateRefs: [{{name: server}}]}}}}
  - {{name: other, protocol: HTTPS, port: 7443, tls: {{certificateRefs: [{{name: server}}]}}}}
  - {{name: http, protocol: HTTP, port: 80}}
"
    )
}

fn with_addresses() -> Options {
    Options {
        gateway_addresses: Some("127.0.1.0/24".parse().unwrap()),
        ..Options::default()
    }
}

fn build_with(extra: &[String], options: &Options) -> Dag {
    let mut docs = vec![CLASS.to_string(), server_secret()];
    docs.extend(extra.iter().cloned());
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    build(&snapshot(&docs), options)
}

fn gateway_status(dag: &Dag) -> GatewayApiStatus {
    let s = status(dag, Kind::Gateway, "shop", "edge");
    (**s.gateway.as_ref().expect("a Gateway API status")).clone()
}

/// `type=status/reason` of the conditions of listener `name`, sorted.
fn listener_conds(dag: &Dag, name: &str) -> Vec<String> {
    let s = gateway_status(dag);
    let l = (s.listeners.iter())
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listener {name}"));
    let mut c = conds(&l.conditions);
    c.sort();
    c
}

fn listener_message(dag: &Dag, name: &str, type_: &str) -> String {
    let s = gateway_status(dag);
    let l = s.listeners.iter().find(|l| l.name == name).unwrap();
    let c = l.conditions.iter().find(|c| c.type_ == type_).unwrap();
    c.message.clone()
}

fn entry_of(dag: &Dag, port: u16) -> Option<&Entry> {
    let key = EntryKey {
        gateway: crate::api::ObjKey::new("shop", "edge"),
        port,
    };
    dag.entries.get(&key).map(|e| &**e)
}

const ALL_TRUE: [&str; 3] = [
    "Accepted=true/Accepted",
    "Programmed=true/Programmed",
    "ResolvedRefs=true/ResolvedRefs",
];

#[test]
fn each_https_port_validates_clients_with_its_own_ca_or_the_default() {
    let gw = frontend_gateway(
        "{default: {validation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: main-ca}]}},
          perPort: [{port: 9443, tls: {validation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: alt-ca}]}}},
                    {port: 80, tls: {validation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: alt-ca}]}}}]}",
    );
    let dag = build_with(
        &[
            gw,
            ca_config_map("shop", "main-ca"),
            ca_config_map("shop", "alt-ca"),
        ],
        &with_addresses(),
    );
    for l in ["https", "alt", "other", "http"] {
        assert_eq!(listener_conds(&dag, l), ALL_TRUE, "{l}");
    }
    let main = "shop/edge/Gateway/frontend/default/ca.crt";
    let alt = "shop/edge/Gateway/frontend/9443/ca.crt";
    for (port, ca) in [(443, main), (7443, main), (9443, alt)] {
        let v = entry_of(&dag, port).unwrap().client_validation.as_ref();
        assert_eq!(
            v,
            Some(&ClientValidation {
                ca_secret: ca.to_string(),
                insecure_fallback: false
            }),
            "{port}"
        );
    }
    // The HTTP port is not affected by a perPort entry naming it.
    assert_eq!(entry_of(&dag, 80).unwrap().client_validation, None);
    for ca in [main, alt] {
        let s = dag
            .secrets
            .get(ca)
            .unwrap_or_else(|| panic!("no secret {ca}"));
        assert_eq!(s.kind, SecretKind::TrustedCa);
        assert!(s.cert_pem.contains("BEGIN CERTIFICATE"));
    }
    // No insecure mode asked for: no such Gateway condition.
    let gs = gateway_status(&dag);
    assert!(
        !conds(&gs.conditions)
            .iter()
            .any(|c| c.starts_with("InsecureFrontendValidationMode")),
        "{:?}",
        gs.conditions
    );
}

#[test]
fn insecure_fallback_is_served_and_said_on_the_gateway() {
    let gw = frontend_gateway(
        "{default: {validation: {mode: AllowValidOnly, caCertificateRefs: [{group: \"\", kind: ConfigMap, name: main-ca}]}},
          perPort: [{port: 9443, tls: {validation: {mode: AllowInsecureFallback, caCertificateRefs: [{group: \"\", kind: ConfigMap, name: main-ca}]}}}]}",
    );
    let dag = build_with(&[gw, ca_config_map("shop", "main-ca")], &with_addresses());
    let fallback = |port| {
        (entry_of(&dag, port).unwrap().client_validation.as_ref())
            .unwrap()
            .insecure_fallback
    };
    assert!(!fallback(443));
    assert!(fallback(9443));
    let gs = gateway_status(&dag);
    assert!(
        conds(&gs.conditions)
            .contains(&"InsecureFrontendValidationMode=true/ConfigurationChanged".to_string()),
        "{:?}",
        gs.conditions
    );
    assert!(conds(&gs.conditions).contains(&"Accepted=true/Accepted".to_string()));
}

#[test]
fn a_port_whose_ca_does_not_resolve_is_neither_accepted_nor_served() {
    let grant = "apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: gateways, namespace: pki}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: shop}]
  to: [{group: \"\", kind: ConfigMap}]
";
    let unusable = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: empty-ca, namespace: shop}\ndata: {other: x}\n";
    let cases: [(&str, &[&str], &str, &str); 5] = [
        (
            "{name: missing, group: \"\", kind: ConfigMap}",
            &[],
            "InvalidCACertificateRef",
            "\"shop/missing\" not found",
        ),
        (
            "{name: empty-ca, group: \"\", kind: ConfigMap}",
            &[unusable],
            "InvalidCACertificateRef",
            "no usable CA certificates",
        ),
        (
            "{name: web, group: \"\", kind: Service}",
            &[],
            "InvalidCACertificateKind",
            "kind \"Service\"",
        ),
        (
            "{name: pki-ca, namespace: pki, group: \"\", kind: ConfigMap}",
            &[],
            "RefNotPermitted",
            "no ReferenceGrant",
        ),
        // With the grant the same reference resolves.
        (
            "{name: pki-ca, namespace: pki, group: \"\", kind: ConfigMap}",
            &[grant],
            "",
            "",
        ),
    ];
    for (r, extra, reason, message) in cases {
        let gw = frontend_gateway(&format!(
            "{{default: {{validation: {{caCertificateRefs: [{{group: \"\", kind: ConfigMap, name: main-ca}}]}}}},
              perPort: [{{port: 9443, tls: {{validation: {{caCertificateRefs: [{r}]}}}}}}]}}"
        ));
        let mut docs = vec![
            gw,
            ca_config_map("shop", "main-ca"),
            ca_config_map("pki", "pki-ca"),
        ];
        docs.extend(extra.iter().map(|d| d.to_string()));
        let dag = build_with(&docs, &with_addresses());
        // The other ports are untouched.
        assert_eq!(listener_conds(&dag, "https"), ALL_TRUE, "{r}");
        assert!(entry_of(&dag, 443).is_some(), "{r}");
        if reason.is_empty() {
            assert_eq!(listener_conds(&dag, "alt"), ALL_TRUE, "{r}");
            let v = entry_of(&dag, 9443).unwrap().client_validation.as_ref();
            assert_eq!(
                v.unwrap().ca_secret,
                "shop/edge/Gateway/frontend/9443/ca.crt"
            );
            continue;
        }
        assert_eq!(
            listener_conds(&dag, "alt"),
            [
                "Accepted=false/NoValidCACertificate".to_string(),
                "Programmed=false/Invalid".to_string(),
                format!("ResolvedRefs=false/{reason}"),
            ],
            "{r}"
        );
        let why = listener_message(&dag, "alt", "ResolvedRefs");
        assert!(why.contains(message), "{r}: {why}");
        assert!(
            why.contains("spec.tls.frontend.perPort[0].tls.validation.caCertificateRefs[0]"),
            "{why}"
        );
        // Not served rather than served without validation.
        assert!(entry_of(&dag, 9443).is_none(), "{r}");
        // The Gateway itself stays accepted: other listeners are.
        let gs = gateway_status(&dag);
        assert!(
            conds(&gs.conditions).contains(&"Accepted=true/ListenersNotValid".to_string()),
            "{:?}",
            gs.conditions
        );
    }
}

#[test]
fn an_invalid_default_leaves_the_http_listener_alone() {
    let gw = frontend_gateway(
        "{default: {validation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: does-not-exist}]}}}",
    );
    let dag = build_with(&[gw], &with_addresses());
    assert_eq!(listener_conds(&dag, "http"), ALL_TRUE);
    assert!(entry_of(&dag, 80).is_some());
    for (l, port) in [("https", 443), ("alt", 9443), ("other", 7443)] {
        assert_eq!(
            listener_conds(&dag, l),
            [
                "Accepted=false/NoValidCACertificate",
                "Programmed=false/Invalid",
                "ResolvedRefs=false/InvalidCACertificateRef"
            ],
            "{l}"
        );
        assert!(entry_of(&dag, port).is_none(), "{l}");
    }
}

#[test]
fn a_per_port_entry_without_validation_overrides_the_default_with_none() {
    let gw = frontend_gateway(
        "{default: {validation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: main-ca}]}},
          perPort: [{port: 9443, tls: {}}]}",
    );
    let dag = build_with(&[gw, ca_config_map("shop", "main-ca")], &with_addresses());
    assert_eq!(listener_conds(&dag, "alt"), ALL_TRUE);
    assert_eq!(entry_of(&dag, 9443).unwrap().client_validation, None);
    assert!(entry_of(&dag, 443).unwrap().client_validation.is_some());
}

#[test]
fn a_reference_that_does_not_resolve_beside_one_that_does_leaves_the_listener_served() {
    let gw = frontend_gateway(
        "{default: {validation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: gone}, {group: \"\", kind: ConfigMap, name: main-ca}]}}}",
    );
    let dag = build_with(&[gw, ca_config_map("shop", "main-ca")], &with_addresses());
    assert_eq!(
        listener_conds(&dag, "https"),
        [
            "Accepted=true/Accepted",
            "Programmed=true/Programmed",
            "ResolvedRefs=false/InvalidCACertificateRef"
        ]
    );
    let why = listener_message(&dag, "https", "ResolvedRefs");
    assert!(
        why.contains("caCertificateRefs[0]") && why.contains("shop/gone"),
        "{why}"
    );
    let v = entry_of(&dag, 443)
        .unwrap()
        .client_validation
        .as_ref()
        .unwrap();
    assert_eq!(v.ca_secret, "shop/edge/Gateway/frontend/default/ca.crt");
}

#[test]
fn without_addresses_of_their_own_client_validation_is_refused_not_ignored() {
    let gw = frontend_gateway(
        "{default: {validation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: main-ca}]}}}",
    );
    let dag = build_with(&[gw, ca_config_map("shop", "main-ca")], &Options::default());
    for l in ["https", "alt", "other"] {
        let c = listener_conds(&dag, l);
        assert!(
            c.contains(&"Accepted=false/UnsupportedValue".to_string()),
            "{l}: {c:?}"
        );
        assert!(listener_message(&dag, l, "Accepted").contains("--gateway-addresses"));
    }
    assert_eq!(listener_conds(&dag, "http"), ALL_TRUE);
    // Nothing of the Gateway on the shared HTTPS listener: no host has TLS.
    assert!(dag.vhosts.values().all(|v| v.tls.is_none()));
}

#[test]
fn the_supported_features_list_frontend_validation_only_with_own_addresses() {
    let f = "GatewayFrontendClientCertificateValidation";
    assert!(super::super::gateway::supported_features(&with_addresses()).contains(&f));
    assert!(!super::super::gateway::supported_features(&Options::default()).contains(&f));
}

#[test]
fn incremental_builds_follow_the_ca_config_maps_as_full_builds_do() {
    use crate::dag::incremental::Incremental;
    let options = with_addresses();
    let validated = frontend_gateway(
        "{default: {validation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: main-ca}]}}}",
    );
    let plain = frontend_gateway("{default: {}}");
    let server = server_secret();
    let snap = |docs: &[&String]| {
        let mut all = vec![CLASS, server.as_str()];
        all.extend(docs.iter().map(|d| d.as_str()));
        snapshot(&all)
    };
    let (ca, other_ca) = (
        ca_config_map("shop", "main-ca"),
        ca_config_map("shop", "main-ca"),
    );
    // The ConfigMap missing, created, changed to another CA, the validation removed.
    let steps = [
        snap(&[&validated]),
        snap(&[&validated, &ca]),
        snap(&[&validated, &other_ca]),
        snap(&[&plain, &other_ca]),
    ];
    let mut inc = Incremental::new(options.clone());
    let mut prev = inc.build_full(&steps[0]);
    assert!(entry_of(&prev, 443).is_none());
    for (i, pair) in steps.windows(2).enumerate() {
        let (got, _) = inc.build(Some((&pair[0], &prev)), &pair[1]);
        assert_eq!(got, build(&pair[1], &options), "step {}", i + 1);
        prev = got;
    }
    assert_eq!(entry_of(&prev, 443).unwrap().client_validation, None);
    assert!(
        !(prev.secrets.keys()).any(|k| k.contains("/Gateway/frontend/")),
        "{:?}",
        prev.secrets.keys().collect::<Vec<_>>()
    );
}
