//! Backend TLS of the Gateway API: BackendTLSPolicies (`gateway.networking.k8s.io/v1`), which
//! make Envoy speak TLS to a Service's backends and verify their certificates, and a Gateway's
//! client certificate (`spec.tls.backend.clientCertificateRef`), which Envoy presents to them.
//!
//! - A policy applies to the Service ports its `targetRefs` name (a port by `sectionName`, else
//!   every port of the Service). Of two policies on one Service port (both with the same
//!   `sectionName`, or both without), the older applies, then the one first by name; the other is
//!   `Accepted=False/Conflicted`. A policy naming the port is more specific than one naming the
//!   Service, and applies to that port instead of it.
//! - Envoy sends `validation.hostname` as SNI and verifies the certificate chains to the CA
//!   certificates of the ConfigMaps of `validation.caCertificateRefs` (key `ca.crt`) and
//!   carries `validation.hostname` as a DNS subject alternative name, or one of
//!   `validation.subjectAltNames` when they are set.
//! - A policy none of whose CA references resolves is `Accepted=False/NoValidCACertificate`, and
//!   the requests to the Service ports it would apply to fail (500 from an HTTPRoute): Envoy does
//!   not speak to the backend without the TLS the policy asks for.
//! - A policy's status has an entry per Gateway a route using one of its Service ports is
//!   attached to (`status.ancestors`), each with its `Accepted` and `ResolvedRefs` conditions.
//!
//! The rules are written down in `docs/gateway-api.md`, "Backend TLS".

use std::collections::BTreeSet;
use std::sync::Arc;

use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicy, BackendTlsPolicyValidation,
    BackendTlsPolicyValidationSubjectAltNamesType as SanType,
};

use super::Builder;
use super::backend_tls_state::{BackendTlsPolicies, PolicyAcc};
use super::gateway_common::{condition, granted};
use super::model::{
    GatewayApiStatus, GatewayCondition, ParentStatus, SubjectAltName, UpstreamValidation,
};
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::{CaBundle, Snapshot};
use crate::validate::FieldError;
use crate::validate::backend_tls::validate_backend_tls_policy;

/// Condition types and reasons of BackendTLSPolicies and of a Gateway's backend TLS.
pub mod reason {
    pub const ACCEPTED: &str = "Accepted";
    pub const RESOLVED_REFS: &str = "ResolvedRefs";
    pub const INVALID: &str = "Invalid";
    pub const CONFLICTED: &str = "Conflicted";
    pub const NO_VALID_CA_CERTIFICATE: &str = "NoValidCACertificate";
    pub const INVALID_CA_CERTIFICATE_REF: &str = "InvalidCACertificateRef";
    pub const INVALID_KIND: &str = "InvalidKind";
    pub const INVALID_CLIENT_CERTIFICATE_REF: &str = "InvalidClientCertificateRef";
    pub const REF_NOT_PERMITTED: &str = "RefNotPermitted";
    /// sluice's own, never in a status: a backend whose BackendTLSPolicy is not accepted (the
    /// route's references resolve; its requests to that backend fail).
    pub const POLICY_NOT_ACCEPTED: &str = "BackendTLSPolicyNotAccepted";
}

/// How a backend of a route is spoken to, by the BackendTLSPolicy of its Service port.
pub(super) enum BackendTls {
    /// No policy applies: as the route says.
    None,
    /// TLS, verified as the policy says.
    Verify(UpstreamValidation),
    /// The policy is not accepted: the backend gets no requests (the message says why).
    Refused(String),
}

/// The id of a policy's CA certificates among the model's secrets:
/// `namespace/name/BackendTLSPolicy/ca.crt`, apart from every Secret's ids (two or three parts;
/// no Kubernetes name has a `/`).
fn ca_id(key: &ObjKey) -> String {
    format!("{}/{}/BackendTLSPolicy/ca.crt", key.namespace, key.name)
}

impl BackendTlsPolicies {
    /// Reads every BackendTLSPolicy of `snapshot`: its single-object rules, its CA references
    /// (ConfigMaps looked up in the builder's backing snapshot, their certificates added to the
    /// builder's secrets) and which policy applies to each target.
    pub(super) fn new(b: &mut Builder<'_>, snapshot: &Snapshot) -> Self {
        let mut out = BackendTlsPolicies::default();
        for (key, p) in &snapshot.backend_tls_policies {
            let at = out.policies.len();
            out.policies.push(read_policy(b, key, p));
            // A policy that is not accepted still claims its Services' ports: their requests
            // fail rather than go without the TLS it asks for.
            let services =
                (p.spec.target_refs.iter()).filter(|t| t.group.is_empty() && t.kind == "Service");
            for t in services {
                let service = ObjKey::new(key.namespace.clone(), t.name.as_str());
                (out.targets
                    .entry((service, t.section_name.clone()))
                    .or_default())
                .push(at);
            }
        }
        // The oldest policy applies, then the first by name (keys are in name order already).
        let created: Vec<_> = (snapshot.backend_tls_policies.values())
            .map(|p| p.metadata.creation_timestamp.clone().map(|t| t.0))
            .collect();
        let created = |i: &usize| (created[*i], *i);
        for ((service, section), candidates) in &mut out.targets {
            candidates.sort_by_key(created);
            candidates.dedup();
            let Some((&winner, losers)) = candidates.split_first() else {
                continue;
            };
            let target = match section {
                Some(s) => format!("port {s:?} of Service {service}"),
                None => format!("Service {service}"),
            };
            let by = out.policies[winner].key.name.clone();
            for &l in losers {
                out.policies[l].conflicted.get_or_insert_with(|| {
                    format!(
                        "BackendTLSPolicy {by:?}, older or first by name, already applies to {target}; remove one of them or target another port by sectionName"
                    )
                });
            }
        }
        out
    }

