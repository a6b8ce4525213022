//! What cluster mode watches, and how each kind is found in the cluster.
//!
//! Built-in kinds (Ingress, IngressClass, Service, EndpointSlice, Secret, Namespace, ConfigMap) are always
//! served. sluice's
//! own CRDs and the Gateway API kinds are watched only when discovery finds them; kinds missing at
//! start are looked for again periodically (a CRD installed later is picked up without a restart).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};

use sluice_core::api::Kind;

/// The only Secrets routing can use. Secrets are watched with this field selector so that a
/// cluster's thousands of unrelated Secrets are never listed into memory.
pub const TLS_SECRET_FIELD_SELECTOR: &str = "type=kubernetes.io/tls";

/// Every kind cluster mode watches, in watch start order.
pub const WATCHED: [Kind; 19] = Kind::ALL;

/// The kinds the admission webhook's index reads (`webhook::index::Index::build`): the roots
/// that claim hosts, IngressClasses (the default class, a class's existence), GatewayClasses and
/// Gateways (whose Gateway API objects are sluice's). What `sluice serve --role webhook` watches:
/// no Secrets, no Services, no EndpointSlices, no Namespaces, so the process that parses
/// untrusted AdmissionReviews never holds a private key (docs/webhook.md, "Two layouts").
pub const WEBHOOK_WATCHED: [Kind; 6] = [
    Kind::IngressClass,
    Kind::IngressRouteV1beta1,
    Kind::IngressRouteV1,
    Kind::RouteV1alpha1,
    Kind::GatewayClass,
    Kind::Gateway,
];

/// The resource to watch for a built-in kind (always served by a 1.29+ apiserver).
pub fn builtin_resource(kind: Kind) -> Option<ApiResource> {
    Some(match kind {
        Kind::Ingress => ApiResource::erase::<Ingress>(&()),
        Kind::IngressClass => ApiResource::erase::<IngressClass>(&()),
        Kind::Service => ApiResource::erase::<Service>(&()),
        Kind::EndpointSlice => ApiResource::erase::<EndpointSlice>(&()),
        Kind::Secret => ApiResource::erase::<Secret>(&()),
        Kind::Namespace => ApiResource::erase::<Namespace>(&()),
        Kind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
        _ => return None,
    })
}

/// The field selector a kind is watched with, if any.
pub fn field_selector(kind: Kind) -> Option<&'static str> {
    (kind == Kind::Secret).then_some(TLS_SECRET_FIELD_SELECTOR)
}

/// Group, version and kind sluice reads an optional kind at.
fn wanted(kind: Kind) -> GroupVersionKind {
    let api_version = kind.api_version();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind.kind())
}

/// Whether a served version is acceptable for a kind. sluice's own kinds must be served at exactly
/// the version sluice reads (IngressRoute exists in two unrelated groups and versions); Gateway API
/// kinds are read at the version the gateway-api types are generated for when it is served, else at
/// the group's preferred version (older Gateway API releases: ReferenceGrant v1beta1, TLSRoute
/// v1alpha2), which decodes because those schemas are a subset.
fn accepts_any_version(kind: Kind) -> bool {
    kind.group() == "gateway.networking.k8s.io"
}

/// Finds the optional kinds (CRDs) the cluster serves. Kinds not found are absent from the map.
/// Errors only when discovery itself fails (apiserver unreachable).
pub async fn discover(
    client: &Client,
    kinds: &[Kind],
) -> Result<BTreeMap<Kind, ApiResource>, kube::Error> {
    let mut found = BTreeMap::new();
    let groups = client.list_api_groups().await?;
    let mut by_group: BTreeMap<&str, Vec<Kind>> = BTreeMap::new();
    for &kind in kinds {
        if let Some(ar) = builtin_resource(kind) {
            found.insert(kind, ar);
        } else {
            by_group.entry(kind.group()).or_default().push(kind);
        }
    }
    for (group, kinds) in by_group {
        let Some(served) = groups.groups.iter().find(|g| g.name == group) else {
            continue;
        };
        let api_group = match kube::discovery::group(client, &served.name).await {
            Ok(g) => g,
            Err(kube::Error::Discovery(_)) => continue,
            Err(e) => return Err(e),
        };
        for kind in kinds {
            let want = wanted(kind);
            let exact = api_group
                .versioned_resources(&want.version)
                .into_iter()
                .find(|(ar, _)| ar.kind == want.kind);
            let chosen = match exact {
                Some((ar, _)) => Some(ar),
                // The group's preferred version first, then the others in the order served (a
                // kind need not be served at the group's preferred version: TCPRoute of Gateway
                // API v1.5 is served at v1alpha2 only).
                None if accepts_any_version(kind) => (api_group.recommended_kind(&want.kind))
                    .map(|(ar, _)| ar)
                    .or_else(|| {
                        (api_group.versions())
                            .flat_map(|v| api_group.versioned_resources(v))
                            .find(|(ar, _)| ar.kind == want.kind)
                            .map(|(ar, _)| ar)
                    }),
                None => None,
            };
            if let Some(ar) = chosen {
                found.insert(kind, ar);
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wanted_splits_group_and_version() {
        let gvk = wanted(Kind::IngressRouteV1beta1);
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("contour.heptio.com", "v1beta1", "IngressRoute")
        );
        let gvk = wanted(Kind::TcpRoute);
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("gateway.networking.k8s.io", "v1", "TCPRoute")
        );
    }

    #[test]
    fn builtins_have_resources_and_only_secrets_are_filtered() {
        let ar = builtin_resource(Kind::EndpointSlice).unwrap();
        assert_eq!(
            (ar.api_version.as_str(), ar.plural.as_str()),
            ("discovery.k8s.io/v1", "endpointslices")
        );
        assert!(builtin_resource(Kind::IngressRouteV1).is_none());
        for kind in WATCHED {
            let expected = (kind == Kind::Secret).then_some("type=kubernetes.io/tls");
            assert_eq!(field_selector(kind), expected, "{kind}");
        }
    }

    #[test]
    fn the_webhook_role_watches_no_secrets_nor_what_only_envoy_needs() {
        for kind in [
            Kind::Secret,
            Kind::Service,
            Kind::EndpointSlice,
            Kind::Namespace,
        ] {
            assert!(!WEBHOOK_WATCHED.contains(&kind), "{kind}");
        }
        assert!(WEBHOOK_WATCHED.iter().all(|k| WATCHED.contains(k)));
    }
}
