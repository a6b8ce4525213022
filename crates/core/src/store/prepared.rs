//! Objects kept with what routing reads of them, worked out when they arrive.

use std::sync::Arc;

use crate::api::ObjKey;

/// A kind whose objects the store keeps together with what `dag::build` reads of them, worked out
/// once when the object arrives (the kind's impl is beside the code that reads it).
pub trait Prepare {
    /// What the build reads of one object.
    type Ready: Send + Sync;

    /// Works it out; `key` is the object's namespace/name.
    fn prepare(key: &ObjKey, object: &Self) -> Self::Ready;
}

/// An object as the store keeps it: the object as written, and what routing reads of it
/// ([`Prepare::Ready`]). The IngressRoutes, Ingresses, HTTPRoutes and GRPCRoutes are kept this
/// way: their single-object rules' verdict, the hashes of their links and (IngressRoutes) their
/// routes lowered for the delegation walk are worked out once per version of the object,
/// when a watch event or a file brings it, instead of in every build that reads it. It reads as the
/// object (it dereferences to it) and compares as the object: the prepared part follows from the
/// object and its key.
pub struct Prepared<T: Prepare> {
    object: Arc<T>,
    ready: T::Ready,
}

impl<T: Prepare> Prepared<T> {
    pub fn new(key: &ObjKey, object: Arc<T>) -> Self {
        let ready = T::prepare(key, &object);
        Prepared { object, ready }
    }

    /// The object as written.
    pub fn object(&self) -> &Arc<T> {
        &self.object
    }

    /// What routing reads of it.
    pub fn ready(&self) -> &T::Ready {
        &self.ready
    }
}

impl<T: Prepare> std::ops::Deref for Prepared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.object
    }
}

impl<T: Prepare + PartialEq> PartialEq for Prepared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.object, &other.object) || self.object == other.object
    }
}

impl<T: Prepare + std::fmt::Debug> std::fmt::Debug for Prepared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.object.fmt(f)
    }
}
