//! What one build keeps of the BackendTLSPolicies in its [`super::Builder`] while the Gateway
//! API processor runs ([`BackendTlsPolicies`]), and the check of a Secret's certificate that the
//! builder's own lookups share ([`usable_tls`]).
//!
//! Plain data, below the builder: the builder holds it without depending on
//! [`super::backend_tls`], which reads the policies into it, and which uses the builder.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::model::{GatewayCondition, UpstreamValidation};
use crate::api::ObjKey;
use crate::store::TlsSecretData;

/// What one build knows of the BackendTLSPolicies: what each says and which applies to which
/// Service port.
#[derive(Default)]
pub(super) struct BackendTlsPolicies {
    pub(super) policies: Vec<PolicyAcc>,
    /// The policies naming each target, the one that applies first: by the Service's key and
    /// the `sectionName` (None: the whole Service).
    pub(super) targets: BTreeMap<(ObjKey, Option<String>), Vec<usize>>,
}

/// One policy while a build runs.
pub(super) struct PolicyAcc {
    pub(super) key: ObjKey,
    pub(super) generation: Option<i64>,
    pub(super) accepted: GatewayCondition,
    pub(super) resolved: GatewayCondition,
    /// What Envoy verifies the backends with; None when the policy is not accepted.
    pub(super) validation: Option<UpstreamValidation>,
    /// Lost a target to another policy: the `Accepted=False/Conflicted` message.
    pub(super) conflicted: Option<String>,
    /// The Gateways of the routes that use a Service port it names.
    pub(super) ancestors: BTreeSet<ObjKey>,
}

/// Whether a Secret's certificate and key are usable (the message of why not otherwise).
pub(super) fn usable_tls(data: &TlsSecretData) -> Result<(Arc<str>, Arc<str>), String> {
    match data {
        TlsSecretData::Usable { cert_pem, key_pem } => Ok((cert_pem.clone(), key_pem.clone())),
        TlsSecretData::Unusable(what) => Err(what.to_string()),
    }
}
