//! HTTPRoute rules' `timeouts` and `retry`: the request's bound, each try's, and what is tried
//! again.

use super::*;

#[test]
fn a_rules_timeouts_bound_the_request_and_each_request_to_a_backend() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /b}}]\n    timeouts: {request: 10s, backendRequest: 300ms}\n    backendRefs: [{name: web, port: 80}]\n  - matches: [{path: {value: /z}}]\n    timeouts: {request: 0s, backendRequest: 0s}\n    backendRefs: [{name: web, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let bounded = shop_route(&dag, "/b");
    assert_eq!(
        bounded.timeout,
        Some(crate::validate::common::Timeout::After(
            std::time::Duration::from_secs(10)
        ))
    );
    assert_eq!(
        bounded.retry,
        Some(crate::dag::RetryPolicy {
            count: 0,
            per_try_timeout: Some(std::time::Duration::from_millis(300)),
            ..crate::dag::RetryPolicy::new(0, None)
        })
    );
    // Zero: no timeout.
    let unbounded = shop_route(&dag, "/z");
    assert_eq!(
        unbounded.timeout,
        Some(crate::validate::common::Timeout::Infinite)
    );
    assert_eq!(unbounded.retry, None);
}

#[test]
fn a_rules_retry_lists_its_codes_attempts_backoff_and_per_try_timeout() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /r}}]\n    timeouts: {backendRequest: 300ms}\n    retry: {codes: [503, 500, 503], attempts: 3, backoff: 100ms}\n    backendRefs: [{name: web, port: 80}]\n  - matches: [{path: {value: /d}}]\n    retry: {}\n    backendRefs: [{name: web, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let ms = std::time::Duration::from_millis;
    assert_eq!(
        shop_route(&dag, "/r").retry,
        Some(crate::dag::RetryPolicy {
            count: 3,
            per_try_timeout: Some(ms(300)),
            on: crate::dag::RetryOn::Codes(vec![500, 503]),
            backoff: Some(ms(100)),
        })
    );
    // Neither codes nor attempts: one retry, of connection errors and timeouts only.
    assert_eq!(
        shop_route(&dag, "/d").retry,
        Some(crate::dag::RetryPolicy {
            on: crate::dag::RetryOn::Codes(Vec::new()),
            ..crate::dag::RetryPolicy::new(1, None)
        })
    );
}
