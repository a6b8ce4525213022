//! The status the routing model gives every routing object: its state and messages, the warnings
//! beside them, and a Gateway API object's own status.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use crate::validate::FieldError;

/// The result for one routing object, in the context of the whole snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ObjectStatus {
    pub state: State,
    /// One line for `status.description` (most are fixed texts, shared rather than copied).
    pub description: Cow<'static, str>,
    /// Every problem found (empty when valid). Its text is each one's `Display` (the path, when
    /// set, before the message).
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "serialize_problems"
    )]
    pub messages: Vec<FieldError>,
    /// What is served but not as the user may think (e.g. an Ingress whose class annotation and
    /// field disagree); the state is unchanged by them.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "serialize_problems"
    )]
    pub warnings: Vec<FieldError>,
    /// metadata.generation of the object the status was computed from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// The Gateway API status of a GatewayClass, Gateway or HTTPRoute of sluice's controller:
    /// conditions, listeners and parents as the Gateway API defines them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Box<GatewayApiStatus>>,
    /// A condition of an IngressRoute besides `Valid` and `Ready`, worked out from its spec when
    /// it was stored and shared, not copied: `BackendTLSVerified`, on one with TLS backends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<Arc<GatewayCondition>>,
}

/// The Gateway API status of one object ([`ObjectStatus::gateway`]). Which parts are set
/// depends on the kind: `conditions` for GatewayClass and Gateway, `listeners` for Gateway,
/// `parents` for HTTPRoute.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GatewayApiStatus {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<GatewayCondition>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ListenerStatus>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<ParentStatus>,
    /// A GatewayClass's `supportedFeatures`: the Gateway API's names of the features sluice
    /// serves, in alphabetical order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub supported_features: Vec<&'static str>,
    /// A Gateway's own address (`--gateway-addresses`), as its `status.addresses` carries it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<std::net::IpAddr>,
    /// A Gateway's `attachedListenerSets`: how many ListenerSets are attached to it (accepted).
    /// None for a Gateway that takes no ListenerSets and has none attached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attached_listener_sets: Option<u32>,
    /// A policy's (BackendTLSPolicy) `status.ancestors`: what it says for each Gateway it
    /// affects, written also when empty. None for the other kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ancestors: Option<Vec<ParentStatus>>,
}

/// One condition (`metav1.Condition` without its timestamps and generation, which the status
/// writer adds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GatewayCondition {
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl GatewayCondition {
    /// A condition of type `type_` that is false because of `problem`: its reason, and its text
    /// (`Display`: the path, when set, before the message).
    pub fn failed(type_: &'static str, problem: &FieldError) -> Self {
        GatewayCondition {
            type_,
            status: false,
            reason: problem.reason,
            message: problem.to_string(),
        }
    }

    /// [`GatewayCondition::failed`] because of several problems: the first one's reason, every
    /// one's text, joined by "; ". None without a problem.
    pub fn failed_all(type_: &'static str, problems: &[FieldError]) -> Option<Self> {
        let first = problems.first()?;
        let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
        Some(GatewayCondition {
            message: texts.join("; "),
            ..GatewayCondition::failed(type_, first)
        })
    }
}

/// A Gateway listener's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    pub name: String,
    /// Route kinds the listener takes (group `gateway.networking.k8s.io`).
    pub supported_kinds: Vec<&'static str>,
    pub attached_routes: u32,
    pub conditions: Vec<GatewayCondition>,
}

/// What a route's status says for one of its parents (a Gateway of sluice's controller, or a
/// ListenerSet attached to one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentStatus {
    /// The parent's kind when it is not a Gateway: `ListenerSet`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub namespace: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    pub controller_name: String,
    pub conditions: Vec<GatewayCondition>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Valid,
    Invalid,
    Orphaned,
    /// Not for this controller (another ingress class).
    Ignored,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Valid => "valid",
            State::Invalid => "invalid",
            State::Orphaned => "orphaned",
            State::Ignored => "ignored",
        }
    }
}

/// Problems as a status carries them: each one's reason and its text (`Display`: the path, when
/// set, before the message).
fn serialize_problems<S: Serializer>(problems: &[FieldError], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Problem {
        reason: &'static str,
        message: String,
    }
    s.collect_seq(problems.iter().map(|p| Problem {
        reason: p.reason,
        message: p.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status's problems serialize as reason and text, the path before the message.
    #[test]
    fn problems_serialize_as_reason_and_text() {
        let status = ObjectStatus {
            state: State::Invalid,
            description: "invalid".into(),
            messages: vec![
                FieldError::new(
                    "spec.routes[0]",
                    "ServiceNotFound",
                    "Service \"a/b\" not found",
                ),
                FieldError::new("", "DelegationCycle", "delegation cycle"),
            ],
            warnings: vec![],
            generation: None,
            gateway: None,
            condition: None,
        };
        assert_eq!(
            serde_json::to_string(&status).unwrap(),
            r#"{"state":"invalid","description":"invalid","messages":[{"reason":"ServiceNotFound","message":"spec.routes[0]: Service \"a/b\" not found"},{"reason":"DelegationCycle","message":"delegation cycle"}]}"#
        );
    }

    #[test]
    fn conditions_from_problems_carry_the_first_reason_and_every_text() {
        let problems = [
            FieldError::new("spec.a", "First", "one"),
            FieldError::new("", "Second", "two"),
        ];
        let c = GatewayCondition::failed_all("ResolvedRefs", &problems).unwrap();
        assert_eq!((c.status, c.reason), (false, "First"));
        assert_eq!(c.message, "spec.a: one; two");
        assert!(GatewayCondition::failed_all("ResolvedRefs", &[]).is_none());
    }
}
