//! The statuses one build gathers, held by the number of each routing object in the build.
//!
//! A builder numbers the routing objects it builds (every Ingress, IngressRoute of either version
//! and Route of its snapshot, or of its half of it) in the order of their status keys: by kind,
//! then by key, the order the snapshot's maps already hold them in. A processor going through its
//! objects gets each one's number with it ([`super::Builder::own`]) and says what it decided by
//! number, with no hashing of names; a status said of an object by its key (a route conflict, the
//! delegation walk) finds the number through one table. The statuses then come out in key order
//! as they are, with nothing to sort.

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::rc::Rc;

use hashbrown::{DefaultHashBuilder, HashMap, HashTable};

use super::halves::Half;
use super::model::{ObjectStatus, State};
use super::sort::sorted_entries;
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::Snapshot;
use crate::validate::FieldError;

/// The description of an orphaned object.
pub(super) const ORPHANED: &str = "not part of a delegation chain from a root";

/// The number of a routing object in one build (see the module's documentation).
pub type Slot = u32;

/// The routing kinds, in the order of their status keys (`Kind`'s order).
const ROUTING_KINDS: [Kind; 4] = [
    Kind::Ingress,
    Kind::IngressRouteV1beta1,
    Kind::IngressRouteV1,
    Kind::RouteV1alpha1,
];

fn routing_index(kind: Kind) -> Option<usize> {
    ROUTING_KINDS.iter().position(|&k| k == kind)
}

/// What is known of one object's status while a build runs.
#[derive(Default)]
pub(super) struct StatusAcc {
    pub state: Option<State>,
    pub description: Option<Cow<'static, str>>,
    pub messages: Vec<FieldError>,
    pub warnings: Vec<FieldError>,
    pub generation: Option<i64>,
    pub gateway: Option<Box<super::model::GatewayApiStatus>>,
    pub condition: Option<std::sync::Arc<super::model::GatewayCondition>>,
}

impl StatusAcc {
    pub fn into_status(self) -> ObjectStatus {
        let acc = self;
        let state = acc.state.unwrap_or(State::Valid);
        let description = acc.description.unwrap_or_else(|| match state {
            State::Invalid => acc
                .messages
                .first()
                .map_or("invalid".into(), |m| m.to_string().into()),
            State::Valid => "valid".into(),
            State::Orphaned => ORPHANED.into(),
            State::Ignored => "ignored".into(),
        });
        let description = if state == State::Invalid && acc.messages.len() > 1 {
            let more = acc.messages.len() - 1;
            let plural = if more == 1 { "" } else { "s" };
            format!("{description} (and {more} more problem{plural})").into()
        } else {
            description
        };
        ObjectStatus {
            state,
            description,
            messages: acc.messages,
            warnings: acc.warnings,
            generation: acc.generation,
            gateway: acc.gateway,
            condition: acc.condition,
        }
    }
}

/// Which object a status is said of: its number in the build, or its key.
#[derive(Clone, Copy)]
pub enum Of<'r> {
    Slot(Slot),
    Obj(&'r ObjectRef),
}

impl From<Slot> for Of<'_> {
    fn from(slot: Slot) -> Self {
        Of::Slot(slot)
    }
}

impl<'r> From<&'r ObjectRef> for Of<'r> {
    fn from(obj: &'r ObjectRef) -> Self {
        Of::Obj(obj)
    }
}

/// The routing objects of one build, numbered: each slot's kind and key, and the slot of a key.
pub(super) struct SlotIndex<'a> {
    /// Each slot's object, in status-key order.
    keys: Vec<(Kind, &'a ObjKey)>,
    /// Each slot's place among all routing objects of the snapshot ([`Place`]): in a half of a
    /// parallel build, what puts the two halves' statuses in key order without comparing keys.
    places: Vec<Place>,
    /// The first slot of each routing kind (in the order of `ROUTING_KINDS`).
    starts: [Slot; 4],
    /// The slots, found by kind and key.
    index: HashTable<Slot>,
    hasher: DefaultHashBuilder,
}

/// A routing object's place in the snapshot: its kind's place in the status-key order, then its
/// position among that kind's objects (in key order). Places order objects as their status keys
/// do.
pub(super) type Place = u64;

fn place(kind_index: usize, position: usize) -> Place {
    ((kind_index as u64) << 32) | position as u64
}

fn key_hash(hasher: &DefaultHashBuilder, kind: Kind, key: &ObjKey) -> u64 {
    hasher.hash_one((kind, &*key.namespace, &*key.name))
}

