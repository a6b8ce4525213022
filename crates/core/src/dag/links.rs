//! What a routing object links to: the hosts and IngressRoute names it shares with others.
//! The incremental build ([`super::incremental`]) rebuilds objects linked to a change; a parallel
//! build ([`super::parallel`]) deals linked objects into the same half, by the links' hashes each
//! object's preparation computed when it arrived.

use std::sync::Arc;

use super::model::CATCH_ALL_HOST;
use crate::api::ObjKey;

/// What routing objects share: a host (in lower case) or an IngressRoute name. Objects that
/// share one affect each other (`dag::incremental`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Link {
    /// In lower case.
    Host(Arc<str>),
    IngressRoute(ObjKey),
}

/// A link as a routing object names it, borrowed from the object (a host in any letter case).
#[derive(Clone, Copy, Debug)]
pub(super) enum LinkRef<'a> {
    Host(&'a str),
    /// namespace, name
    IngressRoute(&'a str, &'a str),
}

/// The hasher of [`LinkRef::hash`]: one per process, randomly seeded, so the hashes an object's
/// preparation computed when it arrived match those a build computes later.
static LINK_HASHER: std::sync::LazyLock<hashbrown::DefaultHashBuilder> =
    std::sync::LazyLock::new(Default::default);

impl LinkRef<'_> {
    /// The link's hash, the same for a host in any letter case (a parallel build deals objects
    /// into halves by these; see `parallel::sides`).
    pub(super) fn hash(self) -> u64 {
        use std::hash::BuildHasher;
        let hasher = &*LINK_HASHER;
        match self {
            LinkRef::Host(h) if h.bytes().any(|c| c.is_ascii_uppercase()) => {
                hasher.hash_one((0u8, h.to_ascii_lowercase().as_str()))
            }
            LinkRef::Host(h) => hasher.hash_one((0u8, h)),
            LinkRef::IngressRoute(ns, name) => hasher.hash_one((1u8, ns, name)),
        }
    }

    /// The link, named by the object of key `key`: its namespace and name are shared with the
    /// key where they are the same.
    pub(super) fn to_link(self, key: &ObjKey) -> Link {
        let shared = |s: &str, own: &Arc<str>| match **own == *s {
            true => own.clone(),
            false => Arc::from(s),
        };
        match self {
            LinkRef::Host(h) if h.bytes().any(|c| c.is_ascii_uppercase()) => {
                Link::Host(Arc::from(h.to_ascii_lowercase()))
            }
            LinkRef::Host(h) => Link::Host(Arc::from(h)),
            LinkRef::IngressRoute(ns, name) => Link::IngressRoute(ObjKey {
                namespace: shared(ns, &key.namespace),
                name: shared(name, &key.name),
            }),
        }
    }
}

/// The links of an IngressRoute (either API version): its own name, the names it delegates to,
/// its fqdn.
pub(super) fn ingressroute_links<'a>(
    key: &'a ObjKey,
    delegates: impl Iterator<Item = &'a crate::api::Delegate>,
    fqdn: Option<&'a str>,
    f: &mut impl FnMut(LinkRef<'a>),
) {
    f(LinkRef::IngressRoute(&key.namespace, &key.name));
    for d in delegates {
        let ns = d.namespace_in(&key.namespace);
        f(LinkRef::IngressRoute(ns, &d.name));
    }
    if let Some(h) = fqdn {
        f(LinkRef::Host(h));
    }
}

/// The links of an Ingress: its TLS hosts, its rules' hosts (the catch-all host for a rule
/// without one) and the catch-all host for a default backend; repeats possible.
pub(super) fn ingress_links<'a>(
    o: &'a k8s_openapi::api::networking::v1::Ingress,
    f: &mut impl FnMut(LinkRef<'a>),
) {
    let Some(spec) = &o.spec else {
        return;
    };
    for tls in spec.tls.iter().flatten() {
        for h in tls.hosts.iter().flatten() {
            f(LinkRef::Host(h));
        }
    }
    for rule in spec.rules.iter().flatten() {
        let host = rule.host.as_deref().filter(|h| !h.is_empty());
        f(LinkRef::Host(host.unwrap_or(CATCH_ALL_HOST)));
    }
    if spec.default_backend.is_some() {
        f(LinkRef::Host(CATCH_ALL_HOST));
    }
}
