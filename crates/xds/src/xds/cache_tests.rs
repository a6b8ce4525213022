use super::*;

fn mk_any(v: &[u8]) -> Body {
    Any {
        type_url: "t".into(),
        value: v.to_vec(),
    }
    .into()
}

#[test]
fn from_resources_is_from_encoded_of_encode() {
    let options = crate::translate::Options::default();
    let snap = sluice_core::synth::snapshot(sluice_core::synth::Shape {
        routing_objects: 50,
        endpoints_per_service: 2,
        unrelated_secrets: 3,
    });
    let dag = sluice_core::dag::build(&snap, &sluice_core::dag::Options::default());
    let resources = crate::translate::build(&dag, &options);
    assert_eq!(
        Snapshot::from_resources(&resources),
        Snapshot::from_encoded(resources.encode())
    );
}

fn crafted(name: &str, lanes: [u64; 4], body: &[u8]) -> (ResourceName, Arc<Resource>) {
    let r = Resource::crafted(name, "0000000000000000", lanes, mk_any(body));
    (name.into(), Arc::new(r))
}

/// Two sets of the same size whose hash sums collide are still told apart.
#[test]
fn a_collision_of_set_versions_is_not_taken_for_equal_content() {
    let snap = |members: Vec<(ResourceName, Arc<Resource>)>| Snapshot {
        types: BTreeMap::from([(
            ResourceType::Cluster,
            Arc::new(TypeSnapshot::new(ResourceMap::from(members))),
        )]),
    };
    let published = snap(vec![
        crafted("a", [1, 5, 0, 0], b"a1"),
        crafted("b", [2, 0, 7, 0], b"b1"),
    ]);
    let colliding = snap(vec![
        crafted("a", [3, 5, 7, 0], b"a2"),
        crafted("b", [0, 0, 0, 0], b"b2"),
    ]);
    assert_eq!(
        colliding.version(ResourceType::Cluster),
        published.version(ResourceType::Cluster)
    );
    let next = colliding.sharing_types_of(&published);
    assert!(!Arc::ptr_eq(
        next.shared(ResourceType::Cluster).unwrap(),
        published.shared(ResourceType::Cluster).unwrap()
    ));
    assert_eq!(next.of(ResourceType::Cluster)["a"].body.value, b"a2");
    assert!(!next.same_as(&published));
    // Equal content still shares.
    let equal = snap(vec![
        crafted("a", [1, 5, 0, 0], b"a1"),
        crafted("b", [2, 0, 7, 0], b"b1"),
    ]);
    let next = equal.sharing_types_of(&published);
    assert!(Arc::ptr_eq(
        next.shared(ResourceType::Cluster).unwrap(),
        published.shared(ResourceType::Cluster).unwrap()
    ));
}

#[test]
fn types_with_the_same_version_are_taken_from_the_other_snapshot() {
    let items = |e: &[u8]| {
        BTreeMap::from([
            (
                ResourceType::Cluster,
                BTreeMap::from([("c".to_string(), mk_any(b"c1"))]),
            ),
            (
                ResourceType::Endpoint,
                BTreeMap::from([("c".to_string(), mk_any(e))]),
            ),
        ])
    };
    let published = Snapshot::from_encoded(items(b"e1"));
    // Built separately: equal content, other allocations.
    let same = Snapshot::from_encoded(items(b"e1")).sharing_types_of(&published);
    for t in ResourceType::ALL {
        assert!(Arc::ptr_eq(
            same.shared(t).unwrap(),
            published.shared(t).unwrap()
        ));
    }
    let changed = Snapshot::from_encoded(items(b"e2")).sharing_types_of(&published);
    assert!(Arc::ptr_eq(
        changed.shared(ResourceType::Cluster).unwrap(),
        published.shared(ResourceType::Cluster).unwrap()
    ));
    assert!(!Arc::ptr_eq(
        changed.shared(ResourceType::Endpoint).unwrap(),
        published.shared(ResourceType::Endpoint).unwrap()
    ));
    assert_eq!(changed.of(ResourceType::Endpoint)["c"].body, mk_any(b"e2"));
}

/// A version a client announces compares by its text with the one sluice computed, whichever
/// way each is held.
#[test]
fn versions_compare_by_their_text() {
    let computed = Resource::new("r", mk_any(b"body")).version;
    assert_eq!(computed.len(), 16);
    assert!(computed.bytes().all(|b| b.is_ascii_hexdigit()));
    let announced = Resource::known("r", computed.to_string()).version;
    assert_eq!(announced, computed);
    assert_eq!(computed, announced);
    let other = Resource::known("r", "not-a-hash".into()).version;
    assert_ne!(other, computed);
    assert_eq!(other.as_str(), "not-a-hash");
    assert_eq!(format!("{other:?}"), "\"not-a-hash\"");
}

