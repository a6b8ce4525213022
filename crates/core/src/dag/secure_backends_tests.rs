//! Secure backends (docs/ingressroute.md, "Secure backends"): the clusters of `https` and
//! `https2` backends, the CA secrets they verify with, and the `BackendTLSVerified` condition.

use crate::api::status::{COND_BACKEND_TLS_VERIFIED, reason};
use crate::dag::incremental::Incremental;
use crate::dag::{self, Dag, Options};
use crate::store::Snapshot;

use super::*;

use crate::synth::secure_backends::{UNVERIFIED, VERIFIED, ca_pem, manifests};

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
        s.messages[0].to_string(),
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
        s.messages[0].to_string(),
        "spec.routes[0].services[0].validation.caSecret: Secret \"web/api-ca\" holds no usable CA certificates (ca.crt holds no PEM certificate); put the PEM certificates of the CA that signed the backend's certificate under ca.crt"
    );
    // The other backend of the route is still served.
    let d = build(&manifests(&[&missing, UNVERIFIED], &ca_pem("ca")));
    assert_eq!(forwarded(&d).len(), 1);
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
