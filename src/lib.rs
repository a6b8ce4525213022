#![forbid(unsafe_code)]
//! sluice: a Kubernetes ingress control plane for Envoy.
//!
//! One pipeline, pure in the middle: sources fill a [`store::Snapshot`], [`dag::build`] turns it into
//! the routing model plus a status for every routing object, and the outputs (CLI, xDS, status writer,
//! admission webhook) consume the result. See docs/architecture.md.

pub mod api;
pub mod app;
pub mod cli;
pub mod dag;
pub mod k8s;
pub mod manifest;
pub mod pmap;
pub mod route_match;
pub mod store;
pub mod synth;
pub mod tls;
#[cfg(test)]
pub(crate) mod test_rng;
pub mod translate;
pub mod validate;
pub mod webhook;
pub mod xds;
