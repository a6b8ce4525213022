//! Gateway API rules.
use super::Verdict;
use crate::store::AnyObject;

pub fn validate_gateway_object(_o: &AnyObject) -> Verdict {
    Verdict::default()
}
