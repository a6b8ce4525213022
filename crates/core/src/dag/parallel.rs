//! A full `dag::build` of a large snapshot on two threads.
//!
//! Routing objects affect each other only through their links (hosts and IngressRoute names, see
//! [`super::incremental`]), and `dag::build` of the whole snapshot equals the union of
//! `dag::build` of each connected part, with Services, EndpointSlices and Secrets looked up in
//! the whole snapshot: the property incremental builds stand on. So the connected parts are
//! dealt into two halves of about the same number of objects, each half is built on its own
//! thread, and the two models are merged. The Gateway API objects go into one half together,
//! as the incremental build's graph has them (one routing object, linked by every host their
//! routes could be served on). The halves hold different hosts and objects; a cluster
//! or secret both use is the same in both (it comes from the same Service or Secret). Should a
//! merge find otherwise, the snapshot is built on one thread instead.

use hashbrown::HashMap;

use super::builder::SortedParts;
use super::halves::{Half, Sides};
use super::links::LinkRef;
use super::model::*;
use super::slots::Place;
use super::{Builder, Options};
use crate::api::ObjectRef;
use crate::store::Snapshot;

/// Snapshots with at least this many routing objects are built on two threads. Dealing the
/// objects into halves and merging the halves' models cost about a tenth of a one-thread build
/// (~6 of ~60 ms at 10k objects); a thread, tens of microseconds.
pub const PARALLEL_OBJECTS: usize = 2_000;

/// The model of `snapshot` built in two halves on two threads; None when the halves do not
/// merge as they should (the caller then builds on one thread).
pub(super) fn build(snapshot: &Snapshot, options: &Options) -> Option<Dag> {
    let sides = sides(snapshot, options);
    let half = |side| Half {
        sides: &sides,
        side,
    };
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| build_half(snapshot, half(1), options));
        let here = build_half(snapshot, half(0), options);
        let other = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (here, other)
    });
    // The statuses (the largest map) are merged on a second thread, the rest on this one. The
    // statuses are put in order by their objects' places in the snapshot, which the halves
    // numbered them by: no key is read to compare.
    let (statuses, (tcp_listeners, entries, vhosts, clusters, secrets)) =
        std::thread::scope(|scope| {
            let statuses = scope.spawn(|| {
                let merged = match (a.status_places, b.status_places) {
                    (Some(pa), Some(pb)) => merge_by_place(a.statuses, &pa, b.statuses, &pb),
                    _ => merge(a.statuses, b.statuses, Shared::Refused),
                };
                merged.map(Map::from_distinct_sorted)
            });
            let rest = (
                merge(a.tcp_listeners, b.tcp_listeners, Shared::Refused)
                    .map(Map::from_distinct_sorted),
                merge(a.entries, b.entries, Shared::Refused).map(Map::from_distinct_sorted),
                merge(a.vhosts, b.vhosts, Shared::Refused).map(Map::from_distinct_sorted),
                merge(a.clusters, b.clusters, Shared::IfEqual).map(Map::from_distinct_sorted),
                merge(a.secrets, b.secrets, Shared::IfEqual).map(Map::from_distinct_sorted),
            );
            let statuses = statuses
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (statuses, rest)
        });
    Some(Dag {
        vhosts: vhosts?,
        clusters: clusters?,
        secrets: secrets?,
        statuses: statuses?,
        tcp_listeners: tcp_listeners?,
        entries: entries?,
    })
}

fn build_half<'a>(snapshot: &'a Snapshot, half: Half<'a>, options: &'a Options) -> SortedParts {
    let mut b = Builder::half(snapshot, half, options);
    super::run(&mut b);
    b.finish_sorted()
}

