//! The stream algorithm as it was before types were skipped by their basis (every request looked
//! at every type, in full): the oracle of the differential tests in `stream_tests.rs`. Test-only;
//! changed only with the protocol rules it states (as for SotW responses of routes, endpoints and
//! secrets carrying only what changed), never for speed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};

use super::super::{Mode, Response, Stats};
use crate::xds::cache::{Resource, Snapshot, TypeSnapshot, set_version};
use crate::xds::resources::ResourceType;
use crate::xds::wire::{DeltaResponse, SotwResponse};

#[derive(Debug)]
struct InFlight {
    nonce: String,
    /// What the client holds once it accepts this response.
    state_after: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct TypeState {
    /// A request for this type was seen.
    subscribed: bool,
    wildcard: bool,
    names: BTreeSet<String>,
    /// What the client holds if it accepted everything sent (name → version).
    sent: BTreeMap<String, String>,
    /// Bodies of what was sent, to keep serving them during make-before-break.
    sent_bodies: BTreeMap<String, Arc<Resource>>,
    /// What the client acknowledged.
    acked: BTreeMap<String, String>,
    in_flight: Option<InFlight>,
    last_nonce: String,
    /// Answer the next time even if nothing changed (initial request, new names).
    must_respond: bool,
    /// Delta: names newly subscribed, to be told "does not exist" when absent.
    new_names: BTreeSet<String>,
    /// The last response of this type was refused.
    last_nacked: bool,
}

impl TypeState {
    fn in_scope(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }
}

/// One ADS stream.
#[derive(Debug)]
pub struct RefStream {
    mode: Mode,
    node: String,
    types: BTreeMap<ResourceType, TypeState>,
    nonce_seq: u64,
    stats: Arc<Stats>,
    /// The snapshot's resources of each type when the type was last looked at.
    seen: BTreeMap<ResourceType, Arc<TypeSnapshot>>,
    /// Types to look at on the next pump.
    dirty: BTreeSet<ResourceType>,
}

impl RefStream {
    pub fn new(mode: Mode, stats: Arc<Stats>) -> RefStream {
        stats.streams.inc();
        RefStream {
            mode,
            node: String::new(),
            types: ResourceType::ALL
                .into_iter()
                .map(|t| (t, TypeState::default()))
                .collect(),
            nonce_seq: 0,
            stats,
            seen: BTreeMap::new(),
            dirty: BTreeSet::new(),
        }
    }

    fn st(&mut self, t: ResourceType) -> &mut TypeState {
        self.types.entry(t).or_default()
    }

    /// Handles an ACK or NACK of the in-flight response of `t`. Returns false for a stale nonce.
    fn settle(&mut self, t: ResourceType, nonce: &str, error: Option<String>) -> bool {
        let node = self.node.clone();
        let stats = self.stats.clone();
        let st = self.st(t);
        let Some(f) = st.in_flight.take_if(|f| f.nonce == nonce) else {
            return nonce == st.last_nonce;
        };
        match error {
            Some(message) => {
                stats.nacks.inc();
                st.last_nacked = true;
                tracing::warn!(
                    node = %node,
                    r#type = t.short(),
                    nonce,
                    error = %message,
                    "Envoy rejected configuration; it keeps its last accepted configuration"
                );
            }
            None => {
                st.last_nacked = false;
                let before = std::mem::replace(&mut st.acked, f.state_after);
                if t == ResourceType::Cluster {
                    // A changed cluster is rebuilt by Envoy and warms again: give it its
                    // endpoints again.
                    let changed: Vec<String> = before
                        .iter()
                        .filter(|(n, v)| st.acked.get(*n).is_some_and(|nv| nv != *v))
                        .map(|(n, _)| n.clone())
                        .collect();
                    if !changed.is_empty() {
                        let eds = self.st(ResourceType::Endpoint);
                        eds.must_respond = true;
                        for n in changed {
                            eds.sent.remove(&n);
                        }
                    }
                }
            }
        }
        true
    }