    /// The TLS of a backend, port `port_name` of Service `service`, of a route attached to
    /// `gateways`, who become ancestors of the policies naming that port.
    pub(super) fn backend(
        &mut self,
        service: &ObjKey,
        port_name: Option<&str>,
        gateways: &[ObjKey],
    ) -> BackendTls {
        let by_port = port_name
            .filter(|n| !n.is_empty())
            .and_then(|n| self.targets.get(&(service.clone(), Some(n.to_string()))));
        let Some(candidates) = by_port.or_else(|| self.targets.get(&(service.clone(), None)))
        else {
            return BackendTls::None;
        };
        for &i in candidates {
            self.policies[i].ancestors.extend(gateways.iter().cloned());
        }
        let p = &self.policies[candidates[0]];
        match &p.validation {
            Some(v) => BackendTls::Verify(v.clone()),
            None => BackendTls::Refused(format!(
                "BackendTLSPolicy {} of the backend is not accepted: {}",
                p.key, p.accepted.message
            )),
        }
    }

    /// Records every policy's status: an entry per Gateway that is an ancestor of it.
    pub(super) fn finish(self, b: &mut Builder<'_>, controller: &str) {
        for p in self.policies {
            let obj = ObjectRef {
                kind: Kind::BackendTlsPolicy,
                key: p.key.clone(),
            };
            b.track_generation_of(&obj, p.generation);
            if p.ancestors.is_empty() {
                // Not sluice's to say anything of: no route of sluice's uses its targets
                // (another controller's Gateways may).
                b.set_ignored(
                    &obj,
                    "no route attached to a Gateway of sluice's uses a Service port it targets",
                );
                continue;
            }
            let accepted = match &p.conflicted {
                Some(why) if p.accepted.status => {
                    condition(reason::ACCEPTED, false, reason::CONFLICTED, why.clone())
                }
                _ => p.accepted.clone(),
            };
            match accepted.status {
                true => b.set_valid(&obj, "accepted BackendTLSPolicy"),
                false => b.set_invalid(
                    &obj,
                    crate::api::status::reason::INVALID_SPEC,
                    accepted.message.clone(),
                ),
            }
            let ancestors = (p.ancestors.iter())
                .map(|gw| ParentStatus {
                    kind: None,
                    namespace: gw.namespace.to_string(),
                    name: gw.name.to_string(),
                    section_name: None,
                    port: None,
                    controller_name: controller.to_string(),
                    conditions: vec![accepted.clone(), p.resolved.clone()],
                })
                .collect();
            b.set_gateway_status(
                &obj,
                GatewayApiStatus {
                    ancestors: Some(ancestors),
                    ..Default::default()
                },
            );
        }
    }
}

/// One policy as the build reads it: its conditions and, when accepted, the validation it asks
/// for.
fn read_policy(b: &mut Builder<'_>, key: &ObjKey, p: &BackendTlsPolicy) -> PolicyAcc {
    let mut acc = PolicyAcc {
        key: key.clone(),
        generation: p.metadata.generation,
        accepted: condition(
            reason::ACCEPTED,
            true,
            reason::ACCEPTED,
            "sluice speaks TLS to the backends of its targets",
        ),
        resolved: condition(
            reason::RESOLVED_REFS,
            true,
            reason::RESOLVED_REFS,
            "every caCertificateRef resolved",
        ),
        validation: None,
        conflicted: None,
        ancestors: BTreeSet::new(),
    };
    let verdict = validate_backend_tls_policy(p);
    if !verdict.errors.is_empty() {
        let all: Vec<String> = verdict.errors.iter().map(ToString::to_string).collect();
        acc.accepted = condition(reason::ACCEPTED, false, reason::INVALID, all.join("; "));
        return acc;
    }
    let val = &p.spec.validation;
    if let Some(w) = &val.well_known_ca_certificates {
        let why = crate::validate::backend_tls::well_known_unsupported(w);
        acc.accepted = condition(reason::ACCEPTED, false, reason::INVALID, why);
        return acc;
    }
    // The CA certificates of every reference that resolves, one bundle.
    let (pem, problems) = ca_bundle(b, key, val);
    if let Some(unresolved) = GatewayCondition::failed_all(reason::RESOLVED_REFS, &problems) {
        acc.resolved = unresolved;
    }
    if pem.is_empty() {
        acc.accepted = condition(
            reason::ACCEPTED,
            false,
            reason::NO_VALID_CA_CERTIFICATE,
            format!(
                "no caCertificateRef resolves to CA certificates: {}",
                acc.resolved.message
            ),
        );
        return acc;
    }
    let id = ca_id(key);
    b.trusted_ca(&id, Arc::from(pem));
    let subject_alt_names = (val.subject_alt_names.iter().flatten())
        .filter_map(|san| match san.r#type {
            SanType::Hostname => {
                (san.hostname.as_deref()).map(|h| SubjectAltName::Dns(h.to_ascii_lowercase()))
            }
            SanType::Uri => san.uri.clone().map(SubjectAltName::Uri),
        })
        .collect();
    acc.validation = Some(UpstreamValidation {
        ca_secret: id,
        subject_name: val.hostname.to_ascii_lowercase(),
        subject_alt_names,
    });
    acc
}

