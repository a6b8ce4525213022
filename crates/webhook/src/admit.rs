//! The admission decision for one request: the single-object rules every part of sluice shares
//! ([`sluice_core::validate::validate_object`]) plus the few cross-object rules whose answer does not
//! depend on apply order, read from the [`Index`]. Pure: no I/O, no clock, no side effects.

use gateway_api::apis::experimental::listenersets::ListenerSet;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::core::admission::Operation;
use serde_json::Value;

use super::index::Index;
use super::{AdmissionSettings, mutate};
use sluice_core::api::status::reason;
use sluice_core::api::{Kind, ObjKey};
use sluice_core::dag::Options;
use sluice_core::manifest::{Document, decode_value};
use sluice_core::store::AnyObject;
use sluice_core::validate::ingress::{
    DEFAULT_CLASS_ANNOTATION, class_field, ingress_class, is_default_class, validate_new_ingress,
};
use sluice_core::validate::{FieldError, Verdict, quote, validate_object_for_class};

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
            d.name = key.name.to_string();
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
        validate_object_for_class(obj, &cx.options.ingress_class_name)
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
        AnyObject::Ingress(ing) if creating => check_new_ingress(ing, cx, &mut v),
        AnyObject::IngressClass(class) if is_default_class(class) => {
            check_default_class(class, cx, &mut v)
        }
        _ => check_unsupported(obj, cx, &mut v),
    }
    v
}

/// What sluice does not serve yet in a Gateway API object that is sluice's (a route attached to
/// one of its Gateways, a Gateway of its class, a ListenerSet on such a Gateway): refused now
/// rather than reported in the object's status after the fact.
fn check_unsupported(obj: &AnyObject, cx: &Context<'_>, v: &mut Verdict) {
    use sluice_core::dag::{gateway, grpcroute, httproute, tcproute, tlsroute};
    let errors = match obj {
        AnyObject::HttpRoute(r) if attached_to_ours(obj, cx) => httproute::unsupported(r),
        AnyObject::GrpcRoute(r) if attached_to_ours(obj, cx) => grpcroute::unsupported(r),
        AnyObject::Gateway(g) if class_is_ours(&g.spec.gateway_class_name, cx) => {
            gateway::unsupported(g)
        }
        AnyObject::ListenerSet(ls) if listener_set_parent_is_ours(obj, ls, cx) => {
            gateway::unsupported_in_listener_set(ls)
        }
        AnyObject::TcpRoute(r) if attached_to_ours(obj, cx) => tcproute::unsupported(r),
        AnyObject::TlsRoute(r) if attached_to_ours(obj, cx) => tlsroute::unsupported(r),
        _ => return,
    };
    for e in errors {
        v.error(e);
    }
}

/// Seed 001's rules for a new Ingress: the class in spec.ingressClassName alone, and an
/// IngressClass of that name exists. They concern Ingresses of sluice's class (another
/// controller's Ingresses are its own to refuse). A new Ingress without a class needs a single
/// default IngressClass.
fn check_new_ingress(ing: &Ingress, cx: &Context<'_>, v: &mut Verdict) {
    let ours = cx.options.ingress_class_name.as_str();
    let field = class_field(ing);
    if ingress_class(ing) == Some(ours) || field == Some(ours) {
        for e in validate_new_ingress(ing) {
            v.error(e);
        }
    }
    if let Some(class) = field
        && ingress_class(ing) == Some(ours)
        && !cx.index.has_ingress_class(class)
    {
        v.error(FieldError::new(
            "spec.ingressClassName",
            reason::INGRESS_CLASS_NOT_FOUND,
            format!(
                "IngressClass {} does not exist; create it first, or name an existing IngressClass",
                quote(class)
            ),
        ));
    }
    let defaults = cx.index.default_ingress_classes();
    if ingress_class(ing).is_none() && defaults.len() > 1 {
        let names: Vec<String> = defaults.iter().map(|n| quote(n)).collect();
        v.error(FieldError::required(
            "spec.ingressClassName",
            format!(
                "more than one IngressClass is marked default ({}), so a new Ingress must name its class; set spec.ingressClassName or leave {DEFAULT_CLASS_ANNOTATION} on one IngressClass only",
                names.join(", "),
            ),
        ));
    }
}