    /// A state-of-the-world request.
    pub fn on_sotw_request(&mut self, req: &DiscoveryRequest, snap: &Snapshot) -> Vec<Response> {
        if self.node.is_empty()
            && let Some(n) = &req.node
        {
            self.node = n.id.clone();
        }
        let Some(t) = ResourceType::from_type_url(&req.type_url) else {
            tracing::debug!(type_url = %req.type_url, "request for a type sluice does not serve");
            return Vec::new();
        };
        if req.response_nonce.is_empty() {
            let st = self.st(t);
            st.must_respond = true;
            st.sent.clear();
            st.sent_bodies.clear();
        } else {
            let error = req.error_detail.as_ref().map(|e| e.message.clone());
            if !self.settle(t, &req.response_nonce, error) {
                tracing::debug!(r#type = t.short(), nonce = %req.response_nonce, "stale nonce ignored");
                return Vec::new();
            }
        }
        let names: BTreeSet<String> = req.resource_names.iter().cloned().collect();
        let wildcard = names.contains("*") || (names.is_empty() && t.wildcard_by_default());
        let st = self.st(t);
        st.subscribed = true;
        let names: BTreeSet<String> = names.into_iter().filter(|n| n != "*").collect();
        if names != st.names || wildcard != st.wildcard {
            st.must_respond = true;
            st.names = names;
            st.wildcard = wildcard;
        }
        self.pump_all(snap)
    }

    /// An incremental (delta) request.
    pub fn on_delta_request(
        &mut self,
        req: &DeltaDiscoveryRequest,
        snap: &Snapshot,
    ) -> Vec<Response> {
        if self.node.is_empty()
            && let Some(n) = &req.node
        {
            self.node = n.id.clone();
        }
        let Some(t) = ResourceType::from_type_url(&req.type_url) else {
            tracing::debug!(type_url = %req.type_url, "request for a type sluice does not serve");
            return Vec::new();
        };
        if req.response_nonce.is_empty() {
            let st = self.st(t);
            if !st.subscribed {
                st.subscribed = true;
                st.must_respond = true;
                st.wildcard = req.resource_names_subscribe.is_empty() && t.wildcard_by_default();
                // Sorted so that the state does not depend on HashMap order.
                let known: BTreeMap<String, String> = req
                    .initial_resource_versions
                    .iter()
                    .map(|(n, v)| (n.clone(), v.clone()))
                    .collect();
                st.sent.extend(known.clone());
                st.acked.extend(known);
            }
        } else {
            let error = req.error_detail.as_ref().map(|e| e.message.clone());
            self.settle(t, &req.response_nonce, error);
        }
        let st = self.st(t);
        for n in &req.resource_names_subscribe {
            if n == "*" {
                st.wildcard = true;
                st.must_respond = true;
            } else if st.names.insert(n.clone()) {
                st.must_respond = true;
                st.new_names.insert(n.clone());
            }
        }
        for n in &req.resource_names_unsubscribe {
            if n == "*" {
                st.wildcard = false;
            } else {
                st.names.remove(n);
                st.new_names.remove(n);
            }
        }
        // The client forgets what it no longer subscribes to.
        let gone: Vec<String> = st
            .sent
            .keys()
            .filter(|n| !st.in_scope(n))
            .cloned()
            .collect();
        for n in gone {
            st.sent.remove(&n);
            st.acked.remove(&n);
            st.sent_bodies.remove(&n);
        }
        self.pump_all(snap)
    }

    /// The cache moved to a new snapshot. Only types whose resources changed are looked at (and
    /// clusters, endpoints and secrets when listeners or routes changed, since make-before-break
    /// ties them together): for any other type nothing the answer depends on moved since it was
    /// last computed, as every request recomputes all types. An endpoint change among 10k clusters
    /// thus costs the endpoints, not a walk over every resource.
    pub fn on_snapshot(&mut self, snap: &Snapshot) -> Vec<Response> {
        for t in ResourceType::ALL {
            let now = snap.shared(t);
            let same = match (self.seen.get(&t), now) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if !same {
                self.dirty.insert(t);
            }
        }
        if self.dirty.iter().any(|t| t.is_routing()) {
            self.dirty.extend([
                ResourceType::Cluster,
                ResourceType::Endpoint,
                ResourceType::Secret,
            ]);
        }
        self.pump(snap)
    }

    /// After a request: every type may have something to send.
    fn pump_all(&mut self, snap: &Snapshot) -> Vec<Response> {
        self.dirty.extend(ResourceType::ALL);
        self.pump(snap)
    }

    /// What the client should hold of type `t` from the snapshot alone.
    fn base(&self, t: ResourceType, snap: &Snapshot) -> BTreeMap<String, Arc<Resource>> {
        let st = &self.types[&t];
        snap.of(t)
            .iter()
            .filter(|(n, _)| st.in_scope(n))
            .map(|(n, r)| (n.to_string(), r.clone()))
            .collect()
    }

    /// Listeners and routes acknowledged at the snapshot's content.
    fn routes_settled(&self, snap: &Snapshot) -> bool {
        ResourceType::ALL
            .into_iter()
            .filter(|t| t.is_routing())
            .all(|t| {
                let st = &self.types[&t];
                if !st.subscribed {
                    return true;
                }
                let want: BTreeMap<String, String> = self
                    .base(t, snap)
                    .into_iter()
                    .map(|(n, r)| (n, r.version.to_string()))
                    .collect();
                st.in_flight.is_none() && st.acked == want
            })
    }

    /// Clusters acknowledged and their endpoints requested and acknowledged.
    fn clusters_settled(&self) -> bool {
        let cds = &self.types[&ResourceType::Cluster];
        let eds = &self.types[&ResourceType::Endpoint];
        if cds.in_flight.is_some() || eds.in_flight.is_some() {
            return false;
        }
        if !cds.subscribed || cds.last_nacked {
            return true;
        }
        // Every cluster is EDS: Envoy asks for the endpoints of each one it accepted.
        cds.acked.keys().all(|n| eds.subscribed && eds.in_scope(n))
    }

    /// What the client should hold of type `t`, including resources kept for make-before-break.
    fn desired(&self, t: ResourceType, snap: &Snapshot) -> BTreeMap<String, Arc<Resource>> {
        let mut want = self.base(t, snap);
        let keeps_old = matches!(
            t,
            ResourceType::Cluster | ResourceType::Endpoint | ResourceType::Secret
        );
        if keeps_old && !self.routes_settled(snap) {
            let st = &self.types[&t];
            for (n, body) in &st.sent_bodies {
                if st.in_scope(n) && st.sent.contains_key(n) {
                    want.entry(n.clone()).or_insert_with(|| body.clone());
                }
            }
        }
        want
    }

    fn next_nonce(&mut self) -> String {
        self.nonce_seq += 1;
        self.nonce_seq.to_string()
    }

    /// Sends whatever is due among the dirty types, in warming order. A type stays dirty until it
    /// could be looked at (subscribed, nothing in flight, warming order allowing).
    fn pump(&mut self, snap: &Snapshot) -> Vec<Response> {
        let mut out = Vec::new();
        for t in ResourceType::ALL {
            if !self.dirty.contains(&t) {
                continue;
            }
            let st = &self.types[&t];
            if !st.subscribed || st.in_flight.is_some() {
                continue;
            }
            if t.is_routing() && !self.clusters_settled() {
                continue;
            }
            self.dirty.remove(&t);
            match snap.shared(t) {
                Some(ts) => _ = self.seen.insert(t, ts.clone()),
                None => _ = self.seen.remove(&t),
            }
            let desired = self.desired(t, snap);
            let response = match self.mode {
                Mode::Sotw => self.sotw_response(t, desired),
                Mode::Delta => self.delta_response(t, desired),
            };
            if let Some(r) = response {
                self.stats.responses.inc();
                out.push(r);
            }
        }
        out
    }

    fn sotw_response(
        &mut self,
        t: ResourceType,
        desired: BTreeMap<String, Arc<Resource>>,
    ) -> Option<Response> {
        let versions: BTreeMap<String, String> = desired
            .iter()
            .map(|(n, r)| (n.clone(), r.version.to_string()))
            .collect();
        let st = &self.types[&t];
        if versions == st.sent && !st.must_respond {
            return None;
        }
        let resources = desired
            .iter()
            .filter(|(n, r)| {
                t.sotw_sends_every_resource()
                    || st.sent.get(*n).map(String::as_str) != Some(r.version.as_str())
            })
            .map(|(_, r)| r.clone())
            .collect();
        let nonce = self.next_nonce();
        let version_info = set_version(desired.values());
        let resp = SotwResponse {
            version_info,
            resources,
            type_url: t.type_url(),
            nonce: nonce.clone(),
        };
        let st = self.st(t);
        st.in_flight = Some(InFlight {
            nonce: nonce.clone(),
            state_after: versions.clone(),
        });
        st.sent = versions;
        st.sent_bodies = desired;
        st.last_nonce = nonce;
        st.must_respond = false;
        Some(Response::Sotw(resp))
    }

    fn delta_response(
        &mut self,
        t: ResourceType,
        desired: BTreeMap<String, Arc<Resource>>,
    ) -> Option<Response> {
        let st = &self.types[&t];
        let changed: Vec<Arc<Resource>> = desired
            .values()
            .filter(|r| st.sent.get(&*r.name).map(String::as_str) != Some(r.version.as_str()))
            .cloned()
            .collect();
        let mut removed: BTreeSet<String> = st
            .sent
            .keys()
            .filter(|n| !desired.contains_key(*n))
            .cloned()
            .collect();
        // Newly subscribed names that do not exist: say so, so the client does not wait.
        removed.extend(
            st.new_names
                .iter()
                .filter(|n| !desired.contains_key(*n) && !st.sent.contains_key(*n))
                .cloned(),
        );
        if changed.is_empty() && removed.is_empty() && !st.must_respond {
            return None;
        }
        let nonce = self.next_nonce();
        let versions: BTreeMap<String, String> = desired
            .iter()
            .map(|(n, r)| (n.clone(), r.version.to_string()))
            .collect();
        let resp = DeltaResponse {
            system_version_info: set_version(desired.values()),
            resources: changed,
            type_url: t.type_url(),
            removed_resources: removed.into_iter().collect(),
            nonce: nonce.clone(),
        };
        let st = self.st(t);
        st.in_flight = Some(InFlight {
            nonce: nonce.clone(),
            state_after: versions.clone(),
        });
        st.sent = versions;
        st.sent_bodies = desired;
        st.last_nonce = nonce;
        st.must_respond = false;
        st.new_names.clear();
        Some(Response::Delta(resp))
    }
}