/// The routing objects of `snapshot` dealt into two halves of whole connected parts, of about
/// the same number of objects. The halves are masks over the snapshot's maps, not copies of
/// them: copying 10k objects' keys into two new maps cost more than anything else here.
///
/// Objects are joined through the hashes of their links, not the links themselves (no copy of a
/// name): two different links with one hash join parts that need not be, which still leaves
/// every half a union of whole parts.
fn sides(snapshot: &Snapshot, options: &Options) -> Sides {
    let s = snapshot;
    // The links of every object, hashed on two threads (reading 10k objects is most of the work
    // here), each over one half of the objects in the order below: Ingresses, IngressRoutes of
    // both versions, Routes; then the Gateway API objects, as one object after them.
    let routing = s.routing_objects();
    let gateway_api =
        super::incremental::gateway_api_link_hashes(s, &options.gateway_controller_name);
    let objects = routing + usize::from(gateway_api.is_some());
    let middle = routing / 2;
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| link_hashes(s, middle..routing));
        let first = link_hashes(s, 0..middle);
        let second = second
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (first, second)
    });
    // Union-find over the objects, joined through the links they share, in object order.
    let mut parts = Parts::new(objects);
    for (i, link) in first.into_iter().chain(second) {
        parts.join(i, link);
    }
    if let Some((hashes, _)) = &gateway_api {
        for &link in hashes {
            parts.join(routing, link);
        }
    }
    // A part is named by its root, an object's index: sizes and sides are indexed by it.
    let roots: Vec<usize> = (0..objects).map(|i| parts.root(i)).collect();
    let mut sizes = vec![0usize; objects];
    for &r in &roots {
        sizes[r] += 1;
    }
    if let Some((_, count)) = &gateway_api {
        // The Gateway API objects weigh what they number.
        sizes[roots[routing]] += count.saturating_sub(1);
    }
    // The largest parts first, each to the smaller half.
    let mut components: Vec<(usize, usize)> = (sizes.iter().enumerate())
        .filter(|&(_, &size)| size > 0)
        .map(|(r, &size)| (r, size))
        .collect();
    components.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut side = vec![0u8; objects];
    let mut filled = [0usize; 2];
    for (r, size) in components {
        let half = usize::from(filled[1] < filled[0]);
        filled[half] += size;
        side[r] = half as u8;
    }
    // Each object's half, in the same order.
    let mut sides = roots.iter().map(|&r| side[r]);
    let mut take = |n: usize| sides.by_ref().take(n).collect::<Vec<u8>>();
    Sides {
        ingresses: take(s.ingresses.len()),
        ingressroutes_v1beta1: take(s.ingressroutes_v1beta1.len()),
        ingressroutes_v1: take(s.ingressroutes_v1.len()),
        routes_v1alpha1: take(s.routes_v1alpha1.len()),
        gateway_api: gateway_api.map_or(0, |_| side[roots[routing]]),
    }
}

/// The hashes of the links of the routing objects at positions `range` (in the order of
/// [`sides`]), with each object's position. Ingresses' and IngressRoutes' were hashed when the
/// store prepared them; Routes' are hashed here.
fn link_hashes(s: &Snapshot, range: std::ops::Range<usize>) -> Vec<(usize, u64)> {
    let mut out = Vec::with_capacity(range.len() * 2);
    // The positions of each kind's objects begin at `start`; those in `range` are read.
    let mut start = 0;
    let mut window = |len: usize| {
        let from = range.start.saturating_sub(start).min(len);
        let to = range.end.saturating_sub(start).min(len);
        let at = start;
        start += len;
        (at, from, to - from)
    };
    // Each prepared object's hashes, for the kind's objects of the window.
    let mut prepared = |len: usize, hashes: &mut dyn Iterator<Item = &[u64]>| {
        let (at, skip, take) = window(len);
        for (k, hs) in hashes.enumerate().skip(skip).take(take) {
            out.extend(hs.iter().map(|&h| (at + k, h)));
        }
    };
    let ing = &s.ingresses;
    prepared(
        ing.len(),
        &mut ing.values().map(|o| o.ready().link_hashes()),
    );
    let v1beta1 = &s.ingressroutes_v1beta1;
    prepared(
        v1beta1.len(),
        &mut v1beta1.values().map(|o| o.ready().link_hashes()),
    );
    let v1 = &s.ingressroutes_v1;
    prepared(v1.len(), &mut v1.values().map(|o| o.ready().link_hashes()));
    let (at, skip, take) = window(s.routes_v1alpha1.len());
    for (k, o) in s.routes_v1alpha1.values().enumerate().skip(skip).take(take) {
        out.push((at + k, LinkRef::Host(&o.spec.host).hash()));
    }
    out
}

/// Connected parts of objects (union-find by index).
struct Parts {
    parent: Vec<usize>,
    /// The first object seen with each link hash.
    holder: HashMap<u64, usize>,
}

impl Parts {
    fn new(objects: usize) -> Parts {
        Parts {
            parent: (0..objects).collect(),
            holder: HashMap::with_capacity(objects * 2),
        }
    }

    fn root(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    /// Object `i` has the link of hash `link`.
    fn join(&mut self, i: usize, link: u64) {
        let first = *self.holder.entry(link).or_insert(i);
        let (x, y) = (self.root(i), self.root(first));
        if x != y {
            self.parent[x.max(y)] = x.min(y);
        }
    }
}

/// What two halves may both hold under one key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shared {
    /// Nothing: a key in both is a mistake.
    Refused,
    /// The same value (a cluster or secret both halves use).
    IfEqual,
}

