//! The Gateway API processor's working state of one of sluice's Gateways ([`GatewayAcc`]): its
//! listeners, the ListenerSets attached to it ([`SetAcc`]), where it is served ([`Served`]) and
//! its TLS settings, which the route kinds attach to and [`super::gateway`] turns into statuses.
//!
//! Plain data, below the modules that fill and read it (ListenerSets, addresses, every route
//! kind): it imports none of them, only the shared listener types of
//! [`super::gateway_common`] and the resolved `spec.tls.frontend` of [`super::frontend_tls`].

use std::collections::BTreeMap;
use std::ops::Range;

use super::addresses::NoAddress;
use super::frontend_tls::Frontend;
use super::gateway_common::{Listener, Namespaces};
use super::model::{EntryKey, GatewayCondition, ListenerStatus};
use crate::api::{ObjKey, ObjectRef};

/// One of sluice's Gateways, as the routes see it.
pub(super) struct GatewayAcc {
    pub(super) obj: ObjectRef,
    pub(super) generation: Option<i64>,
    /// Its listeners in order, None for those not accepted (their status is in `listener_status`):
    /// the Gateway's own (the first `own_listeners`), then those of each ListenerSet attached to
    /// it (oldest first, [`super::listenerset`]).
    pub(super) listeners: Vec<Option<Listener>>,
    pub(super) listener_status: Vec<ListenerStatus>,
    /// How many of `listeners` are the Gateway's own.
    pub(super) own_listeners: usize,
    /// Which namespaces' ListenerSets it takes (`spec.allowedListeners`); None: none.
    pub(super) allowed_listeners: Option<Namespaces>,
    /// Every ListenerSet of sluice's naming this Gateway as its parent, attached or not.
    pub(super) listener_sets: BTreeMap<ObjKey, SetAcc>,
    /// The Gateway's own problems (None: accepted).
    pub(super) invalid: Option<String>,
    /// The reason of `invalid`'s `Accepted=False`: `Invalid`, or `InvalidParameters` for a
    /// `spec.infrastructure.parametersRef`.
    pub(super) invalid_reason: &'static str,
    /// The port and hostname of each accepted listener that takes HTTP routes, as listener
    /// isolation reads them ([`super::gwroute::taken_by_narrower_listener`]).
    pub(super) http_hostnames: Vec<(i32, Option<String>)>,
    /// Where the Gateway is served: its own address (`--gateway-addresses`), why it has none, or
    /// on Envoy's shared listeners.
    pub(super) served: Served,
    /// The client certificate Envoy presents to TLS backends (`spec.tls.backend`): the
    /// Gateway's `ResolvedRefs` condition and, when it resolves, its key among the secrets.
    /// None when the Gateway names none.
    pub(super) backend_client: Option<(GatewayCondition, Option<String>)>,
    /// `InsecureFrontendValidationMode=True` while `spec.tls.frontend` lets clients without a
    /// valid certificate in ([`super::frontend_tls`]).
    pub(super) insecure_frontend: Option<GatewayCondition>,
    /// `spec.tls.frontend`, resolved: the client certificate validation of its ports, which
    /// the HTTPS listeners of its ListenerSets on those ports get too.
    pub(super) frontend: Frontend,
}

/// Where a Gateway's listeners are served.
pub(super) enum Served {
    /// On Envoy's shared listeners (no `--gateway-addresses`).
    Shared,
    /// At an address of its own, Envoy listening on each listener's port there.
    At(std::net::IpAddr),
    /// Nowhere: it has no address ([`NoAddress`] says why).
    Nowhere(NoAddress),
}

impl GatewayAcc {
    /// Where routes attached to a listener of this Gateway on `port` are served: None when
    /// nowhere (the Gateway has no address), Some(None) on Envoy's shared listeners, else at
    /// that port of the Gateway's address.
    pub(super) fn scope(&self, port: i32) -> Option<Option<EntryKey>> {
        match &self.served {
            Served::Shared => Some(None),
            Served::At(_) => Some(Some(EntryKey {
                gateway: self.obj.key.clone(),
                port: u16::try_from(port).ok()?,
            })),
            Served::Nowhere(_) => None,
        }
    }
}

/// A ListenerSet of sluice's: one whose parent is a Gateway of sluice's.
pub(super) struct SetAcc {
    pub(super) obj: ObjectRef,
    /// Where its listeners are in the Gateway's ([`GatewayAcc::listeners`]); empty when it is not
    /// attached.
    pub(super) range: Range<usize>,
    /// Why it is not attached: the reason and message of its `Accepted=False`.
    pub(super) refused: Option<crate::validate::FieldError>,
}
