//! Secure backends (docs/ingressroute.md, "Secure backends"): the clusters of `https` and
//! `https2` backends, the CA secrets they verify with, and the `BackendTLSVerified` condition.

use crate::api::status::{COND_BACKEND_TLS_VERIFIED, reason};
use crate::dag::incremental::Incremental;
use crate::dag::{self, Dag, Options};
use crate::store::Snapshot;

use super::*;

/// A CA certificate's PEM (self-signed, as a CA's own certificate is).
fn ca_pem(cn: &str) -> String {
    rcgen::generate_simple_self_signed(vec![cn.to_string()])
        .unwrap()
        .cert
        .pem()
}

/// Service `web/api` (port 443) with one endpoint, Secret `web/api-ca` holding `ca`, and a
/// root IngressRoute v1 `web/root` whose one route has these backends (YAML flow mappings).
fn manifests(backends: &[&str], ca: &str) -> String {
    let ca = ca.replace('\n', "\\n");
    format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: web}}
spec: {{ports: [{{name: https, port: 443}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: api-1, namespace: web, labels: {{kubernetes.io/service-name: api}}}}
addressType: IPv4
ports: [{{name: https, port: 8443}}]
endpoints: [{{addresses: [10.0.0.1], conditions: {{ready: true}}}}]
---
apiVersion: v1
kind: Secret
metadata: {{name: api-ca, namespace: web}}
type: kubernetes.io/tls
stringData: {{ca.crt: "{ca}", tls.crt: "", tls.key: ""}}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: root, namespace: web}}
spec:
  virtualhost: {{fqdn: api.example.com}}
  routes:
  - services: [{}]
"#,
        backends.join(", ")
    )
}

const VERIFIED: &str =
    "{https: api, port: 443, validation: {caSecret: api-ca, subjectName: API.example.com}}";
const UNVERIFIED: &str = "{https: api, port: 443}";

fn root() -> ObjectRef {
    ObjectRef::new(Kind::IngressRouteV1, "web", "root")
}

fn build(yaml: &str) -> Dag {
    dag::build(&Snapshot::from_test_yaml(yaml), &Options::default())
}

/// The route's clusters, by name.
fn forwarded(d: &Dag) -> Vec<Arc<Cluster>> {
    let route = &d.vhosts["api.example.com"].routes[0];
    let RouteAction::Forward(cs) = &route.action else {
        panic!("{:?}", route.action)
    };
    cs.iter().map(|c| d.clusters[&c.cluster].clone()).collect()
}

#[test]
fn a_tls_backend_without_validation_sends_the_services_name_and_is_flagged() {
    let d = build(&manifests(&[UNVERIFIED], &ca_pem("ca")));
    let [c] = &forwarded(&d)[..] else { panic!() };
    assert_eq!(c.protocol, UpstreamProtocol::Https);
    let tls = c.upstream_tls.as_deref().unwrap();
    assert_eq!(tls.sni, "api.web.svc");
    assert_eq!(tls.validation, None);
    assert!(d.secrets.is_empty(), "{:?}", d.secrets);
    let s = &d.statuses[&root()];
    assert_eq!(s.state, State::Valid);
    let cond = s.condition.as_deref().unwrap();
    assert_eq!(
        (cond.type_, cond.status, cond.reason),
        (COND_BACKEND_TLS_VERIFIED, false, reason::NOT_VERIFIED)
    );
    assert_eq!(
        cond.message,
        "Envoy accepts any certificate from spec.routes[0].services[0] (api, SNI api.web.svc): add validation {caSecret, subjectName} to verify it"
    );
}