/// The CA certificates of a policy's references that resolve, as one PEM bundle, and the problem
/// of each that does not.
fn ca_bundle(
    b: &Builder<'_>,
    key: &ObjKey,
    val: &BackendTlsPolicyValidation,
) -> (String, Vec<FieldError>) {
    let mut pem = String::new();
    let mut problems = Vec::new();
    for (i, r) in val.ca_certificate_refs.iter().flatten().enumerate() {
        let field = format!("spec.validation.caCertificateRefs[{i}]");
        if !r.group.is_empty() || r.kind != "ConfigMap" {
            problems.push(FieldError::new(
                field,
                reason::INVALID_KIND,
                format!(
                    "kind {:?} of group {:?} is not one sluice reads CA certificates from; name a ConfigMap (group \"\", kind ConfigMap) with them under ca.crt",
                    r.kind, r.group
                ),
            ));
            continue;
        }
        let cm = ObjKey::new(key.namespace.clone(), r.name.as_str());
        match b.backing.config_maps.get(&cm).map(|c| &c.ca) {
            None => problems.push(FieldError::new(
                field,
                reason::INVALID_CA_CERTIFICATE_REF,
                format!(
                    "ConfigMap {:?} not found; create it in namespace {:?} with the PEM certificates of the CA that signed the backends' certificates under ca.crt",
                    cm.to_string(),
                    &*key.namespace
                ),
            )),
            Some(CaBundle::Unusable(what)) => problems.push(FieldError::new(
                field,
                reason::INVALID_CA_CERTIFICATE_REF,
                format!(
                    "ConfigMap {:?} holds no usable CA certificates ({what}); put the PEM certificates of the CA that signed the backends' certificates under ca.crt",
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
    (pem, problems)
}

/// A Gateway's client certificate for its TLS backends (`spec.tls.backend.clientCertificateRef`)
/// resolved: None when it names none; else the Gateway's `ResolvedRefs` condition and, when it
/// resolves, the certificate's key among the builder's secrets.
pub(super) fn gateway_client_certificate(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    key: &ObjKey,
    gw: &Gateway,
) -> Option<(GatewayCondition, Option<String>)> {
    let r = (gw.spec.tls.as_ref())
        .and_then(|t| t.backend.as_ref())
        .and_then(|t| t.client_certificate_ref.as_ref())?;
    let field = "spec.tls.backend.clientCertificateRef";
    let group = r.group.as_deref().unwrap_or("");
    let kind = r.kind.as_deref().unwrap_or("Secret");
    let ns = r.namespace.as_deref().unwrap_or(&key.namespace);
    let bad = |reason: &'static str, message: String| {
        let problem = FieldError::new(field, reason, message);
        Some((
            GatewayCondition::failed(reason::RESOLVED_REFS, &problem),
            None,
        ))
    };
    if !group.is_empty() || kind != "Secret" {
        return bad(
            reason::INVALID_CLIENT_CERTIFICATE_REF,
            format!(
                "kind {kind:?} of group {group:?} is not a certificate sluice reads; name a Secret (group \"\", kind Secret) of type kubernetes.io/tls"
            ),
        );
    }
    if ns != &*key.namespace && !granted(snapshot, "Gateway", &key.namespace, "Secret", ns, &r.name)
    {
        return bad(
            reason::REF_NOT_PERMITTED,
            format!(
                "Secret \"{ns}/{}\" is in another namespace and no ReferenceGrant there lets Gateways of {:?} use it",
                r.name, &*key.namespace
            ),
        );
    }
    match b.client_certificate(ns, &r.name) {
        Ok(id) => Some((
            condition(
                reason::RESOLVED_REFS,
                true,
                reason::RESOLVED_REFS,
                "Envoy presents the client certificate to TLS backends",
            ),
            Some(id),
        )),
        Err(why) => bad(reason::INVALID_CLIENT_CERTIFICATE_REF, why),
    }
}
