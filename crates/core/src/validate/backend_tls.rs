//! BackendTLSPolicy (`gateway.networking.k8s.io/v1`): the single-object rules the webhook and
//! the build share. What depends on other objects (a CA ConfigMap that is missing or holds no
//! certificate, a caCertificateRef of another kind, two policies on one Service port) is said in
//! the policy's status instead (`dag::backend_tls`), as the Gateway API asks.

use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicy, BackendTlsPolicyValidationSubjectAltNamesType as SanType,
};

use super::common::{validate_dns1123_label, validate_hostname};
use super::{FieldError, Verdict, quote};

/// The rules of one BackendTLSPolicy: its targets are Services, it trusts either ConfigMaps of
/// CA certificates or a well-known set (not both, not neither; sluice has no well-known set of
/// its own, a warning),
/// its hostname is a DNS name and each subject alternative name carries the field its type names.
pub fn validate_backend_tls_policy(p: &BackendTlsPolicy) -> Verdict {
    let mut v = Verdict::default();
    if p.spec.target_refs.is_empty() {
        v.error(FieldError::required(
            "spec.targetRefs",
            "name the Service whose backends Envoy speaks TLS to (group \"\", kind Service)",
        ));
    }
    for (i, t) in p.spec.target_refs.iter().enumerate() {
        if !t.group.is_empty() || t.kind != "Service" {
            v.error(FieldError::spec(
                format!("spec.targetRefs[{i}]"),
                format!(
                    "kind {} of group {} is not a target sluice applies a BackendTLSPolicy to; target a Service (group \"\", kind Service)",
                    quote(&t.kind),
                    quote(&t.group)
                ),
            ));
        }
        if let Some(section) = &t.section_name
            && let Err(e) = validate_dns1123_label(
                format!("spec.targetRefs[{i}].sectionName"),
                section,
                "Service port name",
            )
        {
            v.error(e);
        }
    }
    let val = &p.spec.validation;
    let refs = val.ca_certificate_refs.as_deref().unwrap_or_default();
    match (refs.is_empty(), val.well_known_ca_certificates.as_deref()) {
        (false, Some(w)) => v.error(FieldError::spec(
            "spec.validation",
            format!(
                "sets both caCertificateRefs and wellKnownCACertificates ({}); keep one: caCertificateRefs (ConfigMaps with the CA certificates under ca.crt)",
                quote(w)
            ),
        )),
        // Valid for the Gateway API, and another implementation may serve it: a warning (the
        // policy is not accepted by sluice, its status says so).
        (true, Some(w)) => v.warn(well_known_unsupported(w)),
        (true, None) => v.error(FieldError::required(
            "spec.validation.caCertificateRefs",
            "name a ConfigMap holding the PEM certificates of the CA that signed the backend's certificate under ca.crt",
        )),
        (false, None) => {}
    }
    if let Err(e) = validate_hostname("spec.validation.hostname", &val.hostname, false) {
        v.error(e);
    }
    for (i, san) in val.subject_alt_names.iter().flatten().enumerate() {
        let path = format!("spec.validation.subjectAltNames[{i}]");
        match (&san.r#type, san.hostname.as_deref(), san.uri.as_deref()) {
            (SanType::Hostname, Some(h), None) => {
                if let Err(e) = validate_hostname(format!("{path}.hostname"), h, true) {
                    v.error(e);
                }
            }
            (SanType::Uri, None, Some(u)) => {
                if let Err(why) = check_uri(u) {
                    v.error(FieldError::spec(
                        format!("{path}.uri"),
                        format!("{} {why}", quote(u)),
                    ));
                }
            }
            (SanType::Hostname, _, _) => v.error(FieldError::spec(
                path,
                "of type Hostname sets hostname (a DNS name) and no uri",
            )),
            (SanType::Uri, _, _) => v.error(FieldError::spec(
                path,
                "of type URI sets uri (like \"spiffe://example.com/id\") and no hostname",
            )),
        }
    }
    v
}

/// Why sluice does not accept a policy trusting a well-known CA set (`value`).
pub fn well_known_unsupported(value: &str) -> String {
    format!(
        "spec.validation.wellKnownCACertificates: {} is not supported: sluice trusts no well-known CA set for backends; put the CA certificates in a ConfigMap under ca.crt and name it in spec.validation.caCertificateRefs",
        quote(value)
    )
}

