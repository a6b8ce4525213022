//! Sorting a build's entries into key order (`Builder::finish`): numbers made of each key's
//! bytes, eight at a time, and the keys themselves compared only where those numbers are equal.

use std::sync::Arc;

use crate::api::ObjectRef;

/// How many levels of [`OrderChunks::order_chunk`] a sort goes down before it compares the keys
/// of a run of equal numbers themselves.
const MAX_LEVEL: usize = 8;

/// Entries with distinct keys in any order, in key order. Sorts the positions of the entries
/// rather than the entries themselves (models are large; moving them around while sorting cost
/// more than comparing the keys), and the positions by numbers: each key's first
/// [chunk](OrderChunks::order_chunk), then, within each run of equal numbers, the next chunk of
/// the run's keys, and so on (a most-significant-digit radix order eight bytes at a time, each
/// level a sort of numbers). Keys are compared themselves only within a run whose keys have no
/// next chunk (a run of keys that share their first 64 bytes, or end inside the run's chunk).
/// A comparison of keys read from all over memory took most of a sort's time; a number per key
/// and level is one read of it.
pub(super) fn sorted_entries<K: Ord + OrderChunks, V>(
    entries: impl Iterator<Item = (K, V)>,
) -> Vec<(K, V)> {
    let mut entries: Vec<(K, V)> = entries.collect();
    let mut order: Vec<(u64, usize)> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (k.order_chunk(0).unwrap_or(0), i))
        .collect();
    order.sort_unstable_by_key(|&(chunk, _)| chunk);
    sort_runs(&entries, &mut order, 0);
    // Entries put where they belong in place, one cycle of the permutation at a time: each
    // entry is moved once more, into memory already read, rather than into a second vector.
    let mut from: Vec<usize> = order.into_iter().map(|(_, i)| i).collect();
    for start in 0..from.len() {
        let mut at = start;
        while from[at] != at {
            let next = from[at];
            from[at] = at;
            if next == start {
                break;
            }
            entries.swap(at, next);
            at = next;
        }
    }
    entries
}

/// Orders each run of equal numbers in `order` (sorted by the chunks of `level`): by the next
/// level's chunks where every key of the run has one, by the keys themselves where not.
fn sort_runs<K: Ord + OrderChunks, V>(slots: &[(K, V)], order: &mut [(u64, usize)], level: usize) {
    let key = |i: usize| &slots[i].0;
    for run in order.chunk_by_mut(|a, b| a.0 == b.0) {
        if run.len() < 2 {
            continue;
        }
        let next = level + 1;
        let chunked = next < MAX_LEVEL
            && run.iter_mut().all(|e| match key(e.1).order_chunk(next) {
                Some(c) => {
                    e.0 = c;
                    true
                }
                None => false,
            });
        if chunked {
            run.sort_unstable_by_key(|&(chunk, _)| chunk);
            sort_runs(slots, run, next);
        } else {
            run.sort_unstable_by(|a, b| key(a.1).cmp(key(b.1)));
        }
    }
}

/// Numbers from a key's bytes, eight at a time, that order as the key does: for keys `a < b`
/// whose chunks of levels `0..l` are equal, `a.order_chunk(l) <= b.order_chunk(l)` when both
/// are `Some`. Level 0 is always `Some`; a later level is `None` where it cannot order the key
/// (the key ends before it), and the sort then compares the keys themselves.
pub(super) trait OrderChunks {
    fn order_chunk(&self, level: usize) -> Option<u64>;
}

/// Bytes `8 * level ..` of `s` (at most 8) as the high bytes of a number, zeros past its end;
/// `None` past level 0 when `s` ends before that level's bytes. Among strings with equal earlier
/// chunks, a string before another (bytewise, as `str` orders) never gets the larger number.
fn bytes_chunk(s: &[u8], level: usize) -> Option<u64> {
    let from = 8 * level;
    if level > 0 && s.len() <= from {
        return None;
    }
    let rest = s.get(from..).unwrap_or_default();
    let n = rest.len().min(8);
    let mut b = [0u8; 8];
    b[..n].copy_from_slice(&rest[..n]);
    Some(u64::from_be_bytes(b))
}

impl OrderChunks for String {
    fn order_chunk(&self, level: usize) -> Option<u64> {
        bytes_chunk(self.as_bytes(), level)
    }
}

impl OrderChunks for Arc<str> {
    fn order_chunk(&self, level: usize) -> Option<u64> {
        bytes_chunk(self.as_bytes(), level)
    }
}