impl<'a> SlotIndex<'a> {
    /// Numbers the routing objects of `snapshot` (those of `half`, when given).
    pub fn new(snapshot: &'a Snapshot, half: Option<Half<'a>>) -> Self {
        let capacity = half.map_or_else(|| snapshot.routing_objects(), |h| h.routing_objects());
        let mut keys = Vec::with_capacity(capacity);
        let mut places = Vec::with_capacity(capacity);
        let mut starts = [0; 4];
        for (k, kind) in ROUTING_KINDS.into_iter().enumerate() {
            starts[k] = Slot::try_from(keys.len()).unwrap_or(Slot::MAX);
            let objects: &mut dyn Iterator<Item = &'a ObjKey> = match kind {
                Kind::Ingress => &mut snapshot.ingresses.keys(),
                Kind::IngressRouteV1beta1 => &mut snapshot.ingressroutes_v1beta1.keys(),
                Kind::IngressRouteV1 => &mut snapshot.ingressroutes_v1.keys(),
                _ => &mut snapshot.routes_v1alpha1.keys(),
            };
            for (i, key) in objects.enumerate() {
                if half.is_none_or(|h| h.holds(kind, i)) {
                    keys.push((kind, key));
                    places.push(place(k, i));
                }
            }
        }
        let hasher = DefaultHashBuilder::default();
        let mut index = HashTable::with_capacity(keys.len());
        for (slot, (kind, key)) in keys.iter().enumerate() {
            // More than u32::MAX routing objects do not fit in memory; such a slot would not
            // be found, and its object's status would be kept by key.
            let Ok(slot) = Slot::try_from(slot) else {
                break;
            };
            let hash = key_hash(&hasher, *kind, key);
            index.insert_unique(hash, slot, |&s| {
                let (k, key) = keys[s as usize];
                key_hash(&hasher, k, key)
            });
        }
        SlotIndex {
            keys,
            places,
            starts,
            index,
            hasher,
        }
    }

    /// The number of slots.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The first slot of `kind`'s objects: [`super::Builder::own`] yields its objects in the
    /// order they were numbered in, from this one.
    pub fn start(&self, kind: Kind) -> Slot {
        routing_index(kind).map_or(Slot::MAX, |i| self.starts[i])
    }

    /// The slot of the object of `kind` with `key`; None when the build does not hold it.
    pub fn find(&self, kind: Kind, key: &ObjKey) -> Option<Slot> {
        let hash = key_hash(&self.hasher, kind, key);
        let keys = &self.keys;
        (self.index)
            .find(hash, |&s| {
                let (k, candidate) = keys[s as usize];
                k == kind && candidate == key
            })
            .copied()
    }
}

/// The statuses of one build, by slot.
pub(super) struct StatusSlots<'a> {
    index: Rc<SlotIndex<'a>>,
    /// Each slot's status; None until something is said of the object.
    accs: Vec<Option<StatusAcc>>,
    /// Statuses of objects the build did not number. None of the builds sluice makes says
    /// anything of such an object (a processor speaks of the objects it builds, and a
    /// delegation reaches only objects of its own half); kept so that no status is ever lost.
    others: HashMap<ObjectRef, StatusAcc>,
}

impl<'a> StatusSlots<'a> {
    /// Numbers the routing objects of `snapshot` (those of `half`, when given).
    pub fn new(snapshot: &'a Snapshot, half: Option<Half<'a>>) -> Self {
        let index = SlotIndex::new(snapshot, half);
        let accs = std::iter::repeat_with(|| None).take(index.len()).collect();
        StatusSlots {
            index: Rc::new(index),
            accs,
            others: HashMap::new(),
        }
    }

