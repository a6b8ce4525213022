//! The two halves of a parallel build ([`super::parallel`]): which routing objects each thread
//! builds, as masks over the snapshot's maps. Below the builder and its status slots, which
//! consult them.

use crate::api::Kind;

/// Which half (0 or 1) each routing object of a snapshot is in, per kind, by position in the
/// kind's key order.
#[derive(Debug, Default)]
pub(super) struct Sides {
    pub(super) ingresses: Vec<u8>,
    pub(super) ingressroutes_v1beta1: Vec<u8>,
    pub(super) ingressroutes_v1: Vec<u8>,
    pub(super) routes_v1alpha1: Vec<u8>,
    /// The half of the Gateway API objects, all of them.
    pub(super) gateway_api: u8,
}

/// The routing objects one thread of a parallel build builds.
#[derive(Clone, Copy)]
pub(super) struct Half<'a> {
    pub(super) sides: &'a Sides,
    pub(super) side: u8,
}

impl<'a> Half<'a> {
    /// Whether the object at `position` (in key order) among the objects of `kind` is in this
    /// half. Only routing objects are dealt into halves.
    pub(super) fn holds(self, kind: Kind, position: usize) -> bool {
        let sides = match kind {
            Kind::Ingress => &self.sides.ingresses,
            Kind::IngressRouteV1beta1 => &self.sides.ingressroutes_v1beta1,
            Kind::IngressRouteV1 => &self.sides.ingressroutes_v1,
            Kind::RouteV1alpha1 => &self.sides.routes_v1alpha1,
            _ => return false,
        };
        sides.get(position) == Some(&self.side)
    }

    /// Whether the Gateway API objects are in this half.
    pub(super) fn holds_gateway_api(self) -> bool {
        self.sides.gateway_api == self.side
    }

    /// The number of routing objects in this half (not counting the Gateway API objects).
    pub(super) fn routing_objects(self) -> usize {
        let s = self.sides;
        [
            &s.ingresses,
            &s.ingressroutes_v1beta1,
            &s.ingressroutes_v1,
            &s.routes_v1alpha1,
        ]
        .into_iter()
        .map(|v| v.iter().filter(|&&x| x == self.side).count())
        .sum()
    }
}
