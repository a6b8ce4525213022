//! The status sluice writes on its routing objects, and the condition vocabulary (one place for all
//! condition types and reasons, so status, CLI output and webhook texts use the same words).
//!
//! Every routing object carries the seed fields (`currentStatus` valid|invalid|orphaned and
//! `description`) plus `observedGeneration` and Kubernetes-style `conditions` (`Valid` and `Ready`),
//! so Argo CD and Flux can decide health without custom scripts.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Condition types.
pub const COND_VALID: &str = "Valid";
pub const COND_READY: &str = "Ready";
/// On an IngressRoute with TLS backends (`https`, `https2`): True when Envoy verifies every one's
/// certificate (`validation`), False (reason `NotVerified`) when it accepts any certificate from
/// one of them. Its message names each backend's CA Secret and subject name, or that it is not
/// verified. Valid and Ready do not depend on it.
pub const COND_BACKEND_TLS_VERIFIED: &str = "BackendTLSVerified";

/// Condition reasons.
pub mod reason {
    pub const VALID: &str = "Valid";
    pub const PROGRAMMED: &str = "Programmed";
    pub const ORPHANED: &str = "Orphaned";
    pub const INVALID: &str = "Invalid";
    pub const INVALID_SPEC: &str = "InvalidSpec";
    pub const FQDN_CONFLICT: &str = "FQDNConflict";
    pub const ROUTE_CONFLICT: &str = "RouteConflict";
    pub const ROOT_NAMESPACE: &str = "RootNamespaceNotAllowed";
    pub const DELEGATION_CYCLE: &str = "DelegationCycle";
    pub const DELEGATION_ESCAPE: &str = "DelegationOutOfScope";
    pub const DELEGATE_NOT_FOUND: &str = "DelegateNotFound";
    pub const DELEGATE_IS_ROOT: &str = "DelegateIsRoot";
    pub const SERVICE_NOT_FOUND: &str = "ServiceNotFound";
    pub const SERVICE_PORT_NOT_FOUND: &str = "ServicePortNotFound";
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    pub const SECRET_INVALID: &str = "SecretInvalid";
    pub const UNSUPPORTED_BACKEND: &str = "UnsupportedBackend";
    /// BackendTLSVerified: every TLS backend's certificate is verified.
    pub const VERIFIED: &str = "Verified";
    /// BackendTLSVerified: some TLS backend's certificate is not verified.
    pub const NOT_VERIFIED: &str = "NotVerified";
    pub const IGNORED_CLASS: &str = "IgnoredClass";
    /// An Ingress's class annotation and `spec.ingressClassName` name different classes.
    pub const INGRESS_CLASS_CONFLICT: &str = "IngressClassConflict";
    /// A new Ingress names an IngressClass that does not exist.
    pub const INGRESS_CLASS_NOT_FOUND: &str = "IngressClassNotFound";
}

/// Seed `currentStatus` values.
pub const STATUS_VALID: &str = "valid";
pub const STATUS_INVALID: &str = "invalid";
pub const STATUS_ORPHANED: &str = "orphaned";
/// Route v1alpha1's `currentStatus` values, spelt as seed 004 spells them.
pub const ROUTE_STATUS_VALID: &str = "Valid";
pub const ROUTE_STATUS_INVALID: &str = "Invalid";
pub const ROUTE_STATUS_ORPHANED: &str = "Orphaned";

/// Status of an IngressRoute (both API versions).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoutingStatus {
    /// valid, invalid or orphaned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_status: Option<String>,
    /// Human-readable explanation of currentStatus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The metadata.generation this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Valid and Ready conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Status of a Route `contour.heptio.com/v1alpha1`: the seed fields plus the shared ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteStatus {
    /// Valid or Invalid (seed 004's spelling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Every problem found in the object, one message each; an empty list when there are none.
    #[serde(default)]
    pub errors: Vec<String>,
    /// When sluice last computed this status (RFC 3339). Only changes when the status does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_process_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
