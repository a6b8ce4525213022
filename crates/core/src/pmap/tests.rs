use std::cell::Cell;
use std::collections::BTreeMap;

use super::*;
use crate::test_rng::Rng;

/// The differences `diff` must find, from the two maps' contents alone.
fn expected_diff(
    old: &BTreeMap<u32, u32>,
    new: &BTreeMap<u32, u32>,
) -> Vec<(u32, Option<u32>, Option<u32>)> {
    let keys: std::collections::BTreeSet<_> = old.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (a, b) = (old.get(k).copied(), new.get(k).copied());
            (a != b).then_some((*k, a, b))
        })
        .collect()
}

fn found_diff(
    old: &OrdMap<u32, u32>,
    new: &OrdMap<u32, u32>,
) -> Vec<(u32, Option<u32>, Option<u32>)> {
    old.diff(new)
        .map(|d| match d {
            DiffItem::Add(k, v) => (*k, None, Some(*v)),
            DiffItem::Remove(k, v) => (*k, Some(*v), None),
            DiffItem::Update { old, new } => {
                assert_eq!(old.0, new.0);
                (*old.0, Some(*old.1), Some(*new.1))
            }
        })
        .collect()
}

fn same(map: &OrdMap<u32, u32>, model: &BTreeMap<u32, u32>) {
    map.check();
    assert_eq!(map.len(), model.len());
    assert!(
        map.iter()
            .map(|(k, v)| (*k, *v))
            .eq(model.iter().map(|(k, v)| (*k, *v)))
    );
    assert_eq!(map.iter().len(), model.len());
}

#[test]
fn edits_of_clones_match_a_btreemap_and_leave_the_originals_alone() {
    for seed in 0..40 {
        let mut rng = Rng::new(seed);
        let size = [0, 1, 15, 16, 17, 300, 2_000][seed as usize % 7];
        let start: BTreeMap<u32, u32> = (0..size).map(|i| (i * 3, i)).collect();
        let mut versions = vec![(
            OrdMap::from_sorted(start.clone().into_iter().collect()),
            start,
        )];
        for _ in 0..30 {
            let (base, model) = versions[rng.below(versions.len())].clone();
            let (mut map, mut model) = (base.clone(), model.clone());
            for _ in 0..rng.below(400) {
                let key = rng.below(size as usize * 3 + 50) as u32;
                match rng.below(3) {
                    0 => assert_eq!(map.insert(key, key + 7), model.insert(key, key + 7)),
                    1 => assert_eq!(map.remove(&key), model.remove(&key)),
                    _ => assert_eq!(
                        map.get_mut(&key).map(|v| std::mem::replace(v, 1)),
                        model.get_mut(&key).map(|v| std::mem::replace(v, 1))
                    ),
                }
                assert_eq!(map.get(&key), model.get(&key));
            }
            same(&map, &model);
            for _ in 0..5 {
                let start = rng.below(size as usize * 3 + 60) as u32;
                assert!(
                    map.range_from(&start)
                        .map(|(k, v)| (*k, *v))
                        .eq(model.range(start..).map(|(k, v)| (*k, *v))),
                    "from {start}"
                );
            }
            versions.push((map, model));
        }
        // Every version is as it was made, whatever its clones went through.
        for (map, model) in &versions {
            same(map, model);
        }
        for _ in 0..40 {
            let (a, ma) = &versions[rng.below(versions.len())];
            let (b, mb) = &versions[rng.below(versions.len())];
            assert_eq!(found_diff(a, b), expected_diff(ma, mb), "seed {seed}");
            assert_eq!(a == b, ma == mb);
        }
    }
}

#[test]
fn removing_every_key_in_any_order_empties_the_tree() {
    for seed in 0..10 {
        let mut rng = Rng::new(seed);
        let mut keys: Vec<u32> = (0..1_000).collect();
        let mut map: OrdMap<u32, u32> = keys.iter().map(|k| (*k, *k)).collect();
        let kept = map.clone();
        for i in (1..keys.len()).rev() {
            keys.swap(i, rng.below(i + 1));
        }
        for (n, k) in keys.iter().enumerate() {
            assert_eq!(map.remove(k), Some(*k));
            assert_eq!(map.remove(k), None);
            if n % 97 == 0 {
                map.check();
            }
        }
        assert!(map.is_empty() && map.root.is_none());
        assert_eq!(kept.len(), 1_000);
        kept.check();
    }
}

