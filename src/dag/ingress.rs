//! Ingress processor.
use super::Builder;

pub fn build_ingresses(_b: &mut Builder<'_>) {}
