//! Frontend client certificate validation of Gateways (`spec.tls.frontend`): Envoy asks the
//! clients of a Gateway's HTTPS listeners for a certificate and verifies it against the CA
//! certificates of ConfigMaps (key `ca.crt`).
//!
//! - `perPort[]` configures the HTTPS listeners of one port; `default` those of every other
//!   port. HTTP, TLS and TCP listeners are not affected.
//! - The CA certificates of every reference that resolves are one bundle, sent to Envoy by SDS.
//!   A reference that does not resolve makes the port's HTTPS listeners `ResolvedRefs=False`
//!   (`InvalidCACertificateRef`: ConfigMap missing or without usable `ca.crt`;
//!   `InvalidCACertificateKind`: not a ConfigMap; `RefNotPermitted`: another namespace without a
//!   ReferenceGrant). When none resolves, the listeners are `Accepted=False/NoValidCACertificate`
//!   and not programmed: Envoy does not serve them rather than serve them without validation.
//! - `mode: AllowInsecureFallback` lets in clients without a certificate or with one that does
//!   not verify; the Gateway then has `InsecureFrontendValidationMode=True/ConfigurationChanged`.
//! - Served only where a Gateway has an address of its own (`--gateway-addresses`), where each
//!   port is an Envoy listener of its own; on Envoy's shared HTTPS listener, a port is not
//!   the Gateway's alone, so such a listener is `Accepted=False/UnsupportedValue`.
//!
//! The rules are written down in `docs/gateway-api.md`, "Frontend client certificate validation".

use std::collections::BTreeMap;
use std::sync::Arc;

use gateway_api::apis::experimental::gateways::{
    Gateway, GatewayTlsFrontendDefaultValidationMode as DefaultMode,
    GatewayTlsFrontendPerPortTlsValidationMode as PortMode,
};

use super::Builder;
use super::gateway_common::{cond, condition, granted, refs_resolved};
use super::model::{ClientValidation, GatewayCondition};
use crate::api::ObjKey;
use crate::store::{CaBundle, Snapshot};
use crate::validate::FieldError;

/// Condition types and reasons of frontend client certificate validation.
pub mod reason {
    pub const INVALID_CA_CERTIFICATE_REF: &str = "InvalidCACertificateRef";
    pub const INVALID_CA_CERTIFICATE_KIND: &str = "InvalidCACertificateKind";
    pub const REF_NOT_PERMITTED: &str = "RefNotPermitted";
    pub const NO_VALID_CA_CERTIFICATE: &str = "NoValidCACertificate";
    /// The Gateway's condition while a port lets clients in without a valid certificate.
    pub const INSECURE_FRONTEND_VALIDATION_MODE: &str = "InsecureFrontendValidationMode";
    pub const CONFIGURATION_CHANGED: &str = "ConfigurationChanged";
}

/// One port's (or the default's) validation, resolved.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PortValidation {
    /// What Envoy verifies with; None when no CA reference resolves.
    pub(super) validation: Option<ClientValidation>,
    /// The references that do not resolve: the first one's reason, every message.
    pub(super) problem: Option<FieldError>,
}

/// A Gateway's `spec.tls.frontend`, resolved.
#[derive(Default)]
pub(super) struct Frontend {
    default: Option<PortValidation>,
    /// By port; None for an entry without `validation`, which overrides the default with none.
    per_port: BTreeMap<i32, Option<PortValidation>>,
    /// Some port (or the default) is `AllowInsecureFallback`.
    insecure: bool,
}

impl Frontend {
    /// The validation of the HTTPS listeners on `port`: its `perPort` entry, else the default;
    /// None when neither configures one.
    pub(super) fn for_port(&self, port: i32) -> Option<&PortValidation> {
        match self.per_port.get(&port) {
            Some(entry) => entry.as_ref(),
            None => self.default.as_ref(),
        }
    }