/// An IngressClass marked default beside others so marked: a warning, as new Ingresses without
/// a class will be refused.
fn check_default_class(class: &IngressClass, cx: &Context<'_>, v: &mut Verdict) {
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

/// A root (IngressRoute with a virtual host, or Route) must live in a root namespace and may not
/// claim a host another root already owns. The messages are the status messages `dag::build` gives
/// the same object (tests/webhook_router_*.rs compares them), so the denial and the status agree.
fn check_root(obj: &AnyObject, path: &str, host: &str, cx: &Context<'_>, v: &mut Verdict) {
    let me = obj.object_ref();
    let ns = &me.key.namespace;
    if !cx.options.root_allowed_in(ns) {
        let allowed = cx.options.root_namespaces.join(", ");
        let message = match me.kind {
            Kind::RouteV1alpha1 => format!(
                "Route in namespace {} is not allowed (a Route is the root of its host); root namespaces are: {allowed}",
                quote(ns)
            ),
            _ => format!(
                "root IngressRoute in namespace {} is not allowed; root namespaces are: {allowed}",
                quote(ns)
            ),
        };
        v.error(FieldError::new(
            "metadata.namespace",
            reason::ROOT_NAMESPACE,
            message,
        ));
        return;
    }
    if host.is_empty() {
        return;
    }
    if let Some(owner) = cx.index.host_owner(host)
        && owner.owner != me
    {
        v.error(FieldError::new(
            path,
            reason::FQDN_CONFLICT,
            format!(
                "fqdn {:?} is already claimed by {} (the oldest object claiming a host owns it)",
                host.to_ascii_lowercase(),
                owner.owner
            ),
        ));
    }
}

/// Whether sluice's single-object rules apply to a Gateway API object: objects of another Gateway
/// API controller are not sluice's to refuse (their controller may accept what sluice does not).
/// Ingresses of another class are left alone by `validate_object_for_class`.
fn in_scope(obj: &AnyObject, cx: &Context<'_>) -> bool {
    match obj {
        AnyObject::GatewayClass(gc) => match &cx.settings.gateway_controller_name {
            Some(ours) => &gc.spec.controller_name == ours,
            None => true,
        },
        AnyObject::Gateway(g) => gateway_class_in_scope(&g.spec.gateway_class_name, cx),
        AnyObject::HttpRoute(_)
        | AnyObject::GrpcRoute(_)
        | AnyObject::TlsRoute(_)
        | AnyObject::TcpRoute(_) => parents_in_scope(obj, cx),
        // A ListenerSet is another controller's when its parent Gateway is known to be.
        AnyObject::ListenerSet(ls) => {
            let parent = listener_set_parent(ls).key(&obj.key().namespace);
            match cx.index.gateway_class_of(&parent) {
                Some(class) => gateway_class_in_scope(class, cx),
                None => true,
            }
        }
        _ => true,
    }
}

/// The parentRef of a ListenerSet.
fn listener_set_parent(ls: &ListenerSet) -> ParentRef<'_> {
    let p = &ls.spec.parent_ref;
    ParentRef {
        group: p.group.as_deref(),
        kind: p.kind.as_deref(),
        namespace: p.namespace.as_deref(),
        name: &p.name,
    }
}

/// Whether a ListenerSet's parent is a Gateway the index knows to be of a class of sluice's.
fn listener_set_parent_is_ours(obj: &AnyObject, ls: &ListenerSet, cx: &Context<'_>) -> bool {
    let parent = listener_set_parent(ls);
    parent.names_gateway()
        && (cx.index.gateway_class_of(&parent.key(&obj.key().namespace)))
            .is_some_and(|class| class_is_ours(class, cx))
}

/// A parentRef of a route or a ListenerSet, whatever its kind.
struct ParentRef<'a> {
    group: Option<&'a str>,
    kind: Option<&'a str>,
    namespace: Option<&'a str>,
    name: &'a str,
}

impl ParentRef<'_> {
    /// Whether it names a Gateway (the default group and kind).
    fn names_gateway(&self) -> bool {
        self.group.unwrap_or(sluice_core::dag::gateway::GROUP) == sluice_core::dag::gateway::GROUP
            && self.kind.unwrap_or("Gateway") == "Gateway"
    }

    /// The key of the object it names, `own_ns` the route's namespace.
    fn key(&self, own_ns: &str) -> ObjKey {
        ObjKey::new(self.namespace.unwrap_or(own_ns), self.name)
    }
}

