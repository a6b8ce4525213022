//! Backend TLS (docs/gateway-api.md, "Backend TLS"): BackendTLSPolicies on the Services of
//! HTTPRoutes' backends, their statuses per ancestor Gateway, and a Gateway's client
//! certificate for its TLS backends.

use super::*;

/// A CA certificate's PEM (self-signed, as a CA's own certificate is).
fn ca_pem() -> String {
    rcgen::generate_simple_self_signed(vec!["ca.example.com".to_string()])
        .unwrap()
        .cert
        .pem()
}

/// A TLS Secret `ns/name` with a usable certificate and key, or an empty one.
fn tls_secret(ns: &str, name: &str, usable: bool) -> String {
    let (cert, key) = match usable {
        true => {
            let c = rcgen::generate_simple_self_signed(vec!["gw.example.com".into()]).unwrap();
            (c.cert.pem(), c.signing_key.serialize_pem())
        }
        false => (String::new(), String::new()),
    };
    format!(
        "apiVersion: v1
kind: Secret
metadata: {{name: {name}, namespace: {ns}}}
type: kubernetes.io/tls
stringData: {{tls.crt: {cert:?}, tls.key: {key:?}}}
"
    )
}

/// ConfigMap `shop/<name>` with `data`, a YAML flow mapping.
fn config_map(name: &str, data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: shop}}\ndata: {data}\n"
    )
}

fn ca_config_map(name: &str) -> String {
    config_map(name, &format!("{{ca.crt: {:?}}}", ca_pem()))
}

/// Service `shop/secure` with ports `https` (443) and `alt` (8443), one endpoint.
const SECURE: &str = "apiVersion: v1
kind: Service
metadata: {name: secure, namespace: shop}
spec: {ports: [{name: https, port: 443}, {name: alt, port: 8443}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: secure-1, namespace: shop, labels: {kubernetes.io/service-name: secure}}
addressType: IPv4
ports: [{name: https, port: 8443}, {name: alt, port: 9443}]
endpoints: [{addresses: [10.0.0.1], conditions: {ready: true}}]
";

/// HTTPRoute `shop/store` on `shop/edge`: `/` to `secure:443`, `/alt` to `secure:8443`.
fn secure_route() -> String {
    route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - backendRefs: [{name: secure, port: 443}]\n  - matches: [{path: {value: /alt}}]\n    backendRefs: [{name: secure, port: 8443}]\n",
    )
}

/// BackendTLSPolicy `shop/<name>` created at `created`, on `targets` (a YAML flow sequence),
/// with a `validation` flow mapping.
fn policy(name: &str, created: &str, targets: &str, validation: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: {name}, namespace: shop, generation: 5, creationTimestamp: {created:?}}}
spec:
  targetRefs: {targets}
  validation: {validation}
"
    )
}

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";
const ON_SECURE: &str = "[{group: \"\", kind: Service, name: secure}]";
const ON_HTTPS: &str = "[{group: \"\", kind: Service, name: secure, sectionName: https}]";
const WITH_CA: &str =
    "{caCertificateRefs: [{group: \"\", kind: ConfigMap, name: ca}], hostname: secure.example.com}";

fn cluster_of<'d>(dag: &'d Dag, path: &str) -> &'d Cluster {
    let r = shop_route(dag, path);
    let RouteAction::Forward(cs) = &r.action else {
        panic!("{path} forwards nowhere: {:?}", r.action);
    };
    &dag.clusters[&cs[0].cluster]
}

/// Each ancestor of policy `shop/<name>`: `namespace/name` and its conditions.
fn ancestors(dag: &Dag, name: &str) -> Vec<(String, Vec<String>)> {
    let s = status(dag, Kind::BackendTlsPolicy, "shop", name);
    let g = s
        .gateway
        .as_ref()
        .expect("a policy of sluice's has a status");
    (g.ancestors.iter().flatten())
        .map(|a| {
            assert_eq!(a.controller_name, "sluice.dev/gateway-controller");
            (format!("{}/{}", a.namespace, a.name), conds(&a.conditions))
        })
        .collect()
}

