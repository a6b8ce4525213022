//! A cluster's ready endpoints as the store's EndpointSlices give them.

use std::sync::Arc;

use serde::Serialize;

use super::SliceEndpoints;

/// One ready upstream address (ordered by address as a number, then port).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Endpoint {
    pub address: std::net::IpAddr,
    pub port: u16,
}

/// A cluster's ready endpoints, sorted (by address, then port) and without repeats.
///
/// A cluster whose endpoints all come from one EndpointSlice (nearly every cluster: Kubernetes
/// cuts a Service's endpoints into slices of 100) shares that slice's address list, which the
/// store keeps sorted and without repeats, instead of holding a copy: a build makes no block
/// and copies no address for it, and the model holds no second copy of the addresses. Two
/// `Endpoints` are equal when they hold the same endpoints, however each holds them.
#[derive(Clone)]
pub enum Endpoints {
    /// Every address of one slice's ready list, each at `port`.
    Shared {
        addresses: Arc<[std::net::IpAddr]>,
        port: u16,
    },
    /// Endpoints of their own (merged from several slices, or given).
    Owned(Box<[Endpoint]>),
}

impl Endpoints {
    pub fn len(&self) -> usize {
        match self {
            Endpoints::Shared { addresses, .. } => addresses.len(),
            Endpoints::Owned(e) => e.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The endpoints in order.
    pub fn iter(&self) -> EndpointsIter<'_> {
        match self {
            Endpoints::Shared { addresses, port } => {
                EndpointsIter(Held::Shared(addresses.iter(), *port))
            }
            Endpoints::Owned(e) => EndpointsIter(Held::Owned(e.iter())),
        }
    }
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints::Owned(Box::default())
    }
}

impl From<Vec<Endpoint>> for Endpoints {
    /// Endpoints as given (the caller sorts them and drops repeats, as a cluster's are).
    fn from(v: Vec<Endpoint>) -> Self {
        Endpoints::Owned(v.into_boxed_slice())
    }
}

impl PartialEq for Endpoints {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Endpoints::Shared {
                    addresses: a,
                    port: p,
                },
                Endpoints::Shared {
                    addresses: b,
                    port: q,
                },
            ) => p == q && (Arc::ptr_eq(a, b) || a == b),
            _ => self.len() == other.len() && self.iter().eq(other.iter()),
        }
    }
}

impl Eq for Endpoints {}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for Endpoints {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'a> IntoIterator for &'a Endpoints {
    type Item = Endpoint;
    type IntoIter = EndpointsIter<'a>;
    fn into_iter(self) -> EndpointsIter<'a> {
        self.iter()
    }
}

/// The endpoints of an [`Endpoints`], in order.
#[derive(Clone)]
pub struct EndpointsIter<'a>(Held<'a>);

#[derive(Clone)]
enum Held<'a> {
    Shared(std::slice::Iter<'a, std::net::IpAddr>, u16),
    Owned(std::slice::Iter<'a, Endpoint>),
}

impl Iterator for EndpointsIter<'_> {
    type Item = Endpoint;

    fn next(&mut self) -> Option<Endpoint> {
        match &mut self.0 {
            Held::Shared(addresses, port) => addresses.next().map(|&address| Endpoint {
                address,
                port: *port,
            }),
            Held::Owned(e) => e.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            Held::Shared(a, _) => a.len(),
            Held::Owned(e) => e.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for EndpointsIter<'_> {}

/// The ready endpoints of the Service port named `port_name` in a Service's EndpointSlices, sorted
/// and without duplicates: what a cluster's `endpoints` hold. The endpoints of a Service whose
/// port is in one slice alone (nearly every Service) are that slice's address list, shared: the
/// store keeps it sorted and without repeats.
pub fn slice_endpoints<'s>(
    slices: impl IntoIterator<Item = &'s SliceEndpoints>,
    port_name: &str,
) -> Endpoints {
    let mut with_port = slices
        .into_iter()
        .filter_map(|slice| Some((slice, slice.port(port_name)?)));
    let Some((first, port)) = with_port.next() else {
        return Endpoints::default();
    };
    let Some(second) = with_port.next() else {
        return Endpoints::Shared {
            addresses: first.ready.clone(),
            port,
        };
    };
    let mut out = Vec::new();
    for (slice, port) in [(first, port), second].into_iter().chain(with_port) {
        out.extend(
            slice
                .ready
                .iter()
                .map(|&address| Endpoint { address, port }),
        );
    }
    out.sort_unstable();
    out.dedup();
    out.into()
}