#[test]
fn a_verified_tls_backend_gets_its_own_cluster_and_the_ca_secret() {
    let ca = ca_pem("backend CA");
    let d = build(&manifests(&[VERIFIED, UNVERIFIED], &ca));
    let [verified, plain] = &forwarded(&d)[..] else {
        panic!()
    };
    // The same Service port, one cluster per validation setting.
    assert_ne!(verified.name, plain.name);
    assert!(verified.name.starts_with("web/api/443/"));
    let tls = verified.upstream_tls.as_deref().unwrap();
    assert_eq!(
        *tls,
        UpstreamTls {
            sni: "api.example.com".into(),
            validation: Some(UpstreamValidation {
                ca_secret: "web/api-ca/ca.crt".into(),
                subject_name: "api.example.com".into(),
                subject_alt_names: Vec::new(),
            }),
            client_secret: None,
        }
    );
    let secret = &d.secrets["web/api-ca/ca.crt"];
    assert_eq!(secret.kind, SecretKind::TrustedCa);
    assert_eq!(&*secret.cert_pem, ca);
    assert_eq!(d.secrets.len(), 1);
    let cond = d.statuses[&root()].condition.clone().unwrap();
    assert!(!cond.status, "one backend is not verified");
    assert_eq!(
        cond.message,
        "Envoy accepts any certificate from spec.routes[0].services[1] (api, SNI api.web.svc): add validation {caSecret, subjectName} to verify it; verified: spec.routes[0].services[0] (api) against CA Secret web/api-ca (ca.crt) and subject name api.example.com (also its SNI)"
    );

    let d = build(&manifests(&[VERIFIED], &ca));
    let cond = d.statuses[&root()].condition.clone().unwrap();
    assert_eq!((cond.status, cond.reason), (true, reason::VERIFIED));
    assert_eq!(
        cond.message,
        "backend certificates are verified: spec.routes[0].services[0] (api) against CA Secret web/api-ca (ca.crt) and subject name api.example.com (also its SNI)"
    );
    // Another subject name is another cluster.
    let other = VERIFIED.replace("API.example.com", "other.example.com");
    let d2 = build(&manifests(&[&other], &ca));
    assert_ne!(forwarded(&d2)[0].name, verified.name);
    // A route without TLS backends has no such condition.
    let d = build(&manifests(&["{http: api, port: 443}"], &ca));
    assert_eq!(d.statuses[&root()].condition, None);
}

#[test]
fn a_missing_or_unusable_ca_secret_makes_the_route_invalid_and_the_backend_unused() {
    let missing = VERIFIED.replace("api-ca", "gone");
    let d = build(&manifests(&[&missing], &ca_pem("ca")));
    let s = &d.statuses[&root()];
    assert_eq!(s.state, State::Invalid);
    assert_eq!(s.messages[0].reason, reason::SECRET_NOT_FOUND);
    assert_eq!(
        s.messages[0].message,
        "spec.routes[0].services[0].validation.caSecret: CA Secret \"web/gone\" not found; create it in namespace \"web\" with the PEM certificates of the CA that signed the backend's certificate under ca.crt (in a cluster, sluice reads only Secrets of type kubernetes.io/tls, as cert-manager writes them)"
    );
    let route = &d.vhosts["api.example.com"].routes[0];
    assert!(
        matches!(&route.action, RouteAction::Unavailable(m) if m.starts_with("CA Secret")),
        "never reached unverified: {:?}",
        route.action
    );
    assert!(d.clusters.is_empty() && d.secrets.is_empty());

    let d = build(&manifests(&[VERIFIED], "not a certificate"));
    let s = &d.statuses[&root()];
    assert_eq!(s.state, State::Invalid);
    assert_eq!(s.messages[0].reason, reason::SECRET_INVALID);
    assert_eq!(
        s.messages[0].message,
        "spec.routes[0].services[0].validation.caSecret: Secret \"web/api-ca\" holds no usable CA certificates (ca.crt holds no PEM certificate); put the PEM certificates of the CA that signed the backend's certificate under ca.crt"
    );
    // The other backend of the route is still served.
    let d = build(&manifests(&[&missing, UNVERIFIED], &ca_pem("ca")));
    assert_eq!(forwarded(&d).len(), 1);
}

