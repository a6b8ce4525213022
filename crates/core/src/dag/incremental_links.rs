//! What links routing objects to each other for the incremental build (see the parent module):
//! the hosts and IngressRoute names each object names, the Services and Secrets it reads, and
//! copying an object between snapshots.

use std::sync::Arc;

use hashbrown::HashSet;

use super::{Link, gateway_part};
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::dag::links::{LinkRef, ingress_links, ingressroute_links};
use crate::store::{Objects, Prepare, Prepared, Snapshot};

/// Services and TLS Secrets of one namespace, by name.
#[derive(Default)]
pub(super) struct Names {
    pub(super) services: HashSet<Arc<str>>,
    pub(super) secrets: HashSet<Arc<str>>,
}

/// A Service or a TLS Secret a routing object names, in the object's namespace.
#[derive(Clone, Copy)]
pub(super) enum Named<'a> {
    Service(&'a str),
    Secret(&'a str),
}

impl Names {
    pub(super) fn has(&self, n: Named<'_>) -> bool {
        match n {
            Named::Service(name) => self.services.contains(name),
            Named::Secret(name) => self.secrets.contains(name),
        }
    }
}

/// Pushes the routing objects of namespace `ns` in `s` that name one of `names`.
pub(super) fn objects_naming(s: &Snapshot, ns: &str, names: &Names, out: &mut Vec<ObjectRef>) {
    fn scan<T>(objects: &Objects<T>, kind: Kind, ns: &str, names: &Names, out: &mut Vec<ObjectRef>)
    where
        T: NamesOf,
    {
        for (key, o) in objects.range_from(&ObjKey::new(ns, "")) {
            if *key.namespace != *ns {
                break;
            }
            let mut hit = false;
            o.names_of(&mut |n| hit |= names.has(n));
            if hit {
                out.push(ObjectRef {
                    kind,
                    key: key.clone(),
                });
            }
        }
    }
    scan(&s.ingresses, Kind::Ingress, ns, names, out);
    scan(
        &s.ingressroutes_v1beta1,
        Kind::IngressRouteV1beta1,
        ns,
        names,
        out,
    );
    scan(&s.ingressroutes_v1, Kind::IngressRouteV1, ns, names, out);
    scan(&s.routes_v1alpha1, Kind::RouteV1alpha1, ns, names, out);
}

/// The Services and TLS Secrets a routing object names.
pub(super) trait NamesOf {
    /// Calls `f` with every Service and TLS Secret the object names: every one its build can
    /// look up (in its namespace), and possibly more (a backend of a route its own rules
    /// refuse). Repeats possible.
    fn names_of(&self, f: &mut dyn FnMut(Named<'_>));
}

pub(super) fn tls_secret_of(v: Option<&crate::api::heptio_v1beta1::VirtualHost>) -> Option<&str> {
    Some(v?.tls.as_ref()?.secret_name.as_str())
}

impl NamesOf for crate::api::heptio_v1beta1::IngressRoute {
    fn names_of(&self, f: &mut dyn FnMut(Named<'_>)) {
        for (i, r) in self.spec.routes.iter().enumerate() {
            r.services.iter().for_each(|s| f(Named::Service(&s.name)));
            if r.service.is_some() {
                // The deprecated `service` field, decoded as the build decodes it.
                let (decoded, _) = crate::validate::ingressroute::v1beta1_services(r, i);
                decoded.iter().for_each(|(_, s)| f(Named::Service(&s.name)));
            }
        }
        if let Some(name) = tls_secret_of(self.spec.virtualhost.as_ref()) {
            f(Named::Secret(name));
        }
    }
}

impl NamesOf for crate::api::contour_v1::IngressRoute {
    fn names_of(&self, f: &mut dyn FnMut(Named<'_>)) {
        for r in &self.spec.routes {
            for b in r.services.iter().chain(&r.backends) {
                [
                    &b.http, &b.https, &b.http2, &b.h2c, &b.https2, &b.h2, &b.tcp,
                ]
                .into_iter()
                .flatten()
                .for_each(|name| f(Named::Service(name)));
                if let Some(v) = &b.validation {
                    f(Named::Secret(&v.ca_secret));
                }
            }
        }
        if let Some(name) = tls_secret_of(self.spec.virtualhost.as_ref()) {
            f(Named::Secret(name));
        }
    }
}

impl<T: Prepare + NamesOf> NamesOf for Prepared<T> {
    fn names_of(&self, f: &mut dyn FnMut(Named<'_>)) {
        (**self).names_of(f)
    }
}

impl NamesOf for crate::api::route_v1alpha1::Route {
    fn names_of(&self, f: &mut dyn FnMut(Named<'_>)) {
        for r in &self.spec.routes {
            r.upstreams
                .iter()
                .for_each(|u| f(Named::Service(&u.service_name)));
        }
    }
}

impl NamesOf for k8s_openapi::api::networking::v1::Ingress {
    fn names_of(&self, f: &mut dyn FnMut(Named<'_>)) {
        let Some(spec) = &self.spec else {
            return;
        };
        let paths = spec.rules.iter().flatten().filter_map(|r| r.http.as_ref());
        let backends = paths
            .flat_map(|h| h.paths.iter().map(|p| &p.backend))
            .chain(spec.default_backend.as_ref());
        for svc in backends.filter_map(|b| b.service.as_ref()) {
            f(Named::Service(&svc.name));
        }
        for tls in spec.tls.iter().flatten() {
            if let Some(name) = tls.secret_name.as_deref() {
                f(Named::Secret(name));
            }
        }
    }
}

pub(super) fn diff_keys<T: PartialEq>(a: &Objects<T>, b: &Objects<T>, mut f: impl FnMut(&ObjKey)) {
    crate::store::each_change(a, b, |k, _, _| f(k));
}

/// The hashes ([`LinkRef::hash`]) of the links of the Gateway API objects of `s`, as one routing
/// object (of `controller`'s classes), and how many objects that is; None when `s` holds none.
pub(in crate::dag) fn gateway_api_link_hashes(
    s: &Snapshot,
    controller: &str,
) -> Option<(Vec<u64>, usize)> {
    let links = gateway_part::links(s, controller)?;
    let hashes = (links.iter())
        .map(|l| match l {
            Link::Host(h) => LinkRef::Host(h).hash(),
            Link::IngressRoute(k) => LinkRef::IngressRoute(&k.namespace, &k.name).hash(),
        })
        .collect();
    Some((hashes, gateway_part::objects(s)))
}

/// Calls `f` with every routing object of a snapshot and its links (the Gateway API objects as
/// one, of `controller`'s classes).
pub(super) fn each_routing_object(
    s: &Snapshot,
    controller: &str,
    mut f: impl FnMut(ObjectRef, Vec<Link>),
) {
    fn each<T>(
        objects: &Objects<T>,
        kind: Kind,
        links: fn(&ObjKey, &T) -> Vec<Link>,
        f: &mut impl FnMut(ObjectRef, Vec<Link>),
    ) {
        for (key, o) in objects {
            let obj = ObjectRef {
                kind,
                key: key.clone(),
            };
            f(obj, links(key, o));
        }
    }
    each(&s.ingresses, Kind::Ingress, links_of_ingress, &mut f);
    let v1beta1 = &s.ingressroutes_v1beta1;
    each(v1beta1, Kind::IngressRouteV1beta1, links_of_v1beta1, &mut f);
    each(
        &s.ingressroutes_v1,
        Kind::IngressRouteV1,
        links_of_v1,
        &mut f,
    );
    each(
        &s.routes_v1alpha1,
        Kind::RouteV1alpha1,
        links_of_route,
        &mut f,
    );
    if let Some(links) = gateway_part::links(s, controller) {
        f(gateway_part::gateway_api(), links);
    }
}

/// The links of an IngressRoute of key `key` (either API version), one allocation for them.
pub(super) fn links_of_ingressroute<'a>(
    key: &'a ObjKey,
    delegates: impl Iterator<Item = &'a crate::api::Delegate> + Clone,
    fqdn: Option<&'a str>,
) -> Vec<Link> {
    let mut links = Vec::with_capacity(1 + delegates.clone().count() + usize::from(fqdn.is_some()));
    ingressroute_links(key, delegates, fqdn, &mut |l| links.push(l.to_link(key)));
    links
}

pub(super) fn links_of_v1beta1(
    key: &ObjKey,
    o: &Prepared<crate::api::heptio_v1beta1::IngressRoute>,
) -> Vec<Link> {
    let delegates = o.spec.routes.iter().filter_map(|r| r.delegate.as_ref());
    let fqdn = o.spec.virtualhost.as_ref().map(|v| v.fqdn.as_str());
    links_of_ingressroute(key, delegates, fqdn)
}

pub(super) fn links_of_v1(
    key: &ObjKey,
    o: &Prepared<crate::api::contour_v1::IngressRoute>,
) -> Vec<Link> {
    let delegates = o.spec.routes.iter().filter_map(|r| r.delegate.as_ref());
    let fqdn = o.spec.virtualhost.as_ref().map(|v| v.fqdn.as_str());
    links_of_ingressroute(key, delegates, fqdn)
}

pub(super) fn links_of_route(key: &ObjKey, o: &crate::api::route_v1alpha1::Route) -> Vec<Link> {
    vec![LinkRef::Host(&o.spec.host).to_link(key)]
}

/// The links of an Ingress, each once, in order.
pub(super) fn links_of_ingress(
    key: &ObjKey,
    o: &Prepared<k8s_openapi::api::networking::v1::Ingress>,
) -> Vec<Link> {
    let mut links = Vec::new();
    ingress_links(o, &mut |l| links.push(l.to_link(key)));
    links.sort();
    links.dedup();
    crate::dag::exact_vec(links)
}

/// The links of one routing object of the snapshot; None when it is not there.
pub(super) fn object_links(s: &Snapshot, obj: &ObjectRef, controller: &str) -> Option<Vec<Link>> {
    let key = &obj.key;
    Some(match obj.kind {
        _ if gateway_part::is_gateway_api(obj) => return gateway_part::links(s, controller),
        Kind::IngressRouteV1beta1 => links_of_v1beta1(key, s.ingressroutes_v1beta1.get(key)?),
        Kind::IngressRouteV1 => links_of_v1(key, s.ingressroutes_v1.get(key)?),
        Kind::RouteV1alpha1 => links_of_route(key, s.routes_v1alpha1.get(key)?),
        Kind::Ingress => links_of_ingress(key, s.ingresses.get(key)?),
        _ => return None,
    })
}

/// Copies one routing object from `from` into `to`.
pub(super) fn copy_object(from: &Snapshot, to: &mut Snapshot, obj: &ObjectRef) {
    fn copy<T>(from: &Objects<T>, to: &mut Objects<T>, key: &ObjKey) {
        if let Some(o) = from.get(key) {
            to.insert(key.clone(), o.clone());
        }
    }
    let key = &obj.key;
    match obj.kind {
        _ if gateway_part::is_gateway_api(obj) => gateway_part::copy(from, to),
        Kind::Ingress => copy(&from.ingresses, &mut to.ingresses, key),
        Kind::IngressRouteV1beta1 => copy(
            &from.ingressroutes_v1beta1,
            &mut to.ingressroutes_v1beta1,
            key,
        ),
        Kind::IngressRouteV1 => copy(&from.ingressroutes_v1, &mut to.ingressroutes_v1, key),
        Kind::RouteV1alpha1 => copy(&from.routes_v1alpha1, &mut to.routes_v1alpha1, key),
        _ => {}
    }
}
