//! The single-object rules of a Gateway's frontend client certificate validation
//! (`spec.tls.frontend`) that the webhook applies to Gateways of sluice's class. A Gateway that
//! got in anyway is served as `docs/gateway-api.md` says ("Frontend client certificate
//! validation"): a `perPort` entry for a port without a listener affects nothing, the first of
//! two entries for one port counts, and a CA reference that is not a ConfigMap makes the port's
//! HTTPS listeners `ResolvedRefs=False/InvalidCACertificateKind`.

use std::collections::BTreeMap;

use gateway_api::apis::experimental::gateways::Gateway;

use super::FieldError;

/// One error per mistake, naming the field, the value and the fix.
pub fn frontend_mistakes(gw: &Gateway) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(frontend) = gw.spec.tls.as_ref().and_then(|t| t.frontend.as_ref()) else {
        return out;
    };
    let kind_error = |field: String, group: &str, kind: &str| {
        FieldError::invalid(
            field,
            &format!("{group}/{kind}"),
            "is not a ConfigMap: name a ConfigMap (group \"\", kind ConfigMap) with the PEM certificates of the clients' CA under ca.crt (sluice reads CA certificates from ConfigMaps only)",
        )
    };
    if let Some(v) = &frontend.default.validation {
        for (i, r) in v.ca_certificate_refs.iter().enumerate() {
            if !r.group.is_empty() || r.kind != "ConfigMap" {
                let field = format!("spec.tls.frontend.default.validation.caCertificateRefs[{i}]");
                out.push(kind_error(field, &r.group, &r.kind));
            }
        }
    }
    let ports: Vec<i32> = gw.spec.listeners.iter().map(|l| l.port).collect();
    let mut seen: BTreeMap<i32, usize> = BTreeMap::new();
    for (i, p) in frontend.per_port.iter().flatten().enumerate() {
        let field = format!("spec.tls.frontend.perPort[{i}]");
        if let Some(first) = seen.insert(p.port, i) {
            out.push(FieldError::invalid(
                format!("{field}.port"),
                &p.port.to_string(),
                format!(
                    "is already configured by spec.tls.frontend.perPort[{first}]: merge the two entries into one"
                ),
            ));
            // Keep the first entry's index for later duplicates.
            seen.insert(p.port, first);
        }
        if !ports.contains(&p.port) {
            let listed: Vec<String> = ports.iter().map(ToString::to_string).collect();
            out.push(FieldError::invalid(
                format!("{field}.port"),
                &p.port.to_string(),
                format!(
                    "is the port of no listener of the Gateway (their ports: {}): fix the port or remove the entry",
                    listed.join(", ")
                ),
            ));
        }
        for (j, r) in (p.tls.validation.iter())
            .flat_map(|v| v.ca_certificate_refs.iter())
            .enumerate()
        {
            if !r.group.is_empty() || r.kind != "ConfigMap" {
                let at = format!("{field}.tls.validation.caCertificateRefs[{j}]");
                out.push(kind_error(at, &r.group, &r.kind));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(frontend: &str) -> Gateway {
        let yaml = format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: shop}}
spec:
  gatewayClassName: sluice
  tls: {{frontend: {frontend}}}
  listeners:
  - {{name: https, protocol: HTTPS, port: 443}}
  - {{name: http, protocol: HTTP, port: 80}}
"
        );
        let docs = crate::manifest::parse_documents("gw.yaml", &yaml).expect("a Gateway");
        match docs.into_iter().next().map(|(_, d)| d) {
            Some(crate::manifest::Document::Object(crate::store::AnyObject::Gateway(g))) => {
                (*g).clone()
            }
            other => panic!("not a Gateway: {other:?}"),
        }
    }

    fn messages(frontend: &str) -> Vec<String> {
        frontend_mistakes(&gateway(frontend))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const CM: &str = "{group: \"\", kind: ConfigMap, name: ca}";

    #[test]
    fn a_valid_frontend_has_no_mistakes() {
        let f = format!(
            "{{default: {{validation: {{caCertificateRefs: [{CM}]}}}}, perPort: [{{port: 443, tls: {{validation: {{caCertificateRefs: [{CM}]}}}}}}, {{port: 80, tls: {{validation: {{caCertificateRefs: [{CM}]}}}}}}]}}"
        );
        assert_eq!(messages(&f), Vec::<String>::new());
    }

    #[test]
    fn each_mistake_names_the_field_the_value_and_the_fix() {
        let f = format!(
            "{{default: {{validation: {{caCertificateRefs: [{{group: \"\", kind: Secret, name: ca}}]}}}},
              perPort: [{{port: 443, tls: {{validation: {{caCertificateRefs: [{CM}]}}}}}},
                        {{port: 443, tls: {{validation: {{caCertificateRefs: [{CM}]}}}}}},
                        {{port: 9443, tls: {{validation: {{caCertificateRefs: [{{group: example.io, kind: ConfigMap, name: ca}}]}}}}}}]}}"
        );
        let m = messages(&f);
        assert_eq!(m.len(), 4, "{m:#?}");
        let has = |parts: &[&str]| {
            assert!(
                m.iter().any(|e| parts.iter().all(|p| e.contains(p))),
                "no error with {parts:?} in {m:#?}"
            )
        };
        has(&[
            "spec.tls.frontend.default.validation.caCertificateRefs[0]",
            "/Secret",
            "ConfigMap",
        ]);
        has(&[
            "spec.tls.frontend.perPort[1].port",
            "443",
            "perPort[0]",
            "merge",
        ]);
        has(&[
            "spec.tls.frontend.perPort[2].port",
            "9443",
            "443, 80",
            "remove the entry",
        ]);
        has(&[
            "spec.tls.frontend.perPort[2].tls.validation.caCertificateRefs[0]",
            "example.io/ConfigMap",
        ]);
    }
}
