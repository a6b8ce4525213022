//! e2e tests against a real kube-apiserver + etcd, driven with real kubectl. Run by `make e2e`
//! (e2e/run.sh brings up the control plane and runs `cargo test --test e2e -- --ignored`); plain
//! `cargo test` skips them. Tests run one at a time (--test-threads=1): they share the cluster
//! and the leader Lease. See docs/e2e.md.

mod support;

mod certgen;
mod chart;
mod gateway;
mod leader;
mod pods;
mod restart;
mod status;
mod traffic;
mod validate;
mod webhook;