/// The parentRefs of a Gateway API route (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute); none for
/// other objects.
fn route_parents(obj: &AnyObject) -> Vec<ParentRef<'_>> {
    /// Reads each parentRef of a route's generated type.
    fn read<'a, P>(
        refs: &'a Option<Vec<P>>,
        parent: impl Fn(&'a P) -> ParentRef<'a>,
    ) -> Vec<ParentRef<'a>> {
        refs.iter().flatten().map(parent).collect()
    }
    match obj {
        AnyObject::HttpRoute(r) => read(&r.spec.parent_refs, |p| ParentRef {
            group: p.group.as_deref(),
            kind: p.kind.as_deref(),
            namespace: p.namespace.as_deref(),
            name: &p.name,
        }),
        AnyObject::GrpcRoute(r) => read(&r.spec.parent_refs, |p| ParentRef {
            group: p.group.as_deref(),
            kind: p.kind.as_deref(),
            namespace: p.namespace.as_deref(),
            name: &p.name,
        }),
        AnyObject::TlsRoute(r) => read(&r.spec.parent_refs, |p| ParentRef {
            group: p.group.as_deref(),
            kind: p.kind.as_deref(),
            namespace: p.namespace.as_deref(),
            name: &p.name,
        }),
        AnyObject::TcpRoute(r) => read(&r.spec.parent_refs, |p| ParentRef {
            group: p.group.as_deref(),
            kind: p.kind.as_deref(),
            namespace: p.namespace.as_deref(),
            name: &p.name,
        }),
        _ => Vec::new(),
    }
}

/// Whether a parent of the route is a Gateway the index knows to be of a class of sluice's.
fn attached_to_ours(obj: &AnyObject, cx: &Context<'_>) -> bool {
    let own_ns = obj.key().namespace;
    route_parents(obj).iter().any(|p| {
        p.names_gateway()
            && (cx.index.gateway_class_of(&p.key(&own_ns)))
                .is_some_and(|class| class_is_ours(class, cx))
    })
}