/// The union of two vectors of entries in key order, in key order (one pass over both); None
/// when a key is in both and `shared` does not allow it.
fn merge<K: Ord, V: PartialEq>(
    a: Vec<(K, V)>,
    b: Vec<(K, V)>,
    shared: Shared,
) -> Option<Vec<(K, V)>> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let order = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.0.cmp(&y.0),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => return Some(out),
        };
        match order {
            std::cmp::Ordering::Less => out.extend(a.next()),
            std::cmp::Ordering::Greater => out.extend(b.next()),
            std::cmp::Ordering::Equal => {
                let (x, y) = (a.next()?, b.next()?);
                if shared == Shared::Refused || x.1 != y.1 {
                    tracing::warn!(
                        "the halves of a parallel build overlap; building on one thread"
                    );
                    return None;
                }
                out.push(x);
            }
        }
    }
}

/// The union of two vectors of statuses in key order, in key order, put in order by `pa` and
/// `pb`, the places (in the snapshot) of their objects; None when the two share a place.
fn merge_by_place<V>(
    a: Vec<(ObjectRef, V)>,
    pa: &[Place],
    b: Vec<(ObjectRef, V)>,
    pb: &[Place],
) -> Option<Vec<(ObjectRef, V)>> {
    debug_assert_eq!((a.len(), b.len()), (pa.len(), pb.len()));
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    let (mut i, mut j) = (0, 0);
    loop {
        let take_a = match (pa.get(i), pb.get(j)) {
            (Some(x), Some(y)) if x == y => {
                tracing::warn!("the halves of a parallel build overlap; building on one thread");
                return None;
            }
            (Some(x), Some(y)) => x < y,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return Some(out),
        };
        if take_a {
            out.extend(a.next());
            i += 1;
        } else {
            out.extend(b.next());
            j += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Kind;
    use crate::dag::incremental::tests::gateway::gateway_pool;
    use crate::synth::pool::pool;
    use crate::test_rng::Rng;

    /// The number of routing objects in each half of `store`.
    fn half_sizes(store: &Snapshot) -> [usize; 2] {
        let sides = sides(store, &Options::default());
        [0, 1].map(|side| {
            Half {
                sides: &sides,
                side,
            }
            .routing_objects()
        })
    }

    #[test]
    fn the_halves_of_the_golden_objects_build_what_one_thread_builds() {
        // Every golden case's objects at once (they reuse names and hosts, so they delegate to
        // each other and conflict) and Gateway API objects on their hosts, in random subsets,
        // with and without root namespaces.
        let mut pool = pool();
        pool.extend(gateway_pool());
        let root_namespaces = Options {
            root_namespaces: vec!["prod".into(), "default".into()],
            ..Options::default()
        };
        let mut split = 0;
        let mut gateway_sides = [false; 2];
        for seed in 1..=40u64 {
            let mut rng = Rng(0x5eed_0000 ^ seed);
            // The pool's routes link the Gateway API objects to many golden hosts, and the
            // listener isolation case's objects (namespace and class `iso`) add to their number,
            // which makes them the larger part: every other snapshot goes without both, so that
            // the Gateway API objects land in either half.
            let all = seed % 2 == 0;
            let gateway_route = |k: Kind| {
                matches!(
                    k,
                    Kind::TlsRoute | Kind::HttpRoute | Kind::GrpcRoute | Kind::TcpRoute
                )
            };
            let isolation_case = |o: &crate::store::AnyObject| {
                let key = o.key();
                &*key.namespace == "iso" || (o.kind() == Kind::GatewayClass && &*key.name == "iso")
            };
            let store = Snapshot::from_objects(
                pool.iter()
                    .filter(|o| all || (!gateway_route(o.kind()) && !isolation_case(o)))
                    .filter(|o| !o.kind().is_routing() || rng.below(3) != 0)
                    .cloned(),
            );
            let [a, b] = half_sizes(&store);
            assert_eq!(
                a + b,
                store.routing_objects(),
                "seed {seed}: every object in one half"
            );
            split += usize::from(a > 0 && b > 0);
            if !store.gateway_classes.is_empty() {
                gateway_sides[usize::from(sides(&store, &Options::default()).gateway_api)] = true;
            }
            for options in [&Options::default(), &root_namespaces] {
                assert_eq!(
                    build(&store, options),
                    Some(super::super::build_on_one_thread(&store, options)),
                    "seed {seed}"
                );
            }
        }
        assert!(split > 30, "{split} of 40 snapshots split in two");
        assert_eq!(
            gateway_sides,
            [true, true],
            "the Gateway API objects in either half"
        );
    }

    #[test]
    fn merging_keeps_key_order_and_refuses_overlaps() {
        let v = |keys: &[(u8, char)]| keys.to_vec();
        let a = v(&[(1, 'a'), (4, 'd'), (6, 'f')]);
        let b = v(&[(2, 'b'), (3, 'c'), (7, 'g')]);
        assert_eq!(
            merge(a.clone(), b.clone(), Shared::Refused),
            Some(v(&[
                (1, 'a'),
                (2, 'b'),
                (3, 'c'),
                (4, 'd'),
                (6, 'f'),
                (7, 'g')
            ]))
        );
        assert_eq!(
            merge(a.clone(), Vec::new(), Shared::Refused),
            Some(a.clone())
        );
        assert_eq!(merge(Vec::new(), b.clone(), Shared::Refused), Some(b));
        let same = v(&[(4, 'd'), (5, 'e')]);
        assert_eq!(merge(a.clone(), same.clone(), Shared::Refused), None);
        assert_eq!(
            merge(a.clone(), same, Shared::IfEqual),
            Some(v(&[(1, 'a'), (4, 'd'), (5, 'e'), (6, 'f')]))
        );
        assert_eq!(merge(a, v(&[(4, 'x')]), Shared::IfEqual), None);
    }

    #[test]
    fn a_large_snapshot_is_built_on_two_threads_to_the_same_model() {
        let store = crate::synth::snapshot(crate::synth::Shape {
            routing_objects: PARALLEL_OBJECTS + 500,
            endpoints_per_service: 2,
            unrelated_secrets: 10,
        });
        let [a, b] = half_sizes(&store);
        assert!(a.abs_diff(b) <= 10, "halves of {a} and {b} objects");
        let options = Options::default();
        assert_eq!(
            super::super::build(&store, &options),
            super::super::build_on_one_thread(&store, &options)
        );
        // With a Gateway and 50 HTTPRoutes, each on a host of its own: they go into one half,
        // and the halves still have about as many objects each.
        let mut store = store;
        for o in crate::synth::gateway_api(50) {
            store.insert(o);
        }
        let [a, b] = half_sizes(&store);
        let gateway = sides(&store, &options).gateway_api;
        let with_gateway = [
            a + 52 * usize::from(gateway == 0),
            b + 52 * usize::from(gateway == 1),
        ];
        assert!(
            with_gateway[0].abs_diff(with_gateway[1]) <= 60,
            "halves of {with_gateway:?} objects"
        );
        let dag = super::super::build(&store, &options);
        assert_eq!(dag, super::super::build_on_one_thread(&store, &options));
        assert_eq!(dag.vhosts["gw-7.example.com"].routes.len(), 1);
    }

    #[test]
    fn a_half_keeps_what_it_says_of_an_object_dealt_into_the_other() {
        // The dealing keeps a root and its vertex together; should a half still reach an
        // object it does not hold, the object's status and routes are kept by key, as the
        // one-thread build keeps them.
        let yaml = "
apiVersion: v1
kind: Service
metadata: {name: app, namespace: a}
spec: {ports: [{port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: a.example.com}
  routes:
  - match: /
    services: [{name: app, port: 80}]
  - match: /v
    delegate: {name: vertex}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: vertex, namespace: a}
spec:
  routes:
  - match: /v
    services: [{name: app, port: 80}]
";
        let store = Snapshot::from_test_yaml(yaml);
        // In key order: root, vertex. The root in half 0, its vertex in half 1.
        let sides = Sides {
            ingressroutes_v1beta1: vec![0, 1],
            ..Sides::default()
        };
        let options = Options::default();
        let half = Half {
            sides: &sides,
            side: 0,
        };
        let parts = build_half(&store, half, &options);
        let whole = super::super::build_on_one_thread(&store, &options);
        assert_eq!(parts.into_dag(), whole);
        let vertex =
            &whole.statuses[&crate::api::ObjectRef::new(Kind::IngressRouteV1beta1, "a", "vertex")];
        assert_eq!(vertex.state, State::Valid);
        assert_eq!(vertex.description, "delegated from IngressRoute a/root");
    }

    #[test]
    fn statuses_merge_by_the_places_of_their_objects() {
        let obj = |name: &str| ObjectRef::new(Kind::IngressRouteV1beta1, "ns", name);
        let a = vec![(obj("a"), 1), (obj("c"), 3)];
        let b = vec![(obj("b"), 2), (obj("d"), 4), (obj("e"), 5)];
        let merged = merge_by_place(a.clone(), &[10, 30], b.clone(), &[20, 40, 50])
            .expect("no place is in both halves");
        let names: Vec<&str> = merged.iter().map(|(o, _)| &*o.key.name).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        assert_eq!(
            merged.iter().map(|e| e.1).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        // One half empty: the other as it is.
        let alone = merge_by_place(Vec::new(), &[], b.clone(), &[20, 40, 50]);
        assert_eq!(alone, Some(b.clone()));
        // An object in both halves is refused.
        assert_eq!(merge_by_place(a, &[10, 40], b, &[20, 40, 50]), None);
    }
}
