//! The admission decision for one request: the single-object rules every part of sluice shares
//! ([`crate::validate::validate_object`]) plus the few cross-object rules whose answer does not
//! depend on apply order, read from the [`Index`]. Pure: no I/O, no clock, no side effects.

use kube::core::admission::Operation;
use serde_json::Value;

use super::index::{Index, is_default_class};
use super::{AdmissionSettings, INGRESS_CLASS_ANNOTATION, mutate};
use crate::api::status::reason;
use crate::api::{Kind, ObjKey};
use crate::dag::Options;
use crate::manifest::{Document, decode_value};
use crate::store::AnyObject;
use crate::validate::{FieldError, Verdict, quote, validate_object};

/// Which endpoint asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Validate,
    Mutate,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Validate => "validate",
            Endpoint::Mutate => "mutate",
        }
    }
}

/// The answer to one admission request, before it is encoded.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    /// Kind of the object, when sluice reads it.
    pub kind: Option<Kind>,
    /// What the denial is about, e.g. `IngressRoute team-a/finance`.
    pub subject: String,
    /// The object's name.
    pub name: String,
    /// Empty means allowed.
    pub errors: Vec<FieldError>,
    /// HTTP-style code of a denial: 422 for an invalid object, 400 for an unreadable request.
    pub code: u16,
    pub warnings: Vec<String>,
    pub patch: Option<json_patch::Patch>,
}

impl Decision {
    pub fn allowed(&self) -> bool {
        self.errors.is_empty()
    }

    fn deny(mut self, code: u16, errors: Vec<FieldError>) -> Self {
        self.code = code;
        self.errors = errors;
        self
    }
}

/// One request as the decision needs it.
pub struct Request<'a> {
    pub operation: &'a Operation,
    /// The kind the API server says the object is (`request.kind`).
    pub kind: Option<Kind>,
    /// `request.name` and `request.namespace`.
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub object: Option<Value>,
    pub old_object: Option<Value>,
}

/// Everything the decision reads.
pub struct Context<'a> {
    pub settings: &'a AdmissionSettings,
    pub options: &'a Options,
    pub index: &'a Index,
}

/// Decides one request for one endpoint.
pub fn decide(endpoint: Endpoint, req: Request<'_>, cx: &Context<'_>) -> Decision {
    let mut d = Decision {
        kind: req.kind,
        subject: subject(req.kind, req.namespace, req.name),
        name: req.name.to_string(),
        ..Decision::default()
    };
    let creating = match req.operation {
        Operation::Create => true,
        Operation::Update => false,
        // Deleting is always allowed; CONNECT carries no object sluice reads.
        Operation::Delete | Operation::Connect => return d,
    };
    let Some(object) = req.object.filter(|o| !o.is_null()) else {
        return d.deny(
            400,
            vec![FieldError::required(
                "request.object",
                "CREATE and UPDATE requests carry the object",
            )],
        );
    };
    let object = with_namespace(object, req.namespace);
    if let Some(k) = type_of(&object) {
        d.kind = Some(k);
    }
    match endpoint {
        Endpoint::Mutate => {
            if d.kind == Some(Kind::Ingress) {
                d.patch = mutate::ingress_patch(&object, creating, cx.settings, cx.index);
            }
            d
        }
        Endpoint::Validate => {
            let new = match decode(object) {
                Decoded::Object(o) => o,
                Decoded::Other => return d,
                Decoded::Invalid(code, e) => return d.deny(code, vec![e]),
            };
            let key = new.key();
            d.subject = subject(Some(new.kind()), Some(&key.namespace), &key.name);
            d.name = key.name;
            let mut verdict = check(&new, creating, cx);
            if !creating {
                // Ratcheting: an update is refused only for problems it introduces. Problems the
                // stored object already has become warnings, so labels, finalizers and fixes of
                // other fields can still be applied to an object that broke a newer rule.
                let old = req
                    .old_object
                    .filter(|o| !o.is_null())
                    .map(|o| decode(with_namespace(o, req.namespace)));
                if let Some(Decoded::Object(old)) = old {
                    let before: Vec<String> = check(&old, false, cx)
                        .errors
                        .iter()
                        .map(ToString::to_string)
                        .collect();
                    let (kept, ratcheted): (Vec<_>, Vec<_>) = verdict
                        .errors
                        .into_iter()
                        .partition(|e| !before.contains(&e.to_string()));
                    verdict.errors = kept;
                    for e in ratcheted {
                        verdict.warn(format!("{e} (already so before this update)"));
                    }
                }
            }
            d.warnings = verdict.warnings;
            if verdict.errors.is_empty() {
                d
            } else {
                d.deny(422, verdict.errors)
            }
        }
    }
}

