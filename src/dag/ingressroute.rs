//! IngressRoute processors (v1beta1 and v1): roots, delegation, orphans, cycles.
use super::Builder;

pub fn claim_hosts(_b: &mut Builder<'_>) {}
pub fn build_v1beta1(_b: &mut Builder<'_>) {}
pub fn build_v1(_b: &mut Builder<'_>) {}