/// An `ObjectRef` orders by kind, then namespace, then name. Level 0: the kind, then the
/// namespace's first 7 bytes. Later levels: the name's chunks, for a namespace of at most 7
/// bytes without a NUL byte, whose level-0 number then stands for it alone (every key of a run
/// of equal numbers has the same kind and namespace); `None` for any other namespace.
impl OrderChunks for ObjectRef {
    fn order_chunk(&self, level: usize) -> Option<u64> {
        let ns = self.key.namespace.as_bytes();
        if level == 0 {
            let mut b = [0u8; 8];
            b[0] = self.kind as u8;
            let n = ns.len().min(7);
            b[1..=n].copy_from_slice(&ns[..n]);
            return Some(u64::from_be_bytes(b));
        }
        if ns.len() > 7 || ns.contains(&0) {
            return None;
        }
        bytes_chunk(self.key.name.as_bytes(), level - 1)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use hashbrown::DefaultHashBuilder;

    use super::*;
    use crate::api::Kind;

    /// Keys that share prefixes of every length around 7 and 8 bytes, end inside and past them,
    /// and hold bytes above ASCII and NUL bytes (which look like the zeros past a key's end).
    fn tricky_strings() -> Vec<String> {
        let mut out = Vec::new();
        for base in [
            "",
            "a",
            "team-1",
            "team-10",
            "team-100",
            "team-1000",
            "teamteam",
            "é",
        ] {
            for tail in [
                "",
                "/",
                "-",
                "a",
                "b/c",
                "\u{7f}",
                "ü",
                "zzzzzzzzzz",
                "\0",
                "\0\0\0\0\0\0\0\0\0z",
            ] {
                out.push(format!("{base}{tail}"));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn sorted_entries_orders_as_the_keys_do() {
        let strings = tricky_strings();
        // Every order of input is the same as a shuffle: hashing decides it here.
        let hasher = DefaultHashBuilder::default();
        let mut shuffled = strings.clone();
        shuffled.sort_by_key(|s| hasher.hash_one(s));
        let got: Vec<String> = sorted_entries(shuffled.iter().map(|s| (s.clone(), ())))
            .into_iter()
            .map(|(k, ())| k)
            .collect();
        assert_eq!(got, strings);
        let names: Vec<Arc<str>> = strings.iter().map(|s| Arc::from(s.as_str())).collect();
        let got: Vec<Arc<str>> =
            sorted_entries(shuffled.iter().map(|s| (Arc::from(s.as_str()), ())))
                .into_iter()
                .map(|(k, ())| k)
                .collect();
        assert_eq!(got, names);
        let mut refs = Vec::new();
        for kind in [
            Kind::Ingress,
            Kind::IngressRouteV1beta1,
            Kind::RouteV1alpha1,
        ] {
            for ns in strings.iter().step_by(3) {
                for name in strings.iter().step_by(5) {
                    refs.push(ObjectRef::new(kind, ns.as_str(), name.as_str()));
                }
            }
        }
        let mut want = refs.clone();
        want.sort();
        refs.sort_by_key(|r| hasher.hash_one(r));
        let got: Vec<ObjectRef> = sorted_entries(refs.into_iter().map(|r| (r, ())))
            .into_iter()
            .map(|(k, ())| k)
            .collect();
        assert_eq!(got, want);
    }

    /// The chunks of every level up to where a key ends, for the pair `a < b`: where both keys
    /// have chunks up to a level and those before it are equal, `a`'s is not the larger.
    fn assert_chunks_agree<K: OrderChunks + Ord + std::fmt::Debug>(a: &K, b: &K) {
        assert!(a < b);
        for level in 0..=MAX_LEVEL {
            match (a.order_chunk(level), b.order_chunk(level)) {
                (Some(x), Some(y)) if x == y => continue,
                (Some(x), Some(y)) => {
                    assert!(x < y, "{a:?} < {b:?}, level {level}");
                    return;
                }
                (None, _) | (_, None) => {
                    assert!(level > 0, "level 0 always has a chunk");
                    return;
                }
            }
        }
    }

    #[test]
    fn order_chunks_never_contradict_the_order() {
        let strings = tricky_strings();
        for a in &strings {
            for b in &strings {
                if a < b {
                    assert_chunks_agree(a, b);
                    let (x, y) = (Arc::<str>::from(a.as_str()), Arc::<str>::from(b.as_str()));
                    assert_chunks_agree(&x, &y);
                }
            }
        }
        // References of any namespace and name against each other: equal level-0 chunks do
        // not always mean equal namespaces.
        let mut refs = Vec::new();
        for ns in &strings {
            for name in ["", "n", "a\0", "zzzzzzzzzzzzzzzzz", "team-1000a"] {
                refs.push(ObjectRef::new(Kind::Ingress, ns.as_str(), name));
            }
        }
        refs.sort();
        for (i, a) in refs.iter().enumerate() {
            for b in &refs[i + 1..] {
                assert_chunks_agree(a, b);
            }
        }
    }

    #[test]
    fn keys_sharing_long_prefixes_sort_through_every_level() {
        // Keys alike for 40 bytes and more: the sort goes down several levels of chunks, and
        // past the last one it compares keys.
        let base = "a".repeat(40);
        let mut want: Vec<String> = (0..300)
            .map(|i| format!("{base}{}", "x".repeat(i % 37)) + &format!("{i:05}"))
            .chain((0..50).map(|i| format!("{}{i}", "b".repeat(70))))
            .collect();
        want.sort();
        want.dedup();
        let hasher = DefaultHashBuilder::default();
        let mut shuffled = want.clone();
        shuffled.sort_by_key(|s| hasher.hash_one(s));
        let got: Vec<String> = sorted_entries(shuffled.into_iter().map(|s| (s, ())))
            .into_iter()
            .map(|(k, ())| k)
            .collect();
        assert_eq!(got, want);
    }
}
