//! What the delegation walk visits: an IngressRoute's lowered routes ([`Node`]), their targets
//! and backends, and what finding a delegate gives.

use super::*;

/// One IngressRoute for the walk: its routes as the store lowered them when the object arrived
/// (see [`super::ingressroute::ReadyIngressRoute`]), borrowed from the snapshot.
pub(in crate::dag) struct Node<'s> {
    pub obj: ObjectRef,
    /// Its number in the build, when the build holds it (see [`super::slots`]).
    pub slot: Option<Slot>,
    pub routes: &'s [NodeRoute<'s>],
}

/// One route of a [`Node`].
pub(in crate::dag) struct NodeRoute<'s> {
    /// Its index in `spec.routes`.
    pub index: usize,
    /// What follows `spec.routes[i]` in the field path of the path match (`.match`, `.match.path`).
    pub path_suffix: &'static str,
    /// The path as written; None when absent (v1: everything).
    pub path_written: Option<Cow<'s, str>>,
    pub path: PathMatch,
    /// The route's own header conditions with their index in `match.headers`.
    pub headers: Vec<(usize, HeaderMatch)>,
    pub permit_insecure: bool,
    pub timeout: Option<Timeout>,
    pub retry: Option<RetryPolicy>,
    pub outlier: Option<OutlierDetection>,
    pub target: Target<'s>,
}

impl NodeRoute<'_> {
    /// `spec.routes[i]`.
    pub fn at(&self) -> String {
        format!("spec.routes[{}]", self.index)
    }

    /// Field path of the path match, for messages (`spec.routes[1].match`, `….match.path`).
    pub fn path_field(&self) -> String {
        format!("spec.routes[{}]{}", self.index, self.path_suffix)
    }

    /// Field path of one of the route's own header conditions.
    pub(super) fn header_field(&self, k: usize) -> String {
        format!("spec.routes[{}].match.headers[{k}]", self.index)
    }
}

pub(in crate::dag) enum Target<'s> {
    /// HTTP routing to these backends.
    Backends(Vec<NodeBackend<'s>>),
    /// TLS-terminated TCP proxying of the whole virtual host (v1 `tcp` backends, roots only).
    Tcp(Vec<NodeBackend<'s>>),
    /// Hands the route's space to another IngressRoute of the same API version.
    Delegate(ObjKey),
}

/// A Service port in the object's own namespace, with the cluster settings asked for.
pub(in crate::dag) struct NodeBackend<'s> {
    /// Field path, e.g. `spec.routes[1].services[0]`.
    pub field: BackendField,
    pub name: Cow<'s, str>,
    pub port: i32,
    pub weight: Option<u32>,
    pub protocol: UpstreamProtocol,
    pub lb: LbStrategy,
    pub health_check: Option<HealthCheckRef<'s>>,
    /// A v1 TLS backend's `validation` (its subject name in lower case); boxed, as few
    /// backends have one.
    pub validation: Option<Box<crate::api::contour_v1::UpstreamValidation>>,
}

/// A backend's health check: borrowed from the object, or shared by the backends of a prepared
/// object (one copy per object, where a copy per backend would make every backend ~90 bytes
/// larger).
pub(in crate::dag) enum HealthCheckRef<'s> {
    Borrowed(&'s HealthCheck),
    Shared(Arc<HealthCheck>),
}

impl HealthCheckRef<'_> {
    pub fn get(&self) -> &HealthCheck {
        match self {
            HealthCheckRef::Borrowed(h) => h,
            HealthCheckRef::Shared(h) => h,
        }
    }
}

/// The field path of a backend, written out only for a message.
pub(in crate::dag) enum BackendField {
    /// `spec.routes[route].list[item]`.
    Indexed {
        route: usize,
        list: &'static str,
        item: usize,
    },
    /// Spelled out already.
    Written(String),
}

impl fmt::Display for BackendField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendField::Indexed { route, list, item } => {
                write!(f, "spec.routes[{route}].{list}[{item}]")
            }
            BackendField::Written(s) => f.write_str(s),
        }
    }
}

/// What a delegation target turned out to be.
#[derive(Clone)]
pub(in crate::dag) enum Found<'s> {
    /// Not there; with a hint (e.g. an object of that name exists in the other API group).
    Missing(Option<String>),
    /// It has a virtualhost: roots cannot be delegated to.
    Root,
    /// It breaks its own single-object rules.
    Invalid,
    Vertex(Rc<Node<'s>>),
}
