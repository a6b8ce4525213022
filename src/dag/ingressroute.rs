//! IngressRoute processors: `contour.heptio.com/v1beta1` (seed 000) and `projectcontour.io/v1`
//! (seed 002). Roots claim their fqdn; the owner of each host is served with its TLS settings and
//! everything it delegates to (see [`super::delegation`]); vertices no served root reaches are
//! orphaned. The rules are written down in docs/ingressroute.md.

use std::rc::Rc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Builder;
use super::delegation::{Found, Node, NodeBackend, NodeRoute, Target, Walk};
use super::model::*;
use crate::api::contour_v1::{self, BackendProtocol};
use crate::api::heptio_v1beta1::{self, VirtualHost};
use crate::api::status::reason;
use crate::api::{Delegate, Kind, ObjKey, ObjectRef};
use crate::store::Objects;
use crate::validate::common::{Timeout, parse_timeout};
use crate::validate::ingressroute::{
    v1_backends_field, v1_header_match, v1_path_match, v1beta1_services, validate_v1,
    validate_v1beta1,
};
use crate::validate::{Verdict, quote};

/// Tracks every IngressRoute, runs its single-object rules and lets valid roots in allowed
/// namespaces claim their fqdn.
pub fn claim_hosts(b: &mut Builder<'_>) {
    let snap = b.snapshot;
    for (key, o) in &snap.ingressroutes_v1beta1 {
        let obj = ObjectRef {
            kind: Kind::IngressRouteV1beta1,
            key: key.clone(),
        };
        let vh = o.spec.virtualhost.as_ref();
        claim(b, &obj, &o.metadata, validate_v1beta1(o), vh);
    }
    for (key, o) in &snap.ingressroutes_v1 {
        let obj = ObjectRef {
            kind: Kind::IngressRouteV1,
            key: key.clone(),
        };
        let vh = o.spec.virtualhost.as_ref();
        claim(b, &obj, &o.metadata, validate_v1(o), vh);
    }
}

fn claim(
    b: &mut Builder<'_>,
    obj: &ObjectRef,
    meta: &ObjectMeta,
    verdict: Verdict,
    vh: Option<&VirtualHost>,
) {
    b.track(obj, meta);
    if !verdict.allowed() {
        for e in verdict.errors {
            b.set_invalid(obj, e.reason, e.to_string());
        }
        return;
    }
    let Some(vh) = vh else {
        return;
    };
    let ns = &obj.key.namespace;
    if !b.options.root_allowed_in(ns) {
        let allowed = b.options.root_namespaces.join(", ");
        b.set_invalid(
            obj,
            reason::ROOT_NAMESPACE,
            format!(
                "root IngressRoute in namespace {} is not allowed; root namespaces are: {allowed}",
                quote(ns)
            ),
        );
        return;
    }
    b.claim_host(&vh.fqdn, obj.clone(), meta.creation_timestamp.clone());
}

/// Serves the v1beta1 roots that own their host, then marks unreached vertices orphaned.
pub fn build_v1beta1(b: &mut Builder<'_>) {
    let snap = b.snapshot;
    let objects = &snap.ingressroutes_v1beta1;
    let other = &snap.ingressroutes_v1;
    let find = |key: &ObjKey| match objects.get(key) {
        None => Found::Missing(other_group_hint(
            other.contains_key(key),
            Kind::IngressRouteV1,
        )),
        Some(o) if o.spec.virtualhost.is_some() => Found::Root,
        Some(o) if !validate_v1beta1(o).allowed() => Found::Invalid,
        Some(o) => Found::Vertex(Rc::new(lower_v1beta1(key, o))),
    };
    let walk = Walk::new(find, false);
    build_version(
        b,
        Kind::IngressRouteV1beta1,
        objects,
        walk,
        |o| o.spec.virtualhost.as_ref(),
        lower_v1beta1,
    );
}

