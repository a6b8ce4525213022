#![forbid(unsafe_code)]
//! sluice: a Kubernetes ingress control plane for Envoy.
//!
//! The layers are crates of this workspace (docs/architecture.md): `sluice-core` (API types,
//! store, validation, the routing model), `sluice-xds` (Envoy resources, cache, xDS server),
//! `sluice-k8s` (watches, status writer, leader election), `sluice-webhook` (admission) and
//! `sluice-tls` (reloading certificates). This crate wires them for the three roles ([`app`])
//! behind the command line ([`cli`]); it re-exports the layers under their module names.

pub use sluice_core::{api, dag, manifest, pmap, route_match, store, synth, validate};
pub use sluice_k8s as k8s;
pub use sluice_tls as tls;
pub use sluice_webhook as webhook;
pub use sluice_xds::{translate, xds};

pub mod app;
pub mod cli;