    /// The Gateway's `InsecureFrontendValidationMode` condition: Some while a port (or the
    /// default) is `AllowInsecureFallback`; absent otherwise, as the Gateway API asks.
    pub(super) fn insecure_condition(&self) -> Option<GatewayCondition> {
        self.insecure.then(|| {
            condition(
                reason::INSECURE_FRONTEND_VALIDATION_MODE,
                true,
                reason::CONFIGURATION_CHANGED,
                "spec.tls.frontend: mode AllowInsecureFallback lets clients without a valid certificate in; set AllowValidOnly to refuse them",
            )
        })
    }
}

/// What the frontend validation makes of an HTTPS listener.
pub(super) enum ForListener {
    /// Nothing configured for its port.
    Unconfigured,
    /// Served with this validation; the references that do not resolve (its
    /// `ResolvedRefs=False`), when some do not.
    Validated(ClientValidation, Option<FieldError>),
    /// Not accepted, with these conditions: rather than served without the validation asked
    /// for.
    Refused(Vec<GatewayCondition>),
}

impl Frontend {
    /// [`ForListener`] of an HTTPS listener on `port`, of a Gateway with an address of its own
    /// (`own_address`) or served on Envoy's shared HTTPS listener.
    pub(super) fn for_listener(&self, port: i32, own_address: bool) -> ForListener {
        let Some(v) = self.for_port(port) else {
            return ForListener::Unconfigured;
        };
        if !own_address {
            let message = format!(
                "spec.tls.frontend: client certificate validation of port {port} needs the Gateway to have an address of its own (sluice serve --gateway-addresses); on Envoy's shared HTTPS listener the port is not the Gateway's alone"
            );
            return ForListener::Refused(vec![
                condition(
                    cond::ACCEPTED,
                    false,
                    cond::UNSUPPORTED_VALUE,
                    message.clone(),
                ),
                condition(cond::PROGRAMMED, false, cond::INVALID, message),
                refs_resolved(),
            ]);
        }
        match (&v.validation, &v.problem) {
            (Some(validation), problem) => {
                ForListener::Validated(validation.clone(), problem.clone())
            }
            (None, problem) => {
                let why = problem.clone().unwrap_or_else(|| {
                    FieldError::new(
                        "spec.tls.frontend",
                        reason::INVALID_CA_CERTIFICATE_REF,
                        "no CA certificate reference",
                    )
                });
                let message = format!(
                    "no CA certificate of the port's client certificate validation resolves: {why}"
                );
                ForListener::Refused(vec![
                    condition(
                        cond::ACCEPTED,
                        false,
                        reason::NO_VALID_CA_CERTIFICATE,
                        message.clone(),
                    ),
                    condition(cond::PROGRAMMED, false, cond::INVALID, message),
                    GatewayCondition::failed(cond::RESOLVED_REFS, &why),
                ])
            }
        }
    }
}

/// A CA reference, whichever part of `spec.tls.frontend` it is of.
struct CaRef<'a> {
    group: &'a str,
    kind: &'a str,
    name: &'a str,
    namespace: Option<&'a str>,
}

/// Reads a Gateway's `spec.tls.frontend`: each configuration's CA references looked up (the
/// ConfigMaps in the builder's backing snapshot, their certificates added to the builder's
/// secrets).
pub(super) fn frontend_validation(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    key: &ObjKey,
    gw: &Gateway,
) -> Frontend {
    let mut out = Frontend::default();
    let Some(frontend) = gw.spec.tls.as_ref().and_then(|t| t.frontend.as_ref()) else {
        return out;
    };
    if let Some(v) = &frontend.default.validation {
        let insecure = v.mode == Some(DefaultMode::AllowInsecureFallback);
        let refs: Vec<CaRef<'_>> = (v.ca_certificate_refs.iter())
            .map(|r| CaRef {
                group: &r.group,
                kind: &r.kind,
                name: &r.name,
                namespace: r.namespace.as_deref(),
            })
            .collect();
        let field = "spec.tls.frontend.default.validation.caCertificateRefs";
        out.default = Some(resolve(b, snapshot, key, field, "default", &refs, insecure));
        out.insecure |= insecure;
    }
    for (i, p) in frontend.per_port.iter().flatten().enumerate() {
        // Two entries for one port: the first counts (the webhook refuses the second).
        if out.per_port.contains_key(&p.port) {
            continue;
        }
        // An entry without validation overrides the default: that port validates no client.
        let Some(v) = &p.tls.validation else {
            out.per_port.insert(p.port, None);
            continue;
        };
        let insecure = v.mode == Some(PortMode::AllowInsecureFallback);
        let refs: Vec<CaRef<'_>> = (v.ca_certificate_refs.iter())
            .map(|r| CaRef {
                group: &r.group,
                kind: &r.kind,
                name: &r.name,
                namespace: r.namespace.as_deref(),
            })
            .collect();
        let field = format!("spec.tls.frontend.perPort[{i}].tls.validation.caCertificateRefs");
        let id = p.port.to_string();
        let resolved = resolve(b, snapshot, key, &field, &id, &refs, insecure);
        out.per_port.insert(p.port, Some(resolved));
        out.insecure |= insecure;
    }
    out
}