enum Decoded {
    Object(AnyObject),
    /// A kind sluice does not read.
    Other,
    Invalid(u16, FieldError),
}

fn decode(object: Value) -> Decoded {
    match decode_value(object) {
        Ok(Document::Object(o)) => Decoded::Object(o),
        Ok(Document::Skipped { .. }) => Decoded::Other,
        Ok(Document::Rejected { error, .. }) => Decoded::Invalid(422, error),
        Err(e) => Decoded::Invalid(400, FieldError::spec("request.object", e.to_string())),
    }
}

/// The API server fills the namespace in before validating admission, but a namespaced object in a
/// mutating review (or a hand-made review) may still lack it; the request names it.
fn with_namespace(mut object: Value, namespace: Option<&str>) -> Value {
    let Some(ns) = namespace.filter(|n| !n.is_empty()) else {
        return object;
    };
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        let missing = meta
            .get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if missing {
            meta.insert("namespace".into(), Value::String(ns.to_string()));
        }
    }
    object
}

fn type_of(object: &Value) -> Option<Kind> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    Kind::from_type(api_version, kind)
}

fn subject(kind: Option<Kind>, namespace: Option<&str>, name: &str) -> String {
    let what = kind.map(|k| k.kind()).unwrap_or("object");
    let name = if name.is_empty() { "(unnamed)" } else { name };
    match namespace.filter(|n| !n.is_empty()) {
        Some(ns) => format!("{what} {ns}/{name}"),
        None => format!("{what} {name}"),
    }
}

/// Single-object rules (when the object is for sluice) plus the order-independent cross-object rules.
fn check(obj: &AnyObject, creating: bool, cx: &Context<'_>) -> Verdict {
    let mut v = if in_scope(obj, cx) {
        validate_object(obj)
    } else {
        Verdict::default()
    };
    match obj {
        AnyObject::IngressRouteV1beta1(ir) => {
            if let Some(vh) = &ir.spec.virtualhost {
                check_root(obj, "spec.virtualhost.fqdn", &vh.fqdn, cx, &mut v);
            }
        }
        AnyObject::IngressRouteV1(ir) => {
            if let Some(vh) = &ir.spec.virtualhost {
                check_root(obj, "spec.virtualhost.fqdn", &vh.fqdn, cx, &mut v);
            }
        }
        AnyObject::RouteV1alpha1(r) => check_root(obj, "spec.host", &r.spec.host, cx, &mut v),
        AnyObject::Ingress(ing) if creating => {
            let annotation = ing
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION));
            let field = ing
                .spec
                .as_ref()
                .and_then(|s| s.ingress_class_name.as_deref())
                .filter(|c| !c.is_empty());
            if let (Some(a), Some(f)) = (annotation, field) {
                v.error(FieldError::spec(
                    "spec.ingressClassName",
                    format!(
                        "may not be set together with the {INGRESS_CLASS_ANNOTATION} annotation ({}) on a new Ingress; the annotation is deprecated, keep only spec.ingressClassName ({})",
                        quote(a),
                        quote(f)
                    ),
                ));
            }
            let defaults = cx.index.default_ingress_classes();
            if annotation.is_none() && field.is_none() && defaults.len() > 1 {
                let names: Vec<String> = defaults.iter().map(|n| quote(n)).collect();
                v.error(FieldError::required(
                    "spec.ingressClassName",
                    format!(
                        "more than one IngressClass is marked default ({}), so a new Ingress must name its class; set spec.ingressClassName or leave {} on one IngressClass only",
                        names.join(", "),
                        super::index::DEFAULT_CLASS_ANNOTATION
                    ),
                ));
            }
        }
        AnyObject::IngressClass(class) if is_default_class(&class.metadata) => {
            let name = class.metadata.name.as_deref().unwrap_or("");
            let others: Vec<String> = cx
                .index
                .default_ingress_classes()
                .iter()
                .filter(|n| n.as_str() != name)
                .map(|n| quote(n))
                .collect();
            if !others.is_empty() {
                v.warn(format!(
                    "IngressClass {} is marked default like {}: new Ingresses without a class will be refused until only one IngressClass is marked default",
                    quote(name),
                    others.join(", ")
                ));
            }
        }
        _ => {}
    }
    v
}