#[test]
fn a_policy_makes_envoy_speak_tls_verified_by_its_ca_and_hostname() {
    let gw = gateway("sluice", None, "Same");
    let (r, cm) = (secure_route(), ca_config_map("ca"));
    let p = policy("secure-tls", T0, ON_HTTPS, WITH_CA);
    let dag = dag_of(&[CLASS, &gw, SECURE, &r, &cm, &p]);
    let c = cluster_of(&dag, "/");
    assert_eq!(c.protocol, UpstreamProtocol::Https);
    let tls = c.upstream_tls.as_deref().expect("TLS to the backend");
    assert_eq!(tls.sni, "secure.example.com");
    let v = tls.validation.as_ref().expect("verified");
    assert_eq!(v.subject_name, "secure.example.com");
    assert_eq!(v.ca_secret, "shop/secure-tls/BackendTLSPolicy/ca.crt");
    assert_eq!(dag.secrets[&v.ca_secret].kind, SecretKind::TrustedCa);
    assert_eq!(tls.client_secret, None);
    // The other port of the Service is not the policy's.
    let alt = cluster_of(&dag, "/alt");
    assert_eq!(
        (alt.protocol, alt.upstream_tls.is_none()),
        (UpstreamProtocol::Http, true)
    );
    assert_eq!(
        ancestors(&dag, "secure-tls"),
        [(
            "shop/edge".to_string(),
            vec![
                "Accepted=true/Accepted".into(),
                "ResolvedRefs=true/ResolvedRefs".into()
            ]
        )]
    );
    assert_eq!(
        status(&dag, Kind::BackendTlsPolicy, "shop", "secure-tls").generation,
        Some(5)
    );
    let parent = route_parent(&dag, "shop", "store");
    assert_eq!(
        conds(&parent.conditions)[1],
        "ResolvedRefs=true/ResolvedRefs"
    );
}

#[test]
fn subject_alt_names_replace_the_hostname_as_what_is_verified() {
    let gw = gateway("sluice", None, "Same");
    let (r, cm) = (secure_route(), ca_config_map("ca"));
    let validation = "{caCertificateRefs: [{group: \"\", kind: ConfigMap, name: ca}], hostname: secure.example.com, subjectAltNames: [{type: Hostname, hostname: Other.Example.com}, {type: URI, uri: \"spiffe://example.com/web\"}]}";
    let p = policy("sans", T0, ON_SECURE, validation);
    let dag = dag_of(&[CLASS, &gw, SECURE, &r, &cm, &p]);
    let tls = cluster_of(&dag, "/").upstream_tls.as_deref().unwrap();
    assert_eq!(tls.sni, "secure.example.com");
    let v = tls.validation.as_ref().unwrap();
    assert_eq!(
        v.subject_alt_names,
        [
            SubjectAltName::Dns("other.example.com".into()),
            SubjectAltName::Uri("spiffe://example.com/web".into())
        ]
    );
    // A policy on the whole Service applies to each of its ports.
    assert!(cluster_of(&dag, "/alt").upstream_tls.is_some());
}

#[test]
fn a_policy_with_no_valid_ca_is_not_accepted_and_its_backends_get_no_requests() {
    let gw = gateway("sluice", None, "Same");
    let r = secure_route();
    let cases = [
        (
            "{caCertificateRefs: [{group: invalid.io, kind: InvalidKind, name: ca}], hostname: secure.example.com}",
            String::new(),
            "InvalidKind",
            "kind \"InvalidKind\" of group \"invalid.io\"",
        ),
        (
            WITH_CA,
            String::new(),
            "InvalidCACertificateRef",
            "ConfigMap \"shop/ca\" not found",
        ),
        (
            WITH_CA,
            config_map("ca", "{}"),
            "InvalidCACertificateRef",
            "it has no ca.crt",
        ),
        (
            WITH_CA,
            config_map("ca", "{ca.crt: \"\"}"),
            "InvalidCACertificateRef",
            "holds no PEM certificate",
        ),
    ];
    for (validation, cm, reason, message) in cases {
        let p = policy("broken", T0, ON_HTTPS, validation);
        let dag = dag_of(&[CLASS, &gw, SECURE, &r, &cm, &p]);
        let a = ancestors(&dag, "broken");
        assert_eq!(
            a[0].1,
            [
                "Accepted=false/NoValidCACertificate".to_string(),
                format!("ResolvedRefs=false/{reason}")
            ],
            "{validation} {cm}"
        );
        let s = status(&dag, Kind::BackendTlsPolicy, "shop", "broken");
        let resolved = &s.gateway.as_ref().unwrap().ancestors.as_ref().unwrap()[0].conditions[1];
        assert!(resolved.message.contains(message), "{}", resolved.message);
        assert!(
            resolved.message.contains("caCertificateRefs[0]"),
            "{}",
            resolved.message
        );
        // The backend's requests fail (500); the route's references still resolve.
        let action = forwards_to(shop_route(&dag, "/"));
        assert!(action[0].starts_with("500: "), "{action:?}");
        assert!(
            action[0].contains("BackendTLSPolicy shop/broken"),
            "{action:?}"
        );
        let parent = route_parent(&dag, "shop", "store");
        assert_eq!(
            conds(&parent.conditions),
            ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
        );
        // The Service's other port is untouched.
        assert_eq!(
            forwards_to(shop_route(&dag, "/alt")),
            ["shop/secure/8443*1"]
        );
    }
}

