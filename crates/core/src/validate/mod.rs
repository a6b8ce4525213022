//! Single-object admission rules. The webhook, `sluice validate` and `dag::build` all call these very
//! functions, so an object refused at `kubectl apply` and an object marked invalid in status are refused
//! for the same reason, in the same words.
//!
//! Every problem is a [`FieldError`]: the field path, what is wrong with which value, and what would be
//! accepted, e.g. `spec.routes[2].match: "finance" must start with "/"`.

pub mod backend_tls;
pub mod common;
pub mod frontend_tls;
pub mod gateway;
pub mod ingress;
pub mod ingressroute;
pub mod label_selector;
pub mod listenerset;
pub mod re2;
pub mod route;
pub mod service;

use std::fmt;

use serde::Serialize;

use crate::store::AnyObject;

/// One problem of one object, found by these rules or while the routing model is built (the
/// problems and warnings of a [`crate::dag::ObjectStatus`], a Gateway API condition's cause). Its
/// text is its `Display`: the path, when set, before the message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct FieldError {
    /// JSONPath-like location, e.g. `spec.routes[2].match`; empty when the problem is not tied
    /// to one field (a route conflict, a delegation cycle).
    pub path: String,
    /// Machine-readable reason, one of `crate::api::status::reason`.
    pub reason: &'static str,
    /// What is wrong, naming the bad value and what would be accepted.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl FieldError {
    /// Several problems as one: the first one's reason, every one's text (path and message)
    /// joined by "; ". None without a problem.
    pub fn joined(problems: &[FieldError]) -> Option<FieldError> {
        let first = problems.first()?;
        let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
        Some(FieldError::new("", first.reason, texts.join("; ")))
    }

    pub fn new(path: impl Into<String>, reason: &'static str, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            reason,
            message: message.into(),
        }
    }

    /// `path: "value" <what is wrong and what is accepted>` with reason InvalidSpec.
    pub fn invalid(path: impl Into<String>, value: &str, expected: impl fmt::Display) -> Self {
        FieldError::new(
            path,
            crate::api::status::reason::INVALID_SPEC,
            format!("{} {expected}", quote(value)),
        )
    }

    /// Nothing when `ok`, else [`FieldError::invalid`]: the check of a value against one rule.
    pub fn unless(
        ok: bool,
        path: impl fmt::Display,
        value: &str,
        expected: impl fmt::Display,
    ) -> Result<(), FieldError> {
        if ok {
            Ok(())
        } else {
            Err(FieldError::invalid(path.to_string(), value, expected))
        }
    }

    /// `path: is required <hint>` with reason InvalidSpec.
    pub fn required(path: impl Into<String>, hint: impl fmt::Display) -> Self {
        FieldError::new(
            path,
            crate::api::status::reason::INVALID_SPEC,
            format!("is required; {hint}"),
        )
    }

    /// A rule about the field that is not about one value.
    pub fn spec(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError::new(path, crate::api::status::reason::INVALID_SPEC, message)
    }
}

/// Quotes a user-supplied value for a message: escapes quotes and control characters, and cuts values
/// over 80 characters, so a message never carries raw user input.
pub fn quote(value: &str) -> String {
    const MAX: usize = 80;
    let mut cut: String = value.chars().take(MAX).collect();
    let truncated = cut.len() < value.len();
    if truncated {
        cut.push('…');
    }
    let quoted = format!("{cut:?}");
    if truncated {
        format!("{quoted} ({} characters)", value.chars().count())
    } else {
        quoted
    }
}

/// The outcome of the single-object rules for one object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Problems that make the object unacceptable; empty means allowed.
    pub errors: Vec<FieldError>,
    /// Deprecated or risky usage that is still accepted (admission warnings).
    pub warnings: Vec<String>,
    /// Regular expressions of this object checked so far ([`common::check_regex`]).
    #[serde(skip)]
    pub(crate) regexes: RegexCount,
}

/// A count kept while an object is checked, not part of the outcome: verdicts compare equal
/// whatever it holds.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RegexCount(pub(crate) usize);

impl PartialEq for RegexCount {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RegexCount {}

impl Verdict {
    pub fn allowed(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn error(&mut self, e: FieldError) {
        self.errors.push(e);
    }

    pub fn warn(&mut self, w: impl Into<String>) {
        self.warnings.push(w.into());
    }

    pub fn merge(&mut self, other: Verdict) {
        self.errors.extend(other.errors);
        self.warnings.extend(other.warnings);
        self.regexes.0 += other.regexes.0;
    }
}

/// The single-object rules as sluice applies them for one ingress class: an Ingress that names
/// another class belongs to another controller, and sluice neither judges nor routes it.
pub fn validate_object_for_class(obj: &AnyObject, ingress_class_name: &str) -> Verdict {
    if let AnyObject::Ingress(ingress) = obj
        && ingress::ingress_class(ingress).is_some_and(|c| c != ingress_class_name)
    {
        return Verdict::default();
    }
    validate_object(obj)
}

/// Runs the single-object rules of the object's kind. Kinds without rules of their own (Services,
/// Secrets, …) are always allowed.
pub fn validate_object(obj: &AnyObject) -> Verdict {
    match obj {
        AnyObject::Ingress(o) => ingress::validate_ingress(o),
        AnyObject::IngressClass(o) => ingress::validate_ingress_class(o),
        AnyObject::IngressRouteV1beta1(o) => ingressroute::validate_v1beta1(o),
        AnyObject::IngressRouteV1(o) => ingressroute::validate_v1(o),
        AnyObject::RouteV1alpha1(o) => route::validate_route(o),
        AnyObject::GatewayClass(_)
        | AnyObject::Gateway(_)
        | AnyObject::HttpRoute(_)
        | AnyObject::GrpcRoute(_)
        | AnyObject::TlsRoute(_)
        | AnyObject::TcpRoute(_)
        | AnyObject::ReferenceGrant(_) => gateway::validate_gateway_object(obj),
        AnyObject::ListenerSet(o) => listenerset::validate_listener_set(o),
        AnyObject::Service(o) => service::validate_service(o),
        AnyObject::BackendTlsPolicy(p) => backend_tls::validate_backend_tls_policy(p),
        AnyObject::EndpointSlice(_)
        | AnyObject::Secret(_)
        | AnyObject::Namespace(_)
        | AnyObject::ConfigMap(_) => Verdict::default(),
    }
}