/// The id of the CA bundle of one configuration (`part`: `default` or the port) of a Gateway.
fn ca_id(key: &ObjKey, part: &str) -> String {
    format!(
        "{}/{}/Gateway/frontend/{part}/ca.crt",
        key.namespace, key.name
    )
}

/// One configuration's CA references resolved into one bundle (added to the builder's secrets).
fn resolve(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    key: &ObjKey,
    field: &str,
    part: &str,
    refs: &[CaRef<'_>],
    insecure_fallback: bool,
) -> PortValidation {
    let mut pem = String::new();
    let mut problems: Vec<FieldError> = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let field = format!("{field}[{i}]");
        if !r.group.is_empty() || r.kind != "ConfigMap" {
            problems.push(FieldError::new(
                &field,
                reason::INVALID_CA_CERTIFICATE_KIND,
                format!(
                    "kind {:?} of group {:?} is not one sluice reads CA certificates from; name a ConfigMap (group \"\", kind ConfigMap) with them under ca.crt",
                    r.kind, r.group
                ),
            ));
            continue;
        }
        let ns = r.namespace.unwrap_or(&key.namespace);
        if ns != &*key.namespace
            && !granted(snapshot, "Gateway", &key.namespace, "ConfigMap", ns, r.name)
        {
            problems.push(FieldError::new(
                &field,
                reason::REF_NOT_PERMITTED,
                format!(
                    "ConfigMap \"{ns}/{}\" is in another namespace and no ReferenceGrant there lets Gateways of {:?} use it; add one, or use a ConfigMap of the Gateway's namespace",
                    r.name, &*key.namespace
                ),
            ));
            continue;
        }
        let cm = ObjKey::new(ns, r.name);
        match b.backing.config_maps.get(&cm).map(|c| &c.ca) {
            None => problems.push(FieldError::new(
                &field,
                reason::INVALID_CA_CERTIFICATE_REF,
                format!(
                    "ConfigMap {:?} not found; create it with the PEM certificates of the CA that signs the clients' certificates under ca.crt",
                    cm.to_string()
                ),
            )),
            Some(CaBundle::Unusable(what)) => problems.push(FieldError::new(
                &field,
                reason::INVALID_CA_CERTIFICATE_REF,
                format!(
                    "ConfigMap {:?} holds no usable CA certificates ({what}); put the PEM certificates of the CA that signs the clients' certificates under ca.crt",
                    cm.to_string()
                ),
            )),
            Some(CaBundle::Usable(certs)) => {
                if !pem.is_empty() && !pem.ends_with('\n') {
                    pem.push('\n');
                }
                pem.push_str(certs);
            }
        }
    }
    let problem = FieldError::joined(&problems);
    let validation = (!pem.is_empty()).then(|| {
        let id = ca_id(key, part);
        b.trusted_ca(&id, Arc::from(pem));
        ClientValidation {
            ca_secret: id,
            insecure_fallback,
        }
    });
    PortValidation {
        validation,
        problem,
    }
}