/// Serves the v1 roots that own their host, then marks unreached vertices orphaned.
pub fn build_v1(b: &mut Builder<'_>) {
    let snap = b.snapshot;
    let objects = &snap.ingressroutes_v1;
    let other = &snap.ingressroutes_v1beta1;
    let find = |key: &ObjKey| match objects.get(key) {
        None => Found::Missing(other_group_hint(
            other.contains_key(key),
            Kind::IngressRouteV1beta1,
        )),
        Some(o) if o.spec.virtualhost.is_some() => Found::Root,
        Some(o) if !validate_v1(o).allowed() => Found::Invalid,
        Some(o) => Found::Vertex(Rc::new(lower_v1(key, o))),
    };
    let walk = Walk::new(find, true);
    build_version(
        b,
        Kind::IngressRouteV1,
        objects,
        walk,
        |o| o.spec.virtualhost.as_ref(),
        lower_v1,
    );
}

/// Why a delegate of the same name in the other API group does not count.
fn other_group_hint(exists: bool, other: Kind) -> Option<String> {
    exists.then(|| {
        format!(
            "there is an {} of that name, but delegation stays within one API group",
            other
        )
    })
}

/// The processor body both versions share.
fn build_version<'s, T, F>(
    b: &mut Builder<'_>,
    kind: Kind,
    objects: &'s Objects<T>,
    mut walk: Walk<F>,
    vhost_of: impl Fn(&'s T) -> Option<&'s VirtualHost>,
    lower: impl Fn(&ObjKey, &'s T) -> Node,
) where
    F: Fn(&ObjKey) -> Found,
{
    // Roots to serve, decided before any walk: valid, and owner of their host.
    let mut roots = Vec::new();
    for (key, o) in objects {
        let obj = ObjectRef {
            kind,
            key: key.clone(),
        };
        let Some(vh) = vhost_of(o) else {
            continue;
        };
        if b.host_owner(&vh.fqdn) == Some(&obj) && b.state_of(&obj) != Some(State::Invalid) {
            roots.push((key, o, vh));
        }
    }
    for (key, o, vh) in roots {
        let node = lower(key, o);
        if let Some(tls) = &vh.tls {
            match b.tls_secret(&key.namespace, &tls.secret_name) {
                Err(m) => {
                    b.set_invalid(
                        &node.obj,
                        m.reason,
                        format!("spec.virtualhost.tls.secretName: {}", m.message),
                    );
                    continue;
                }
                Ok(secret) => {
                    b.vhost(&vh.fqdn).tls = Some(VhostTls {
                        secret,
                        min_version: tls.minimum_protocol_version.unwrap_or_default(),
                    });
                }
            }
        }
        walk.walk_root(b, &node, &vh.fqdn);
    }
    let reached = walk.finish(b);
    for (key, o) in objects {
        if vhost_of(o).is_none() && !reached.contains(key) {
            b.set_orphaned(&ObjectRef {
                kind,
                key: key.clone(),
            });
        }
    }
}

fn delegate_key(own_ns: &str, d: &Delegate) -> ObjKey {
    let ns = d
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(own_ns);
    ObjKey::new(ns, d.name.clone())
}

/// Lowers a v1beta1 IngressRoute (valid by its own rules) for the walk.
fn lower_v1beta1(key: &ObjKey, o: &heptio_v1beta1::IngressRoute) -> Node {
    let spec = &o.spec;
    let routes = spec
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let target = match &r.delegate {
                Some(d) => Target::Delegate(delegate_key(&key.namespace, d)),
                None => Target::Backends(
                    v1beta1_services(r, i)
                        .0
                        .into_iter()
                        .map(|(field, s)| NodeBackend {
                            field,
                            name: s.name,
                            port: s.port,
                            weight: s.weight,
                            protocol: UpstreamProtocol::Http,
                            lb: s.strategy.or(spec.strategy).unwrap_or_default(),
                            health_check: s.health_check.or_else(|| spec.health_check.clone()),
                        })
                        .collect(),
                ),
            };
            NodeRoute {
                at: format!("spec.routes[{i}]"),
                path_field: format!("spec.routes[{i}].match"),
                path_written: Some(r.match_.clone()),
                path: PathMatch::prefix(&r.match_),
                headers: Vec::new(),
                permit_insecure: r.permit_insecure,
                timeout: None,
                retry: None,
                outlier: None,
                target,
            }
        })
        .collect();
    Node {
        obj: ObjectRef {
            kind: Kind::IngressRouteV1beta1,
            key: key.clone(),
        },
        routes,
    }
}

