//! Route v1alpha1 processor.
use super::Builder;

pub fn claim_hosts(_b: &mut Builder<'_>) {}
pub fn build_routes(_b: &mut Builder<'_>) {}