/// Whether a subject alternative name of type URI is a URI Envoy can compare: a scheme, `:`,
/// and no whitespace or control characters.
fn check_uri(u: &str) -> Result<(), &'static str> {
    let Some((scheme, rest)) = u.split_once(':') else {
        return Err("must be a URI with a scheme, like \"spiffe://example.com/id\"");
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok || rest.is_empty() {
        return Err("must be a URI with a scheme, like \"spiffe://example.com/id\"");
    }
    if u.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not hold whitespace or control characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(spec: serde_json::Value) -> BackendTlsPolicy {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "BackendTLSPolicy",
            "metadata": {"name": "p", "namespace": "shop"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let v = validate_backend_tls_policy(&policy(spec));
        v.errors.iter().map(ToString::to_string).collect()
    }

    const TARGET: &str =
        r#"[{"group": "", "kind": "Service", "name": "web", "sectionName": "https"}]"#;

    fn spec(validation: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "targetRefs": serde_json::from_str::<serde_json::Value>(TARGET).unwrap(),
            "validation": validation,
        })
    }

    #[test]
    fn a_policy_with_a_ca_configmap_and_a_hostname_is_allowed() {
        let e = errors(spec(serde_json::json!({
            "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
            "hostname": "web.example.com",
            "subjectAltNames": [
                {"type": "Hostname", "hostname": "*.example.com"},
                {"type": "URI", "uri": "spiffe://example.com/web"}
            ]
        })));
        assert!(e.is_empty(), "{e:?}");
    }

    #[test]
    fn both_trust_sources_are_refused_naming_the_field_and_the_fix() {
        let e = errors(spec(serde_json::json!({
            "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
            "wellKnownCACertificates": "System",
            "hostname": "web.example.com"
        })));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("spec.validation"), "{}", e[0]);
        assert!(e[0].contains("\"System\""), "{}", e[0]);
        assert!(e[0].contains("keep one"), "{}", e[0]);
    }

    #[test]
    fn well_known_cas_alone_are_a_warning_and_no_trust_at_all_is_refused() {
        let v = validate_backend_tls_policy(&policy(spec(serde_json::json!({
            "wellKnownCACertificates": "System", "hostname": "web.example.com"
        }))));
        assert!(v.errors.is_empty(), "{:?}", v.errors);
        assert!(
            v.warnings[0].contains("wellKnownCACertificates: \"System\" is not supported"),
            "{:?}",
            v.warnings
        );
        assert!(
            v.warnings[0].contains("caCertificateRefs"),
            "{:?}",
            v.warnings
        );
        let e = errors(spec(serde_json::json!({"hostname": "web.example.com"})));
        assert!(e[0].contains("spec.validation.caCertificateRefs"), "{e:?}");
    }

    #[test]
    fn a_target_that_is_not_a_service_is_refused() {
        let e = errors(serde_json::json!({
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}],
            "validation": {
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
                "hostname": "web.example.com"
            }
        }));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("spec.targetRefs[0]"), "{}", e[0]);
        assert!(e[0].contains("\"Gateway\""), "{}", e[0]);
        assert!(e[0].contains("target a Service"), "{}", e[0]);
    }

    #[test]
    fn an_empty_or_wildcard_hostname_is_refused() {
        for bad in ["", "*.example.com", "10.0.0.1", "web.example.com:443"] {
            let e = errors(spec(serde_json::json!({
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
                "hostname": bad
            })));
            assert_eq!(e.len(), 1, "{bad}: {e:?}");
            assert!(e[0].contains("spec.validation.hostname"), "{}", e[0]);
            assert!(e[0].contains("DNS name"), "{}", e[0]);
        }
    }

    #[test]
    fn subject_alt_names_carry_the_field_their_type_names() {
        let e = errors(spec(serde_json::json!({
            "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
            "hostname": "web.example.com",
            "subjectAltNames": [
                {"type": "Hostname", "uri": "spiffe://x/y"},
                {"type": "URI", "uri": "no scheme"},
                {"type": "Hostname", "hostname": "bad host"}
            ]
        })));
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].contains("subjectAltNames[0]") && e[0].contains("Hostname"));
        assert!(e[1].contains("subjectAltNames[1].uri") && e[1].contains("scheme"));
        assert!(e[2].contains("subjectAltNames[2].hostname"));
    }
}
