//! Incremental encoding: successive routing models → xDS snapshots, translating and encoding only
//! what changed since the previous model.
//!
//! The result is always exactly `xds::Snapshot::from_resources(&translate::build(dag, options))`
//! (the tests compare both over sequences of changes). What it saves:
//! - a cluster, load assignment, secret or TLS host's route configuration whose part of the model
//!   is unchanged is not translated or encoded again: the previous snapshot's `Arc<Resource>` is
//!   kept;
//! - the HTTP route configuration (every host) is assembled from each host's encoded bytes, and
//!   only changed hosts are translated and encoded;
//! - a type none of whose resources changed keeps the previous `Arc<TypeSnapshot>`, which xDS
//!   streams recognise without looking inside.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::google::protobuf::Any;
use prost::encoding::{WireType, encode_key, encode_varint};
use prost::{Message, Name};

use super::{
    HTTP_ROUTE_CONFIG, Options, ResourceType, build_cluster, build_load_assignment, build_secret,
    https_route_config_name, listener, route,
};
use crate::dag::{Dag, VirtualHost};
use crate::xds::cache::{Resource, Snapshot, TypeSnapshot};

/// Field number of `RouteConfiguration.virtual_hosts`.
const VIRTUAL_HOSTS_FIELD: u32 = 2;

/// Turns successive models into xDS snapshots, reusing what the previous one encoded.
#[derive(Debug)]
pub struct Encoder {
    options: Options,
    /// The previous model and what this encoder made of it. The two always match: a snapshot
    /// changed elsewhere afterwards (the pipeline's endpoint fast path) is not what is reused.
    prev: Option<Prev>,
}

#[derive(Debug)]
struct Prev {
    dag: Arc<Dag>,
    snapshot: Snapshot,
    /// The encoded `VirtualHost` of each host in the HTTP route configuration.
    http_vhosts: HashMap<String, Arc<[u8]>>,
}

impl Encoder {
    pub fn new(options: Options) -> Encoder {
        Encoder {
            options,
            prev: None,
        }
    }

    /// The xDS snapshot of `dag`, and what the encoder kept of the previous model (the caller
    /// decides where to free it: it can be large).
    pub fn encode(&mut self, dag: &Arc<Dag>) -> (Snapshot, Retired) {
        let prev = self.prev.as_ref();
        let prev_type = |t: ResourceType| prev.and_then(|p| p.snapshot.shared(t));
        let prev_dag = prev.map(|p| p.dag.as_ref());

        let mut clusters =
            TypeBuilder::new(ResourceType::Cluster, prev_type(ResourceType::Cluster));
        let mut endpoints =
            TypeBuilder::new(ResourceType::Endpoint, prev_type(ResourceType::Endpoint));
        let mut prev_clusters = prev_dag.map(|p| Cursor::new(&p.clusters));
        for (name, c) in &dag.clusters {
            let same = prev_clusters
                .as_mut()
                .is_some_and(|p| p.get(name).is_some_and(|p| same_entry(p, c)));
            if !(same && clusters.reuse(name)) {
                let pb = build_cluster(c);
                clusters.add(&pb.name, &pb);
            }
            if !(same && endpoints.reuse(name)) {
                let pb = build_load_assignment(c);
                endpoints.add(&pb.cluster_name, &pb);
            }
        }

        let mut secrets = TypeBuilder::new(ResourceType::Secret, prev_type(ResourceType::Secret));
        let mut prev_secrets = prev_dag.map(|p| Cursor::new(&p.secrets));
        for (name, s) in &dag.secrets {
            let same = prev_secrets
                .as_mut()
                .is_some_and(|p| p.get(name) == Some(s));
            if !(same && secrets.reuse(name)) {
                let pb = build_secret(s);
                secrets.add(&pb.name, &pb);
            }
        }

        let mut routes = TypeBuilder::new(ResourceType::Route, prev_type(ResourceType::Route));
        let http_vhosts = self.http_route_config(dag, &mut routes);
        let mut prev_vhosts = prev_dag.map(|p| Cursor::new(&p.vhosts));
        for v in dag.vhosts.values() {
            if v.tls.is_none() || v.tcp_proxy.is_some() {
                continue;
            }
            let same = prev_vhosts
                .as_mut()
                .is_some_and(|p| p.get(&v.host).is_some_and(|p| same_entry(p, v)));
            if !(same && routes.reuse(&https_route_config_name(&v.host))) {
                let pb = route::build_https_route_config(v);
                routes.add(&pb.name, &pb);
            }
        }

        let mut listeners =
            TypeBuilder::new(ResourceType::Listener, prev_type(ResourceType::Listener));
        let http = listener::build_http_listener(&self.options);
        listeners.add(&http.name, &http);
        // The TLS listener has one filter chain per TLS host: the same hosts with the same TLS
        // settings and secrets give the same listener.
        let tls_same = prev_dag.is_some_and(|p| tls_inputs(p).eq(tls_inputs(dag)));
        if !(tls_same && listeners.reuse(super::HTTPS_LISTENER))
            && let Some(https) = listener::build_https_listener(dag, &self.options)
        {
            listeners.add(&https.name, &https);
        }

        let snapshot = Snapshot::from_types(BTreeMap::from([
            (ResourceType::Listener, listeners.finish()),
            (ResourceType::Route, routes.finish()),
            (ResourceType::Cluster, clusters.finish()),
            (ResourceType::Endpoint, endpoints.finish()),
            (ResourceType::Secret, secrets.finish()),
        ]));
        let retired = self.prev.replace(Prev {
            dag: dag.clone(),
            snapshot: snapshot.clone(),
            http_vhosts,
        });
        (snapshot, Retired(retired))
    }