#[test]
fn one_valid_ca_ref_of_two_is_accepted_and_says_the_other_did_not_resolve() {
    let gw = gateway("sluice", None, "Same");
    let (r, cm) = (secure_route(), ca_config_map("ca"));
    let validation = "{caCertificateRefs: [{group: \"\", kind: ConfigMap, name: ca}, {group: \"\", kind: ConfigMap, name: gone}], hostname: secure.example.com}";
    let p = policy("half", T0, ON_HTTPS, validation);
    let dag = dag_of(&[CLASS, &gw, SECURE, &r, &cm, &p]);
    assert_eq!(
        ancestors(&dag, "half")[0].1,
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/InvalidCACertificateRef"
        ]
    );
    assert!(cluster_of(&dag, "/").upstream_tls.is_some());
}

#[test]
fn of_two_policies_on_one_target_the_older_then_the_first_by_name_applies() {
    let gw = gateway("sluice", None, "Same");
    let (r, cm) = (secure_route(), ca_config_map("ca"));
    let other = WITH_CA.replace("secure.example.com", "other.example.com");
    for (a_created, b_created, winner, loser) in
        [(T1, T0, "b", "a"), (T0, T1, "a", "b"), (T0, T0, "a", "b")]
    {
        let a = policy("a", a_created, ON_HTTPS, WITH_CA);
        let b = policy("b", b_created, ON_HTTPS, &other);
        let dag = dag_of(&[CLASS, &gw, SECURE, &r, &cm, &a, &b]);
        assert_eq!(ancestors(&dag, winner)[0].1[0], "Accepted=true/Accepted");
        assert_eq!(ancestors(&dag, loser)[0].1[0], "Accepted=false/Conflicted");
        let sni = &cluster_of(&dag, "/").upstream_tls.as_deref().unwrap().sni;
        let expected = if winner == "a" {
            "secure.example.com"
        } else {
            "other.example.com"
        };
        assert_eq!(sni, expected);
        let s = status(&dag, Kind::BackendTlsPolicy, "shop", loser);
        let m = &s.gateway.as_ref().unwrap().ancestors.as_ref().unwrap()[0].conditions[0].message;
        assert!(m.contains(&format!("BackendTLSPolicy \"{winner}\"")), "{m}");
    }
}

#[test]
fn a_policy_naming_the_port_applies_there_beside_one_naming_the_service() {
    let gw = gateway("sluice", None, "Same");
    let (r, cm) = (secure_route(), ca_config_map("ca"));
    let other = WITH_CA.replace("secure.example.com", "other.example.com");
    let whole = policy("whole", T0, ON_SECURE, &other);
    let port = policy("port", T1, ON_HTTPS, WITH_CA);
    let dag = dag_of(&[CLASS, &gw, SECURE, &r, &cm, &whole, &port]);
    let sni = |path| {
        cluster_of(&dag, path)
            .upstream_tls
            .as_deref()
            .unwrap()
            .sni
            .clone()
    };
    assert_eq!(sni("/"), "secure.example.com");
    assert_eq!(sni("/alt"), "other.example.com");
    assert_eq!(ancestors(&dag, "whole")[0].1[0], "Accepted=true/Accepted");
    assert_eq!(ancestors(&dag, "port")[0].1[0], "Accepted=true/Accepted");
}