/// Whether the index knows the Gateway class to be sluice's.
fn class_is_ours(class: &str, cx: &Context<'_>) -> bool {
    let ours = cx.settings.gateway_controller_name.as_deref();
    ours.is_some() && cx.index.gateway_class_controller(class) == ours
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
fn parents_in_scope(obj: &AnyObject, cx: &Context<'_>) -> bool {
    if cx.settings.gateway_controller_name.is_none() {
        return true;
    }
    let own_ns = obj.key().namespace;
    let parents = route_parents(obj);
    parents.is_empty()
        || parents.iter().any(|p| {
            !p.names_gateway()
                || (cx.index.gateway_class_of(&p.key(&own_ns)))
                    .is_none_or(|class| gateway_class_in_scope(class, cx))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_core::store::Snapshot;

    fn mk_gateway(listeners: Value) -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "infra"},
            "spec": {"gatewayClassName": "sluice", "listeners": listeners}})
    }

    fn mk_root(name: &str, ns: &str, fqdn: &str) -> Value {
        json!({"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"virtualhost": {"fqdn": fqdn}, "routes": [{"match": "/", "services": [{"name": "s", "port": 80}]}]}})
    }

    fn mk_index(objects: &[Value]) -> Index {
        let mut s = Snapshot::default();
        for o in objects {
            if let Ok(Document::Object(o)) = decode_value(o.clone()) {
                s.insert(o);
            }
        }
        Index::build(&s, &Options::default())
    }

    fn run(op: Operation, object: Option<Value>, old: Option<Value>, index: &Index) -> Decision {
        let settings = AdmissionSettings::default();
        let options = Options::default();
        let cx = Context {
            settings: &settings,
            options: &options,
            index,
        };
        let req = Request {
            operation: &op,
            kind: None,
            name: "edge",
            namespace: Some("infra"),
            object,
            old_object: old,
        };
        decide(Endpoint::Validate, req, &cx)
    }

    fn texts(d: &Decision) -> Vec<String> {
        d.errors.iter().map(ToString::to_string).collect()
    }

    const CONFLICT: &str = "spec.listeners[1]: port 80, protocol HTTP and no hostname are the same as spec.listeners[0] (\"a\", protocol HTTP); one of them must differ";

    #[test]
    fn an_update_keeping_an_old_problem_gets_a_warning_and_a_new_problem_a_denial() {
        let index = Index::default();
        let broken = mk_gateway(
            json!([{"name": "a", "port": 80, "protocol": "HTTP"}, {"name": "b", "port": 80, "protocol": "HTTP"}]),
        );
        let fine = mk_gateway(json!([{"name": "a", "port": 80, "protocol": "HTTP"}]));

        let created = run(Operation::Create, Some(broken.clone()), None, &index);
        assert_eq!(texts(&created), [CONFLICT]);
        assert_eq!(created.code, 422);
        assert_eq!(created.subject, "Gateway infra/edge");

        let mut relabelled = broken.clone();
        relabelled["metadata"]["labels"] = json!({"team": "edge"});
        let kept = run(
            Operation::Update,
            Some(relabelled),
            Some(broken.clone()),
            &index,
        );
        assert!(kept.allowed(), "{:?}", kept.errors);
        assert_eq!(
            kept.warnings,
            [format!("{CONFLICT} (already so before this update)")]
        );

        let introduced = run(Operation::Update, Some(broken), Some(fine), &index);
        assert_eq!(texts(&introduced), [CONFLICT]);
    }

    #[test]
    fn a_host_conflict_the_stored_object_already_had_is_not_a_new_one() {
        let owner = mk_root("owner", "a", "shop.example.com");
        let index = mk_index(&[owner]);
        let mut loser = mk_root("loser", "b", "shop.example.com");
        loser["metadata"]["creationTimestamp"] = json!("2025-01-01T00:00:00Z");
        let claim = "spec.virtualhost.fqdn: fqdn \"shop.example.com\" is already claimed by IngressRoute a/owner (the oldest object claiming a host owns it)";
        let created = run(Operation::Create, Some(loser.clone()), None, &index);
        assert_eq!(texts(&created), [claim]);
        assert_eq!(created.errors[0].reason, reason::FQDN_CONFLICT);
        // Relabelling the loser is allowed, with the conflict as a warning.
        let mut relabelled = loser.clone();
        relabelled["metadata"]["labels"] = json!({"x": "y"});
        let kept = run(
            Operation::Update,
            Some(relabelled),
            Some(loser.clone()),
            &index,
        );
        assert!(kept.allowed());
        assert_eq!(
            kept.warnings,
            [format!("{claim} (already so before this update)")]
        );
        // Moving to a free host is fine; moving onto a taken one from a free one is not.
        let mut moved = loser.clone();
        moved["spec"]["virtualhost"]["fqdn"] = json!("free.example.com");
        assert!(run(Operation::Update, Some(moved.clone()), Some(loser), &index).allowed());
        let back = mk_root("loser", "b", "SHOP.example.com");
        assert_eq!(
            run(Operation::Update, Some(back), Some(moved), &index)
                .errors
                .len(),
            1
        );
    }

    #[test]
    fn a_routes_parents_are_read_whatever_its_kind() {
        for kind in ["HTTPRoute", "GRPCRoute"] {
            let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
                "metadata": {"name": "r", "namespace": "shop"},
                "spec": {"parentRefs": [{"name": "edge"},
                    {"name": "other", "namespace": "infra", "kind": "ListenerSet"}]}});
            let Ok(Document::Object(obj)) = decode_value(route) else {
                panic!("{kind} decodes")
            };
            let read: Vec<String> = (route_parents(&obj).iter())
                .map(|p| format!("{} {}", p.names_gateway(), p.key("shop")))
                .collect();
            assert_eq!(read, ["true shop/edge", "false infra/other"], "{kind}");
        }
        let gateway = decode_value(mk_gateway(json!([])));
        let Ok(Document::Object(gateway)) = gateway else {
            panic!("a Gateway decodes")
        };
        assert!(route_parents(&gateway).is_empty());
    }

    #[test]
    fn delete_connect_and_missing_objects() {
        let index = Index::default();
        assert!(run(Operation::Delete, None, Some(mk_gateway(json!([]))), &index).allowed());
        let missing = run(Operation::Create, None, None, &index);
        assert_eq!(missing.code, 400);
        assert_eq!(
            texts(&missing),
            ["request.object: is required; CREATE and UPDATE requests carry the object"]
        );
        let null = run(Operation::Update, Some(Value::Null), None, &index);
        assert_eq!(null.code, 400);
        assert!(run(Operation::Connect, None, None, &index).allowed());
    }
}