    /// The numbering, to share with the delegation walk.
    pub fn index(&self) -> &Rc<SlotIndex<'a>> {
        &self.index
    }

    fn slot_of(&self, obj: &ObjectRef) -> Option<Slot> {
        self.index.find(obj.kind, &obj.key)
    }

    /// The status of `of`, made when nothing was said of it yet.
    pub fn acc(&mut self, of: Of<'_>) -> &mut StatusAcc {
        let slot = match of {
            Of::Slot(s) => s,
            Of::Obj(obj) => match self.slot_of(obj) {
                Some(s) => s,
                None => return self.others.entry(obj.clone()).or_default(),
            },
        };
        self.accs[slot as usize].get_or_insert_default()
    }

    /// The status of `of` so far, if anything was said of it.
    pub fn get(&self, of: Of<'_>) -> Option<&StatusAcc> {
        match of {
            Of::Slot(s) => self.accs[s as usize].as_ref(),
            Of::Obj(obj) => match self.slot_of(obj) {
                Some(s) => self.accs[s as usize].as_ref(),
                None => self.others.get(obj),
            },
        }
    }

    /// Every status said, in key order, with each one's [`Place`] when every status is of a
    /// numbered object (None otherwise: no build sluice makes says anything of another).
    pub fn into_sorted(self) -> (Vec<(ObjectRef, ObjectStatus)>, Option<Vec<Place>>) {
        let index = &self.index;
        let mut places = Vec::with_capacity(index.places.len());
        // At most one status per slot: room for all of them at once, where a vector collected
        // from a filter would grow by doubling, copying ~1 MB of statuses on the way at 10k.
        let capacity = self.accs.len();
        let numbered = (index.keys.iter().zip(&index.places))
            .zip(self.accs)
            .filter_map(|((&(kind, key), &place), acc)| {
                let acc = acc?;
                places.push(place);
                let obj = ObjectRef {
                    kind,
                    key: key.clone(),
                };
                Some((obj, acc.into_status()))
            });
        if self.others.is_empty() {
            let mut statuses = Vec::with_capacity(capacity);
            statuses.extend(numbered);
            (statuses, Some(places))
        } else {
            let others = (self.others.into_iter()).map(|(obj, acc)| (obj, acc.into_status()));
            (sorted_entries(numbered.chain(others)), None)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::{heptio_v1beta1, route_v1alpha1};

    #[test]
    fn slots_follow_the_status_key_order_and_are_found_by_key() {
        let mut snap = Snapshot::default();
        for (ns, name) in [("b", "x"), ("a", "y"), ("a", "x")] {
            let ir = heptio_v1beta1::IngressRoute::new(name, Default::default());
            let key = ObjKey::new(ns, name);
            let ir = crate::store::Prepared::new(&key, Arc::new(ir));
            snap.ingressroutes_v1beta1.insert(key.clone(), Arc::new(ir));
            let ing = crate::store::Prepared::new(&key, Default::default());
            snap.ingresses.insert(key, Arc::new(ing));
        }
        let route = route_v1alpha1::Route::new("r", Default::default());
        snap.routes_v1alpha1
            .insert(ObjKey::new("a", "r"), Arc::new(route));
        let mut slots = StatusSlots::new(&snap, None);
        let index = slots.index().clone();
        assert_eq!(index.start(Kind::Ingress), 0);
        assert_eq!(index.start(Kind::IngressRouteV1beta1), 3);
        assert_eq!(index.start(Kind::IngressRouteV1), 6);
        assert_eq!(index.start(Kind::RouteV1alpha1), 6);
        let key = ObjKey::new("b", "x");
        assert_eq!(index.find(Kind::IngressRouteV1beta1, &key), Some(5));
        assert_eq!(index.find(Kind::IngressRouteV1, &key), None);
        // Said by key, found at the object's number.
        let by_key = ObjectRef::new(Kind::IngressRouteV1beta1, "a", "y");
        slots.acc(Of::Obj(&by_key)).state = Some(State::Orphaned);
        assert_eq!(slots.get(Of::Slot(4)).unwrap().state, Some(State::Orphaned));
        slots.acc(Of::Slot(6)).state = Some(State::Invalid);
        let route = ObjectRef::new(Kind::RouteV1alpha1, "a", "r");
        assert_eq!(
            slots.get(Of::Obj(&route)).unwrap().state,
            Some(State::Invalid)
        );
        // An object the build does not hold keeps its status too.
        let stranger = ObjectRef::new(Kind::IngressRouteV1, "z", "z");
        slots.acc(Of::Obj(&stranger)).state = Some(State::Ignored);
        slots.acc(Of::Slot(0));
        let (sorted, places) = slots.into_sorted();
        assert_eq!(
            places, None,
            "a status of an object the build did not number has no place"
        );
        let keys: Vec<String> = sorted
            .iter()
            .map(|(o, _)| format!("{} {}", o.kind, o.key))
            .collect();
        assert_eq!(
            keys,
            [
                "Ingress networking.k8s.io/v1 a/x",
                "IngressRoute contour.heptio.com/v1beta1 a/y",
                "IngressRoute projectcontour.io/v1 z/z",
                "Route contour.heptio.com/v1alpha1 a/r",
            ]
        );
        let states: Vec<State> = sorted.iter().map(|(_, s)| s.state).collect();
        assert_eq!(
            states,
            [
                State::Valid,
                State::Orphaned,
                State::Ignored,
                State::Invalid
            ]
        );
    }

    #[test]
    fn places_order_the_statuses_as_their_keys() {
        let mut snap = Snapshot::default();
        for (ns, name) in [("b", "x"), ("a", "y"), ("a", "x")] {
            let key = ObjKey::new(ns, name);
            let ir = heptio_v1beta1::IngressRoute::new(name, Default::default());
            let ir = crate::store::Prepared::new(&key, Arc::new(ir));
            snap.ingressroutes_v1beta1.insert(key.clone(), Arc::new(ir));
            let ing = crate::store::Prepared::new(&key, Default::default());
            snap.ingresses.insert(key, Arc::new(ing));
        }
        let mut slots = StatusSlots::new(&snap, None);
        // Nothing said of slot 1 (Ingress a/y): no status, no place.
        for slot in [0, 2, 3, 4, 5] {
            slots.acc(Of::Slot(slot)).state = Some(State::Valid);
        }
        let (sorted, places) = slots.into_sorted();
        let places = places.expect("every status is of a numbered object");
        assert_eq!(places.len(), sorted.len());
        // Ingresses (the first routing kind) at their positions 0 and 2, then IngressRoutes
        // (the second) at 0, 1 and 2.
        assert_eq!(places, [0, 2, 1 << 32, (1 << 32) + 1, (1 << 32) + 2]);
        assert!(sorted.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
