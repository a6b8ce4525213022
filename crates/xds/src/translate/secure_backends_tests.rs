//! Secure backends as Envoy gets them: the upstream TLS context of a verified and of an
//! unverified `https` backend, and the CA by SDS (docs/ingressroute.md, "Secure backends").

use std::sync::Arc;

use sluice_core::dag::{self, Cluster, Dag, Options, RouteAction};
use sluice_core::store::Snapshot;
use sluice_core::synth::secure_backends::{UNVERIFIED, VERIFIED, ca_pem, manifests};

fn build(yaml: &str) -> Dag {
    dag::build(&Snapshot::from_test_yaml(yaml), &Options::default())
}

/// The route's clusters, in the route's order.
fn forwarded(d: &Dag) -> Vec<Arc<Cluster>> {
    let route = &d.vhosts["api.example.com"].routes[0];
    let RouteAction::Forward(cs) = &route.action else {
        panic!("{:?}", route.action)
    };
    cs.iter().map(|c| d.clusters[&c.cluster].clone()).collect()
}

#[test]
fn envoy_gets_the_sni_the_subject_name_and_the_ca_by_sds() {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        UpstreamTlsContext, common_tls_context::ValidationContextType, secret,
    };
    use prost::Message;
    let ca = ca_pem("backend CA");
    let d = build(&manifests(&[VERIFIED, UNVERIFIED], &ca));
    let res = super::build(&d, &Default::default());
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
