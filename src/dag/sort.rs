//! Sorting a build's entries into key order (`Builder::finish`): a number from each key's first
//! bytes first, the keys themselves only where those numbers are equal.

use std::sync::Arc;

use crate::api::ObjectRef;

/// Entries with distinct keys in any order, in key order. Sorts the positions of the entries
/// rather than the entries themselves (models are large; moving them around while sorting cost
/// more than comparing the keys), and the positions by each key's [`OrderPrefix`] first: one
/// read of each key, then a sort of numbers, and the keys themselves compared only among those
/// with the same prefix (the entries of one namespace, say), where a comparison of keys read
/// from all over memory took most of a sort's time.
pub(super) fn sorted_entries<K: Ord + OrderPrefix, V>(
    entries: impl Iterator<Item = (K, V)>,
) -> Vec<(K, V)> {
    let mut slots: Vec<Option<(K, V)>> = entries.map(Some).collect();
    let key = |i: usize| &slots[i].as_ref().expect("every slot is filled").0;
    let mut order: Vec<(u64, usize)> = (0..slots.len())
        .map(|i| (key(i).order_prefix(), i))
        .collect();
    order.sort_unstable_by_key(|&(prefix, _)| prefix);
    for same in order.chunk_by_mut(|a, b| a.0 == b.0) {
        if same.len() > 1 {
            same.sort_unstable_by(|a, b| key(a.1).cmp(key(b.1)));
        }
    }
    order
        .into_iter()
        .map(|(_, i)| slots[i].take().expect("each position once"))
        .collect()
}

/// A number from the first bytes of a key that orders as the key does wherever two numbers
/// differ: `a < b` implies `a.order_prefix() <= b.order_prefix()`.
pub(super) trait OrderPrefix {
    fn order_prefix(&self) -> u64;
}

/// The first `n` (at most 8) bytes of `s` as the high bytes of a number, zeros past its end: a
/// string before another (bytewise, as `str` orders) never gets the larger number.
fn bytes_prefix(s: &[u8], n: usize) -> u64 {
    let mut b = [0u8; 8];
    let n = n.min(8).min(s.len());
    b[..n].copy_from_slice(&s[..n]);
    u64::from_be_bytes(b)
}

impl OrderPrefix for String {
    fn order_prefix(&self) -> u64 {
        bytes_prefix(self.as_bytes(), 8)
    }
}

impl OrderPrefix for Arc<str> {
    fn order_prefix(&self) -> u64 {
        bytes_prefix(self.as_bytes(), 8)
    }
}

/// The kind (an `ObjectRef` orders by kind, then namespace, then name), then the namespace's
/// first 7 bytes.
impl OrderPrefix for ObjectRef {
    fn order_prefix(&self) -> u64 {
        (u64::from(self.kind as u8) << 56) | (bytes_prefix(self.key.namespace.as_bytes(), 7) >> 8)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use hashbrown::DefaultHashBuilder;

    use super::*;
    use crate::api::Kind;

    /// Keys that share prefixes of every length around 7 and 8 bytes, end inside and past them,
    /// and hold bytes above ASCII.
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
            for tail in ["", "/", "-", "a", "b/c", "\u{7f}", "ü", "zzzzzzzzzz"] {
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

    #[test]
    fn order_prefixes_never_contradict_the_order() {
        let strings = tricky_strings();
        for a in &strings {
            for b in &strings {
                if a < b {
                    assert!(a.order_prefix() <= b.order_prefix(), "{a:?} < {b:?}");
                    let (x, y) = (
                        ObjectRef::new(Kind::Ingress, a.as_str(), "n"),
                        ObjectRef::new(Kind::Ingress, b.as_str(), "n"),
                    );
                    assert!(x.order_prefix() <= y.order_prefix(), "{x:?} < {y:?}");
                }
            }
        }
    }
}
