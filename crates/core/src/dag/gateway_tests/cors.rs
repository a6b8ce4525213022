//! HTTPRoute `CORS` filters: a rule's policy on each of its routes, the Gateway API's default
//! `maxAge`, and a policy the single-object rules refuse.

use super::*;

#[test]
fn a_rules_cors_policy_is_on_each_of_its_routes_with_the_default_max_age() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /api}}, {path: {value: /v2}}]
    filters:
    - type: CORS
      cors:
        allowOrigins: [\"https://app.example.com\", \"https://*.example.org\"]
        allowMethods: [GET, PUT]
        allowHeaders: [x-token]
        exposeHeaders: [x-trace]
        allowCredentials: true
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /open}}]
    filters: [{type: CORS, cors: {allowOrigins: [\"*\"], maxAge: 600}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /plain}}]
    backendRefs: [{name: web, port: 80}]
",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let policy = Cors {
        allow_origins: vec![
            "https://app.example.com".to_string(),
            "https://*.example.org".to_string(),
        ],
        allow_methods: vec!["GET".to_string(), "PUT".to_string()],
        allow_headers: vec!["x-token".to_string()],
        expose_headers: vec!["x-trace".to_string()],
        max_age: 5,
        allow_credentials: true,
    };
    assert_eq!(shop_route(&dag, "/api").cors(), Some(&policy));
    assert_eq!(shop_route(&dag, "/v2").cors(), Some(&policy));
    let open = shop_route(&dag, "/open").cors().expect("a policy");
    assert_eq!(open.allow_origins, ["*"]);
    assert_eq!((open.max_age, open.allow_credentials), (600, false));
    assert!(open.allow_methods.is_empty());
    // As `sluice routes` shows them.
    assert_eq!(
        table::table_route(shop_route(&dag, "/api"), false)
            .cors
            .as_deref(),
        Some(
            "origins https://app.example.com, https://*.example.org; methods GET, PUT; headers x-token; expose x-trace; max age 5s; credentials"
        )
    );
    assert_eq!(
        table::table_route(shop_route(&dag, "/open"), false)
            .cors
            .as_deref(),
        Some("origins *; max age 600s")
    );
    assert_eq!(shop_route(&dag, "/plain").cors(), None);
    assert_eq!(shop_route(&dag, "/plain").extras, None);
    let c = conds(&route_parent(&dag, "shop", "store").conditions);
    assert_eq!(c[0], "Accepted=true/Accepted");
}

#[test]
fn a_cors_policy_with_an_origin_that_is_not_one_refuses_the_route() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /api}}]
    filters: [{type: CORS, cors: {allowOrigins: [\"app.example.com\"]}}]
    backendRefs: [{name: web, port: 80}]
",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let p = route_parent(&dag, "shop", "store");
    assert_eq!(conds(&p.conditions)[0], "Accepted=false/UnsupportedValue");
    let m = &p.conditions[0].message;
    assert!(
        m.contains(
            "spec.rules[0].filters[0].cors.allowOrigins[0]: \"app.example.com\" has no scheme"
        ),
        "{m}"
    );
    assert!(!dag.vhosts.contains_key("shop.example.com"));
}