#[test]
fn envoy_gets_the_sni_the_subject_name_and_the_ca_by_sds() {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        UpstreamTlsContext, common_tls_context::ValidationContextType, secret,
    };
    use prost::Message;
    let ca = ca_pem("backend CA");
    let d = build(&manifests(&[VERIFIED, UNVERIFIED], &ca));
    let res = crate::translate::build(&d, &Default::default());
    let tls_of = |name: &str| -> UpstreamTlsContext {
        let c = res.clusters.iter().find(|c| c.name == name).unwrap();
        let ts = c.transport_socket.as_ref().unwrap();
        let Some(
            envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(a),
        ) = &ts.config_type
        else {
            panic!()
        };
        UpstreamTlsContext::decode(&a.value[..]).unwrap()
    };
    let [verified, plain] = &forwarded(&d)[..] else {
        panic!()
    };
    let tls = tls_of(&verified.name);
    assert_eq!(tls.sni, "api.example.com");
    let common = tls.common_tls_context.unwrap();
    assert_eq!(common.alpn_protocols, ["http/1.1"]);
    let Some(ValidationContextType::CombinedValidationContext(v)) = common.validation_context_type
    else {
        panic!()
    };
    let sds = v.validation_context_sds_secret_config.unwrap();
    assert_eq!(sds.name, "web/api-ca/ca.crt");
    assert!(sds.sds_config.is_some(), "over ADS");
    let sans = v
        .default_validation_context
        .unwrap()
        .match_typed_subject_alt_names;
    assert_eq!(sans.len(), 1);
    assert_eq!(sans[0].san_type, 2, "DNS");
    assert_eq!(
        sans[0].matcher.as_ref().unwrap().match_pattern,
        Some(
            envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern::Exact(
                "api.example.com".into()
            )
        )
    );
    let plain = tls_of(&plain.name);
    assert_eq!(plain.sni, "api.web.svc");
    assert_eq!(
        plain.common_tls_context.unwrap().validation_context_type,
        None
    );
    let [s] = &res.secrets[..] else { panic!() };
    assert_eq!(s.name, "web/api-ca/ca.crt");
    let Some(secret::Type::ValidationContext(vc)) = &s.r#type else {
        panic!()
    };
    let trusted = vc.trusted_ca.as_ref().unwrap().specifier.as_ref().unwrap();
    assert_eq!(
        *trusted,
        envoy_types::pb::envoy::config::core::v3::data_source::Specifier::InlineString(ca)
    );
}

#[test]
fn the_status_writer_writes_backend_tls_verified_beside_valid_and_ready() {
    use crate::k8s::state::Observed;
    use crate::k8s::status::{Plan, Verdict, plan};
    let d = build(&manifests(&[UNVERIFIED], &ca_pem("ca")));
    let s = &d.statuses[&root()];
    let observed = Observed::default();
    let Plan::Apply(v) = plan(
        Kind::IngressRouteV1,
        Verdict::Dag(s),
        &observed,
        None,
        "2025-01-01T00:00:00Z",
    ) else {
        panic!()
    };
    let conditions = v["conditions"].as_array().unwrap();
    let types: Vec<&str> = conditions
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Valid", "Ready", "BackendTLSVerified"]);
    assert_eq!(conditions[0]["status"], "True");
    assert_eq!(conditions[2]["status"], "False");
    assert_eq!(conditions[2]["reason"], "NotVerified");
    assert!(
        conditions[2]["message"]
            .as_str()
            .unwrap()
            .contains("SNI api.web.svc")
    );
}

/// Incremental builds keep the CA secrets a full build has: added with the first cluster that
/// verifies with them, changed with the Secret, removed with the last such cluster.
#[test]
fn incremental_builds_keep_the_ca_secrets_of_the_clusters_in_use() {
    let options = Options::default();
    let mut inc = Incremental::new(options.clone());
    let (a, b) = (ca_pem("a"), ca_pem("b"));
    let steps = [
        manifests(&[UNVERIFIED], &a),
        manifests(&[VERIFIED], &a),
        manifests(&[VERIFIED], &b),
        manifests(&[VERIFIED, UNVERIFIED], &b),
        manifests(&[UNVERIFIED], &b),
        manifests(&[&VERIFIED.replace("api-ca", "gone")], &b),
        manifests(&[VERIFIED], &a),
    ];
    // Other roots, so that a change of the one above is built alone.
    let others: String = (0..6)
        .map(|i| {
            format!(
                "---\napiVersion: projectcontour.io/v1\nkind: IngressRoute\nmetadata: {{name: o{i}, namespace: other}}\nspec:\n  virtualhost: {{fqdn: o{i}.example.com}}\n  routes: [{{services: [{{http: app, port: 80}}]}}]\n"
            )
        })
        .collect();
    let mut prev: Option<(Snapshot, Dag)> = None;
    for (i, yaml) in steps.iter().enumerate() {
        let next = Snapshot::from_test_yaml(&format!("{yaml}{others}"));
        let (got, kind) = inc.build(prev.as_ref().map(|(s, d)| (s, d)), &next);
        if i > 0 {
            assert!(
                matches!(kind, dag::incremental::BuildKind::Partial { objects: 1 }),
                "step {i}: {kind:?}"
            );
        }
        let want = dag::build(&next, &options);
        assert_eq!(got.secrets, want.secrets, "step {i}");
        assert_eq!(got.clusters, want.clusters, "step {i}");
        assert_eq!(got.statuses, want.statuses, "step {i}");
        prev = Some((next, got));
    }
    let (_, last) = prev.unwrap();
    assert_eq!(&*last.secrets["web/api-ca/ca.crt"].cert_pem, a);
}