/// A root (IngressRoute with a virtual host, or Route) must live in a root namespace and may not
/// claim a host another root already owns.
fn check_root(obj: &AnyObject, path: &str, host: &str, cx: &Context<'_>, v: &mut Verdict) {
    let me = obj.object_ref();
    let ns = &me.key.namespace;
    if !cx.options.root_allowed_in(ns) {
        let roots: Vec<String> = cx
            .options
            .root_namespaces
            .iter()
            .map(|n| quote(n))
            .collect();
        let what = match me.kind {
            Kind::RouteV1alpha1 => "Routes",
            _ => "root IngressRoutes (with spec.virtualhost)",
        };
        v.error(FieldError::new(
            "metadata.namespace",
            reason::ROOT_NAMESPACE,
            format!(
                "{} may not hold {what}: the root namespaces are {} (--root-namespaces)",
                quote(ns),
                roots.join(", ")
            ),
        ));
        return;
    }
    if host.is_empty() {
        return;
    }
    if let Some(owner) = cx.index.host_owner(host) {
        if owner.owner != me {
            v.error(FieldError::new(
                path,
                reason::FQDN_CONFLICT,
                format!(
                    "{} is already claimed by {} ({}); the oldest root claiming a host owns it, choose another host",
                    quote(host),
                    owner.owner,
                    owner.owner.kind.api_version()
                ),
            ));
        }
    }
}

/// Whether sluice's single-object rules apply: objects for another ingress class or another Gateway
/// API controller are not sluice's to refuse (their controller may accept what sluice does not).
fn in_scope(obj: &AnyObject, cx: &Context<'_>) -> bool {
    match obj {
        AnyObject::Ingress(ing) => {
            let annotation = ing
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION));
            let field = ing
                .spec
                .as_ref()
                .and_then(|s| s.ingress_class_name.as_ref());
            match annotation.or(field) {
                Some(class) => class == &cx.options.ingress_class_name,
                None => true,
            }
        }
        AnyObject::GatewayClass(gc) => match &cx.settings.gateway_controller_name {
            Some(ours) => &gc.spec.controller_name == ours,
            None => true,
        },
        AnyObject::Gateway(g) => gateway_class_in_scope(&g.spec.gateway_class_name, cx),
        AnyObject::HttpRoute(r) => parents_in_scope(
            obj,
            r.spec
                .parent_refs
                .iter()
                .flatten()
                .map(|p| (&p.group, &p.kind, &p.namespace, &p.name)),
            cx,
        ),
        AnyObject::GrpcRoute(r) => parents_in_scope(
            obj,
            r.spec
                .parent_refs
                .iter()
                .flatten()
                .map(|p| (&p.group, &p.kind, &p.namespace, &p.name)),
            cx,
        ),
        AnyObject::TlsRoute(r) => parents_in_scope(
            obj,
            r.spec
                .parent_refs
                .iter()
                .flatten()
                .map(|p| (&p.group, &p.kind, &p.namespace, &p.name)),
            cx,
        ),
        AnyObject::TcpRoute(r) => parents_in_scope(
            obj,
            r.spec
                .parent_refs
                .iter()
                .flatten()
                .map(|p| (&p.group, &p.kind, &p.namespace, &p.name)),
            cx,
        ),
        _ => true,
    }
}

/// A Gateway class is out of scope only when the index knows it belongs to another controller.
fn gateway_class_in_scope(class: &str, cx: &Context<'_>) -> bool {
    match (
        &cx.settings.gateway_controller_name,
        cx.index.gateway_class_controller(class),
    ) {
        (Some(ours), Some(theirs)) => ours == theirs,
        _ => true,
    }
}

/// A route is out of scope only when every parent is a known Gateway of another controller.
fn parents_in_scope<'a>(
    obj: &AnyObject,
    parents: impl Iterator<
        Item = (
            &'a Option<String>,
            &'a Option<String>,
            &'a Option<String>,
            &'a String,
        ),
    >,
    cx: &Context<'_>,
) -> bool {
    if cx.settings.gateway_controller_name.is_none() {
        return true;
    }
    let own_ns = obj.key().namespace;
    let mut any = false;
    for (group, kind, namespace, name) in parents {
        any = true;
        let group = group.as_deref().unwrap_or("gateway.networking.k8s.io");
        let kind = kind.as_deref().unwrap_or("Gateway");
        if group != "gateway.networking.k8s.io" || kind != "Gateway" {
            return true;
        }
        let key = ObjKey::new(namespace.as_deref().unwrap_or(&own_ns), name.as_str());
        match cx.index.gateway_class_of(&key) {
            Some(class) if !gateway_class_in_scope(class, cx) => {}
            _ => return true,
        }
    }
    !any
}