    /// Adds the HTTP route configuration to `routes`; returns each host's encoded bytes.
    fn http_route_config(
        &self,
        dag: &Dag,
        routes: &mut TypeBuilder<'_>,
    ) -> HashMap<String, Arc<[u8]>> {
        let prev = self.prev.as_ref();
        let fallback = dag.vhosts.get("*").map(|v| &**v);
        let fallback_same = prev.is_some_and(|p| p.dag.vhosts.get("*").map(|v| &**v) == fallback);
        let mut hosts: Vec<(&VirtualHost, Arc<[u8]>)> = Vec::with_capacity(dag.vhosts.len());
        let mut reused = 0;
        let mut prev_vhosts = prev.map(|p| Cursor::new(&p.dag.vhosts));
        for v in dag.vhosts.values().filter(|v| v.tcp_proxy.is_none()) {
            let same = prev_vhosts
                .as_mut()
                .is_some_and(|p| p.get(&v.host).is_some_and(|p| same_entry(p, v)))
                && (fallback_same || !v.host.starts_with("*."));
            let previous = prev
                .filter(|_| same)
                .and_then(|p| p.http_vhosts.get(&v.host));
            let bytes = match previous {
                Some(b) => {
                    reused += 1;
                    b.clone()
                }
                None => route::build_http_vhost(v, fallback).encode_to_vec().into(),
            };
            hosts.push((v, bytes));
        }
        let unchanged =
            prev.is_some_and(|p| reused == hosts.len() && p.http_vhosts.len() == hosts.len());
        if !(unchanged && routes.reuse(HTTP_ROUTE_CONFIG)) {
            // What prost writes for the message: its name (field 1), then each virtual host
            // (field 2) in order; no other field is set.
            let head = RouteConfiguration {
                name: HTTP_ROUTE_CONFIG.to_string(),
                ..Default::default()
            };
            let body_len: usize = hosts.iter().map(|(_, b)| b.len() + 8).sum();
            let mut buf = Vec::with_capacity(head.encoded_len() + body_len);
            head.encode_raw(&mut buf);
            for (_, b) in &hosts {
                encode_key(VIRTUAL_HOSTS_FIELD, WireType::LengthDelimited, &mut buf);
                encode_varint(b.len() as u64, &mut buf);
                buf.extend_from_slice(b);
            }
            routes.add_encoded(HTTP_ROUTE_CONFIG, buf);
        }
        hosts
            .into_iter()
            .map(|(v, b)| (v.host.clone(), b))
            .collect()
    }
}

/// What the encoder held of a previous model, handed back by [`Encoder::encode`].
#[derive(Debug)]
pub struct Retired(
    #[expect(dead_code, reason = "held only to be freed where the caller chooses")] Option<Prev>,
);

/// What the TLS listener is made of: each TLS host with its TLS settings, TCP proxy and secret.
/// Whether two model entries are equal: the same shared entry (a model built from the previous
/// one shares what it did not change), or equal values.
fn same_entry<T: PartialEq>(a: &Arc<T>, b: &Arc<T>) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

fn tls_inputs(dag: &Dag) -> impl Iterator<Item = impl PartialEq + '_> + '_ {
    dag.vhosts.values().filter_map(|v| {
        let tls = v.tls.as_ref()?;
        Some((
            &v.host,
            tls,
            &v.tcp_proxy,
            dag.secrets.get(&tls.secret).map(|s| &s.name),
        ))
    })
}