#[test]
fn large_resources_are_versioned_by_content_too() {
    let big: Vec<u8> = (0..LARGE + 100).map(|i| (i % 251) as u8).collect();
    let version = |bytes: &[u8]| Resource::new("r", mk_any(bytes)).version;
    assert_eq!(version(&big), version(&big.clone()));
    let mut other = big.clone();
    other[LARGE / 2] ^= 1;
    assert_ne!(version(&big), version(&other));
    assert_ne!(version(&big), version(&big[..LARGE - 1]));
    assert_eq!(version(&big).len(), 16);
}

/// An edit from nothing appends resources given in name order and keeps the same contents
/// and version as map inserts would when they come out of order, again, or are removed.
#[test]
fn an_edit_from_nothing_holds_what_it_was_given_in_any_order() {
    let mut rng = sluice_core::test_rng::Rng::new(7);
    let r = |n: u64, v: u64| Arc::new(Resource::new(format!("r{n:03}"), mk_any(&v.to_le_bytes())));
    for round in 0..60 {
        let mut edit = Edit::default();
        let mut model = BTreeMap::new();
        let mut next = 0;
        for _ in 0..rng.below(200) {
            // Mostly the next name up, as a full encode gives them.
            let n = if rng.chance(90 - round) {
                next += 1 + rng.next() % 3;
                next
            } else {
                rng.next() % (next + 5)
            };
            if rng.chance(5) {
                edit.remove(&format!("r{n:03}"));
                model.remove(&n);
            } else {
                let res = r(n, rng.next() % 3);
                edit.insert(res.clone());
                model.insert(n, res);
            }
            let probe = rng.next() % (next + 5);
            assert_eq!(edit.get(&format!("r{probe:03}")), model.get(&probe));
        }
        let edited = edit.finish();
        let fresh = TypeSnapshot::new(
            model
                .values()
                .map(|r| (r.name.clone(), r.clone()))
                .collect(),
        );
        assert_eq!(edited, fresh, "round {round}");
    }
}

/// A type derived by edits has the version (and the resources) of the same set built from
/// nothing, whatever was inserted, replaced and removed in between, and shares the nodes of
/// what it did not change.
#[test]
fn edited_types_are_versioned_like_fresh_ones() {
    let mut rng = sluice_core::test_rng::Rng(0x2545_f491_4f6c_dd1d);
    let r = |n: u64, v: u64| Arc::new(Resource::new(format!("r{n}"), mk_any(&v.to_le_bytes())));
    let mut current = TypeSnapshot::new(
        (0..300)
            .map(|n| (format!("r{n}").into(), r(n, 0)))
            .collect(),
    );
    for _ in 0..200 {
        let mut edit = current.edit();
        for _ in 0..rng.below(4) {
            let n = rng.next() % 400;
            match rng.below(3) {
                0 => edit.remove(&format!("r{n}")),
                _ => edit.insert(r(n, rng.next() % 3)),
            }
        }
        let edited = edit.finish();
        let fresh = TypeSnapshot::new(
            edited
                .resources
                .iter()
                .map(|(n, r)| (n.clone(), Arc::new(Resource::clone(r))))
                .collect(),
        );
        assert_eq!(edited, fresh);
        assert_eq!(edited.version, set_version(fresh.resources.values()));
        assert_eq!(
            edited.version == current.version,
            edited.resources == current.resources
        );
        current = edited;
    }
    assert_eq!(
        TypeSnapshot::default(),
        TypeSnapshot::new(ResourceMap::new())
    );
}

/// The same bytes under another name are another resource: a set whose members swapped their
/// contents has another version.
#[test]
fn a_sets_version_depends_on_which_name_holds_what() {
    let set = |a: &[u8], b: &[u8]| {
        TypeSnapshot::new(ResourceMap::from(vec![
            ("a".into(), Arc::new(Resource::new("a", mk_any(a)))),
            ("b".into(), Arc::new(Resource::new("b", mk_any(b)))),
        ]))
    };
    assert_ne!(set(b"1", b"2").version, set(b"2", b"1").version);
    assert_eq!(set(b"1", b"2").version, set(b"1", b"2").version);
}

#[test]
fn versions_follow_content_per_type() {
    let mut items = BTreeMap::new();
    items.insert(
        ResourceType::Cluster,
        BTreeMap::from([("c".to_string(), mk_any(b"c1"))]),
    );
    items.insert(
        ResourceType::Endpoint,
        BTreeMap::from([("c".to_string(), mk_any(b"e1"))]),
    );
    let a = Snapshot::from_encoded(items.clone());
    items.insert(
        ResourceType::Endpoint,
        BTreeMap::from([("c".to_string(), mk_any(b"e2"))]),
    );
    let b = Snapshot::from_encoded(items);
    assert_eq!(
        a.version(ResourceType::Cluster),
        b.version(ResourceType::Cluster)
    );
    assert_ne!(
        a.version(ResourceType::Endpoint),
        b.version(ResourceType::Endpoint)
    );
    assert_eq!(
        a.of(ResourceType::Cluster)["c"].version,
        b.of(ResourceType::Cluster)["c"].version
    );
    assert_eq!(a.version(ResourceType::Listener).len(), 16);
}