#[test]
fn a_policy_no_route_of_sluices_uses_gets_no_status_of_sluices() {
    let gw = gateway("sluice", None, "Same");
    let cm = ca_config_map("ca");
    let p = policy("idle", T0, ON_HTTPS, WITH_CA);
    let dag = dag_of(&[CLASS, &gw, SECURE, &cm, &p]);
    assert_eq!(
        status(&dag, Kind::BackendTlsPolicy, "shop", "idle").state,
        State::Ignored
    );
}

/// A Gateway `shop/edge` presenting `client` (a flow mapping of `clientCertificateRef`) to its
/// TLS backends.
fn gateway_with_client(client: &str) -> String {
    format!(
        "{}  tls: {{backend: {{clientCertificateRef: {client}}}}}\n",
        gateway("sluice", None, "Same")
    )
}

fn gateway_conds(dag: &Dag) -> Vec<String> {
    let s = status(dag, Kind::Gateway, "shop", "edge");
    conds(&s.gateway.as_ref().unwrap().conditions)
}

#[test]
fn a_gateways_client_certificate_is_presented_to_its_tls_backends() {
    let gw = gateway_with_client("{name: client}");
    let (r, cm) = (secure_route(), ca_config_map("ca"));
    let p = policy("secure-tls", T0, ON_HTTPS, WITH_CA);
    let secret = tls_secret("shop", "client", true);
    let dag = dag_of(&[CLASS, &gw, SECURE, &r, &cm, &p, &secret]);
    assert_eq!(
        gateway_conds(&dag),
        [
            "Accepted=true/Accepted",
            "Programmed=true/Programmed",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
    let tls = cluster_of(&dag, "/").upstream_tls.as_deref().unwrap();
    assert_eq!(tls.client_secret.as_deref(), Some("shop/client/client"));
    assert_eq!(
        dag.secrets["shop/client/client"].kind,
        SecretKind::ClientCertificate
    );
    // A backend without TLS gets no certificate.
    assert!(cluster_of(&dag, "/alt").upstream_tls.is_none());
}

#[test]
fn a_client_certificate_that_does_not_resolve_leaves_the_gateway_accepted() {
    let (r, cm) = (secure_route(), ca_config_map("ca"));
    let p = policy("secure-tls", T0, ON_HTTPS, WITH_CA);
    let usable = tls_secret("shop", "client", true);
    let elsewhere = tls_secret("money", "client", true);
    let empty = tls_secret("shop", "empty", false);
    let grant = "apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: gateways, namespace: money}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: shop}]
  to: [{group: \"\", kind: Secret}]
";
    let cases: [(&str, &[&str], &str, &str); 6] = [
        (
            "{name: missing}",
            &[],
            "InvalidClientCertificateRef",
            "\"shop/missing\" not found",
        ),
        (
            "{group: wrong.group.io, kind: Secret, name: client}",
            &[],
            "InvalidClientCertificateRef",
            "group \"wrong.group.io\"",
        ),
        (
            "{kind: WrongKind, name: client}",
            &[],
            "InvalidClientCertificateRef",
            "kind \"WrongKind\"",
        ),
        (
            "{name: empty}",
            &[],
            "InvalidClientCertificateRef",
            "not a usable TLS certificate",
        ),
        (
            "{name: client, namespace: money}",
            &[],
            "RefNotPermitted",
            "no ReferenceGrant",
        ),
        (
            "{name: client, namespace: money}",
            &[grant],
            "ResolvedRefs",
            "",
        ),
    ];
    for (client, more, reason, message) in cases {
        let gw = gateway_with_client(client);
        let mut docs = vec![CLASS, &gw, SECURE, &r, &cm, &p, &usable, &elsewhere, &empty];
        docs.extend(more);
        let dag = dag_of(&docs);
        let c = gateway_conds(&dag);
        assert_eq!(c[0], "Accepted=true/Accepted", "{client}");
        let ok = reason == "ResolvedRefs";
        assert_eq!(c[2], format!("ResolvedRefs={ok}/{reason}"), "{client}");
        let s = status(&dag, Kind::Gateway, "shop", "edge");
        let m = &s.gateway.as_ref().unwrap().conditions[2].message;
        assert!(m.contains(message), "{client}: {m}");
        if !ok {
            assert!(m.contains("spec.tls.backend.clientCertificateRef"), "{m}");
            let tls = cluster_of(&dag, "/").upstream_tls.as_deref().unwrap();
            assert_eq!(tls.client_secret, None, "{client}");
        }
    }
}

#[test]
fn incremental_builds_follow_policies_and_their_config_maps() {
    let gw = gateway_with_client("{name: client}");
    let r = secure_route();
    let p = policy("secure-tls", T0, ON_HTTPS, WITH_CA);
    let secret = tls_secret("shop", "client", true);
    let before = snapshot(&[CLASS, &gw, SECURE, &r, &p, &secret]);
    let cm = ca_config_map("ca");
    let after = snapshot(&[CLASS, &gw, SECURE, &r, &p, &secret, &cm]);
    let options = Options::default();
    let mut inc = incremental::Incremental::new(options.clone());
    let (first, _) = inc.build(None, &before);
    assert_eq!(first, build(&before, &options));
    let (second, _) = inc.build(Some((&before, &first)), &after);
    assert_eq!(second, build(&after, &options));
    assert!(cluster_of(&second, "/").upstream_tls.is_some());
    // And back: the CA and the client certificate leave the model with the cluster.
    let (third, _) = inc.build(Some((&after, &second)), &before);
    assert_eq!(third, build(&before, &options));
    assert!(!third.secrets.contains_key("shop/client/client"));
}

#[test]
fn a_policy_sluice_cannot_serve_is_invalid_and_its_backends_get_no_plaintext() {
    let gw = gateway("sluice", None, "Same");
    let (r, cm) = (secure_route(), ca_config_map("ca"));
    for (validation, message) in [
        (
            "{wellKnownCACertificates: System, hostname: secure.example.com}",
            "wellKnownCACertificates: \"System\" is not supported",
        ),
        (
            "{caCertificateRefs: [{group: \"\", kind: ConfigMap, name: ca}], hostname: \"\"}",
            "spec.validation.hostname",
        ),
    ] {
        let p = policy("odd", T0, ON_HTTPS, validation);
        let dag = dag_of(&[CLASS, &gw, SECURE, &r, &cm, &p]);
        assert_eq!(
            ancestors(&dag, "odd")[0].1[0],
            "Accepted=false/Invalid",
            "{validation}"
        );
        let s = status(&dag, Kind::BackendTlsPolicy, "shop", "odd");
        let m = &s.gateway.as_ref().unwrap().ancestors.as_ref().unwrap()[0].conditions[0].message;
        assert!(m.contains(message), "{m}");
        let action = forwards_to(shop_route(&dag, "/"));
        assert!(action[0].starts_with("500: "), "{action:?}");
    }
}

/// A GRPCRoute's backend under a policy: HTTP/2 inside the TLS (it speaks h2c without one).
#[test]
fn a_grpc_backend_under_a_policy_gets_http2_over_tls() {
    let gw = gateway("sluice", None, "Same");
    let cm = ca_config_map("ca");
    let p = policy("secure-tls", T0, ON_HTTPS, WITH_CA);
    let grpc = grpc_route("  - backendRefs: [{name: secure, port: 443}]\n");
    let dag = dag_of(&[CLASS, &gw, SECURE, &grpc, &cm, &p]);
    let r = &dag.vhosts["grpc.example.com"].routes[0];
    let RouteAction::Forward(cs) = &r.action else {
        panic!("{:?}", r.action);
    };
    let c = &dag.clusters[&cs[0].cluster];
    assert_eq!(c.protocol, UpstreamProtocol::H2);
    assert_eq!(c.upstream_tls.as_deref().unwrap().sni, "secure.example.com");
    assert_eq!(ancestors(&dag, "secure-tls")[0].0, "shop/edge");
}
