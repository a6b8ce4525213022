//! IngressRoute rules (both versions).
use super::Verdict;
use crate::api::{contour_v1, heptio_v1beta1};

pub fn validate_v1beta1(_o: &heptio_v1beta1::IngressRoute) -> Verdict {
    Verdict::default()
}
pub fn validate_v1(_o: &contour_v1::IngressRoute) -> Verdict {
    Verdict::default()
}