/// The resources of one type being assembled, reusing the previous snapshot's.
///
/// Names mostly come in ascending order (the model's maps are sorted the same way), so the
/// previous resource of a name is found by moving a cursor forward, with a map lookup when a name
/// comes out of order; the new map is built in one go from the sorted entries.
struct TypeBuilder<'p> {
    type_url: String,
    prev: Option<&'p Arc<TypeSnapshot>>,
    cursor:
        Option<std::iter::Peekable<std::collections::btree_map::Iter<'p, String, Arc<Resource>>>>,
    entries: Vec<(String, Arc<Resource>)>,
    /// How many entries are the previous snapshot's.
    reused: usize,
}

impl<'p> TypeBuilder<'p> {
    fn new(t: ResourceType, prev: Option<&'p Arc<TypeSnapshot>>) -> Self {
        TypeBuilder {
            type_url: t.type_url(),
            prev,
            cursor: prev.map(|p| p.resources.iter().peekable()),
            entries: Vec::with_capacity(prev.map_or(0, |p| p.resources.len())),
            reused: 0,
        }
    }

    fn previous(&mut self, name: &str) -> Option<&'p Arc<Resource>> {
        let cursor = self.cursor.as_mut()?;
        while cursor.peek().is_some_and(|(k, _)| k.as_str() < name) {
            cursor.next();
        }
        match cursor.peek() {
            Some((k, r)) if k.as_str() == name => Some(*r),
            _ => self.prev.and_then(|p| p.resources.get(name)),
        }
    }

    /// Keeps the previous resource of this name; false when there is none.
    fn reuse(&mut self, name: &str) -> bool {
        match self.previous(name) {
            Some(r) => {
                self.push(name, r.clone(), true);
                true
            }
            None => false,
        }
    }

    fn add<T: Message + Name>(&mut self, name: &str, message: &T) {
        self.add_encoded(name, message.encode_to_vec());
    }

    /// Adds an encoded resource; the previous one is kept when the bytes are the same.
    fn add_encoded(&mut self, name: &str, value: Vec<u8>) {
        match self.previous(name) {
            Some(r) if r.body.value == value => self.push(name, r.clone(), true),
            _ => {
                let body = Any {
                    type_url: self.type_url.clone(),
                    value,
                };
                self.push(name, Arc::new(Resource::new(name.to_string(), body)), false);
            }
        }
    }

    fn push(&mut self, name: &str, r: Arc<Resource>, reused: bool) {
        self.entries.push((name.to_string(), r));
        self.reused += usize::from(reused);
    }

    fn finish(self) -> Arc<TypeSnapshot> {
        // Resource names are unique (they come from the model's map keys).
        debug_assert!({
            let mut names: Vec<&String> = self.entries.iter().map(|(n, _)| n).collect();
            names.sort();
            names.windows(2).all(|w| w[0] != w[1])
        });
        match self.prev {
            // Every resource the previous snapshot's, and no other: share the previous set.
            Some(p) if self.reused == p.resources.len() && self.entries.len() == self.reused => {
                p.clone()
            }
            _ => Arc::new(TypeSnapshot::new(self.entries.into_iter().collect())),
        }
    }
}

/// Walks `map` alongside ascending keys: `get(k)` for k in ascending order costs one step each.
struct Cursor<'m, V> {
    iter:
        std::iter::Peekable<imbl::ordmap::Iter<'m, String, V, imbl::shared_ptr::DefaultSharedPtr>>,
}

impl<'m, V: Clone> Cursor<'m, V> {
    fn new(map: &'m crate::dag::Map<String, V>) -> Self {
        Cursor {
            iter: map.iter().peekable(),
        }
    }