fn upstream_protocol(p: BackendProtocol) -> UpstreamProtocol {
    match p {
        BackendProtocol::Http => UpstreamProtocol::Http,
        BackendProtocol::Https => UpstreamProtocol::Https,
        BackendProtocol::H2c => UpstreamProtocol::H2c,
        BackendProtocol::H2 => UpstreamProtocol::H2,
        BackendProtocol::Tcp => UpstreamProtocol::Tcp,
    }
}

fn duration(path: &str, value: Option<&str>) -> Option<Timeout> {
    value.and_then(|v| parse_timeout(path, v).ok())
}

/// Lowers a v1 IngressRoute (valid by its own rules) for the walk.
fn lower_v1(key: &ObjKey, o: &contour_v1::IngressRoute) -> Node {
    let spec = &o.spec;
    let routes =
        spec.routes
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let at = format!("spec.routes[{i}]");
                let field = v1_backends_field(r);
                let backends: Vec<NodeBackend> = r
                    .backend_list()
                    .iter()
                    .enumerate()
                    .filter_map(|(j, be)| {
                        let (protocol, name) = be.protocol_and_name()?;
                        Some(NodeBackend {
                            field: format!("{at}.{field}[{j}]"),
                            name: name.to_string(),
                            port: be.port,
                            weight: be.weight,
                            protocol: upstream_protocol(protocol),
                            lb: be.strategy.or(spec.strategy).unwrap_or_default(),
                            health_check: be
                                .health_check
                                .clone()
                                .or_else(|| spec.health_check.clone()),
                        })
                    })
                    .collect();
                let target = match &r.delegate {
                    Some(d) => Target::Delegate(delegate_key(&key.namespace, d)),
                    None if backends
                        .iter()
                        .any(|nb| nb.protocol == UpstreamProtocol::Tcp) =>
                    {
                        Target::Tcp(backends)
                    }
                    None => Target::Backends(backends),
                };
                let headers = r
                    .match_
                    .iter()
                    .flat_map(|m| m.headers.iter().enumerate())
                    .filter_map(|(k, c)| {
                        v1_header_match(c).map(|h| (format!("{at}.match.headers[{k}]"), h))
                    })
                    .collect();
                let timeout = duration(
                    "",
                    r.timeout_policy.as_ref().and_then(|t| t.request.as_deref()),
                );
                let (retry, outlier) = match &r.failure_policy {
                    None => (None, None),
                    Some(f) => {
                        let retry = f.retry_policy_enabled.unwrap_or(true).then(|| RetryPolicy {
                            count: f.count.unwrap_or(1),
                            per_try_timeout: match duration("", f.per_try_timeout.as_deref()) {
                                Some(Timeout::After(d)) => Some(d),
                                _ => None,
                            },
                        });
                        let outlier = f.passive_health_check_enabled.unwrap_or(true).then(|| {
                            OutlierDetection {
                                consecutive_5xx: f.count.unwrap_or(5).max(1),
                            }
                        });
                        (retry, outlier)
                    }
                };
                NodeRoute {
                    path_field: format!("{at}.match.path"),
                    path_written: r.match_.as_ref().and_then(|m| m.path.clone()),
                    path: v1_path_match(r.match_.as_ref()),
                    at,
                    headers,
                    permit_insecure: r.permit_insecure,
                    timeout,
                    retry,
                    outlier,
                    target,
                }
            })
            .collect();
    Node {
        obj: ObjectRef {
            kind: Kind::IngressRouteV1,
            key: key.clone(),
        },
        routes,
    }
}