#[test]
fn entries_out_of_order_are_sorted_and_the_last_of_equal_keys_wins() {
    let map: OrdMap<&str, u32> = [("b", 1), ("a", 2), ("b", 3), ("c", 4), ("a", 5)]
        .into_iter()
        .collect();
    map.check();
    assert_eq!(
        map.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(),
        [("a", 5), ("b", 3), ("c", 4)]
    );
    let sorted = OrdMap::from_sorted((0..100u32).map(|i| (i, i)).collect());
    sorted.check();
    assert_eq!(sorted.len(), 100);
    assert_eq!(
        format!("{:?}", OrdMap::from_sorted(vec![(1, "x")])),
        r#"{1: "x"}"#
    );
    assert_eq!(
        serde_json::to_string(&map).unwrap(),
        r#"{"a":5,"b":3,"c":4}"#
    );
}

#[test]
fn an_owned_map_gives_its_entries_whether_or_not_it_shares_them() {
    let map: OrdMap<String, u32> = (0..500).map(|i| (format!("{i:04}"), i)).collect();
    let shared = map.clone();
    let mut edited = map.clone();
    edited.insert("x".into(), 1);
    let want: Vec<_> = map.iter().map(|(k, v)| (k.clone(), *v)).collect();
    assert_eq!(map.into_iter().collect::<Vec<_>>(), want);
    assert_eq!(shared.into_iter().collect::<Vec<_>>(), want);
    assert_eq!(edited.into_iter().count(), 501);
}

thread_local! {
    static COMPARED: Cell<usize> = const { Cell::new(0) };
}

/// A key that counts its comparisons.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Counted(u32);

impl PartialOrd for Counted {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Counted {
    fn cmp(&self, other: &Self) -> Ordering {
        COMPARED.with(|c| c.set(c.get() + 1));
        self.0.cmp(&other.0)
    }
}

#[test]
fn the_diff_of_a_map_and_an_edited_clone_reads_only_around_the_edits() {
    let map: OrdMap<Counted, u32> = (0..20_000).map(|i| (Counted(i * 2), i)).collect();
    let mut edited = map.clone();
    edited.insert(Counted(10_001), 1);
    edited.remove(&Counted(30_000));
    *edited.get_mut(&Counted(2)).unwrap() = 7;
    COMPARED.with(|c| c.set(0));
    let found: Vec<_> = map
        .diff(&edited)
        .map(|d| match d {
            DiffItem::Add(k, _) => ('+', k.0),
            DiffItem::Remove(k, _) => ('-', k.0),
            DiffItem::Update { new, .. } => ('~', new.0.0),
        })
        .collect();
    assert_eq!(found, [('~', 2), ('+', 10_001), ('-', 30_000)]);
    let compared = COMPARED.with(Cell::get);
    // Three leaves of 16 and a few separators on three paths, not 20,000 keys.
    assert!(compared < 400, "{compared} comparisons");
    assert_eq!(map.diff(&map.clone()).count(), 0);
    // Equality goes the same way.
    let mut touched = map.clone();
    *touched.get_mut(&Counted(4)).unwrap() = 2;
    COMPARED.with(|c| c.set(0));
    assert!(map == touched);
    let compared = COMPARED.with(Cell::get);
    assert!(compared < 200, "{compared} comparisons");
}

#[test]
fn distinct_sorted_entries_make_the_map_from_sorted_makes() {
    for n in [0usize, 1, 16, 17, 300, 5_000] {
        let entries: Vec<(u32, u32)> = (0..n as u32).map(|i| (i * 3, i)).collect();
        let map = OrdMap::from_distinct_sorted(entries.clone());
        map.check();
        assert_eq!(map, OrdMap::from_sorted(entries), "{n} entries");
    }
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "strictly increasing")]
fn distinct_sorted_entries_out_of_order_are_caught_in_debug_builds() {
    OrdMap::from_distinct_sorted(vec![(2, 'b'), (1, 'a')]);
}