    fn get(&mut self, key: &str) -> Option<&'m V> {
        while self.iter.peek().is_some_and(|(k, _)| k.as_str() < key) {
            self.iter.next();
        }
        match self.iter.peek() {
            Some((k, v)) if k.as_str() == key => Some(*v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Snapshot as Store;
    use crate::synth;

    fn full(dag: &Dag, options: &Options) -> Snapshot {
        Snapshot::from_resources(&crate::translate::build(dag, options))
    }

    fn build(store: &Store) -> Arc<Dag> {
        Arc::new(crate::dag::build(store, &crate::dag::Options::default()))
    }

    /// Deterministic pseudo-random numbers (xorshift), so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// `obj` under another namespace/name.
    fn renamed<T>(obj: &T, key: &crate::api::ObjKey) -> T
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        let mut value = serde_json::to_value(obj).unwrap();
        value["metadata"]["name"] = key.name.clone().into();
        value["metadata"]["namespace"] = key.namespace.clone().into();
        serde_json::from_value(value).unwrap()
    }

    /// Drops one object of `map`, gives it another object's content, or adds a copy of one under
    /// a new name (`copy` makes the object stored under a key from another's).
    fn shuffle<T>(
        map: &mut crate::store::Objects<T>,
        rng: &mut Rng,
        fresh: usize,
        copy: impl Fn(&T, &crate::api::ObjKey) -> T,
    ) {
        if map.is_empty() {
            return;
        }
        let keys: Vec<crate::api::ObjKey> = map.keys().cloned().collect();
        let victim = keys[rng.next(keys.len())].clone();
        let donor = keys[rng.next(keys.len())].clone();
        let target = match rng.next(4) {
            0 => {
                map.remove(&victim);
                return;
            }
            1 => crate::api::ObjKey::new(&victim.namespace, format!("{}-copy{fresh}", victim.name)),
            _ => victim,
        };
        let copied = copy(map[&donor].as_ref(), &target);
        map.insert(target, Arc::new(copied));
    }

    /// Changes one object of a random routing-relevant kind.
    fn mutate(store: &mut Store, rng: &mut Rng, fresh: usize) {
        match rng.next(5) {
            0 => shuffle(&mut store.ingressroutes_v1beta1, rng, fresh, renamed),
            1 => shuffle(&mut store.ingresses, rng, fresh, renamed),
            // Stored Services and slices hold no name of their own.
            2 => shuffle(&mut store.services, rng, fresh, |s, _| s.clone()),
            3 => shuffle(&mut store.endpoint_slices, rng, fresh, |s, _| s.clone()),
            _ => shuffle(&mut store.secrets, rng, fresh, renamed),
        }
    }

    #[test]
    fn the_same_as_a_full_encode_over_a_sequence_of_changes() {
        let options = Options::default();
        let mut store = synth::snapshot(synth::Shape {
            routing_objects: 120,
            endpoints_per_service: 2,
            unrelated_secrets: 2,
        });
        let mut encoder = Encoder::new(options.clone());
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let mut previous: Option<Snapshot> = None;
        for step in 0..150 {
            let dag = build(&store);
            let (got, _) = encoder.encode(&dag);
            let want = full(&dag, &options);
            assert_eq!(got, want, "step {step}");
            if let Some(p) = &previous {
                // Unchanged types are shared, not copied.
                for t in ResourceType::ALL {
                    if p.shared(t).map(|a| &a.version) == want.shared(t).map(|a| &a.version) {
                        assert!(
                            Arc::ptr_eq(p.shared(t).unwrap(), got.shared(t).unwrap()),
                            "step {step}: {t:?} unchanged but not shared"
                        );
                    }
                }
            }
            previous = Some(got);
            for _ in 0..=rng.next(3) {
                mutate(&mut store, &mut rng, step);
            }
        }
    }

    fn ingress(name: &str, host: Option<&str>, path: &str) -> crate::store::AnyObject {
        let mut rule = serde_json::json!({"http": {"paths": [{"path": path, "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}});
        if let Some(h) = host {
            rule["host"] = h.into();
        }
        let v = serde_json::json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"ingressClassName": "sluice", "rules": [rule]}});
        match crate::manifest::decode_value(v) {
            Ok(crate::manifest::Document::Object(o)) => o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wildcard_host_follows_changes_of_the_catch_all_host() {
        let options = Options::default();
        let mut store = Store::from_objects([
            ingress("wild", Some("*.example.com"), "/"),
            ingress("all", None, "/x"),
        ]);
        let mut encoder = Encoder::new(options.clone());
        let dag = build(&store);
        assert!(dag.vhosts.contains_key("*") && dag.vhosts.contains_key("*.example.com"));
        assert_eq!(encoder.encode(&dag).0, full(&dag, &options));
        // Only the catch-all host changes; the wildcard host's HTTP routes include its routes.
        store.insert(ingress("all", None, "/y"));
        let dag = build(&store);
        assert_eq!(encoder.encode(&dag).0, full(&dag, &options));
    }

    #[test]
    fn an_unchanged_model_shares_every_type() {
        let options = Options::default();
        let store = synth::snapshot(synth::Shape {
            routing_objects: 40,
            endpoints_per_service: 1,
            unrelated_secrets: 0,
        });
        let mut encoder = Encoder::new(options);
        let (a, _) = encoder.encode(&build(&store));
        let (b, _) = encoder.encode(&build(&store));
        for t in ResourceType::ALL {
            assert!(
                Arc::ptr_eq(a.shared(t).unwrap(), b.shared(t).unwrap()),
                "{t:?}"
            );
        }
        assert!(a.same_as(&b));
    }
}
