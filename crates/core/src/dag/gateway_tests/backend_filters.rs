//! Header filters on a `backendRef`: each backend of a rule with its own header changes, kept
//! apart from another backendRef of the same Service with other changes (the filters sluice does
//! not apply on a backendRef: `what_sluice_does_not_route_yet_refuses_the_route_naming_the_field`).

use super::*;

#[test]
fn each_backend_of_a_rule_has_the_header_changes_of_its_filters() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /split}}]
    backendRefs:
    - name: web
      port: 80
      weight: 3
      filters:
      - type: RequestHeaderModifier
        requestHeaderModifier: {set: [{name: X-Pick, value: web}], remove: [X-Drop]}
      - type: ResponseHeaderModifier
        responseHeaderModifier: {add: [{name: X-Served-By, value: web}]}
    - {name: api, port: 8080, weight: 1}
    - name: web
      port: 80
      filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Pick, value: again}]}}]
    - {name: web, port: 80, weight: 2, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Pick, value: web}], remove: [X-Drop]}}, {type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: X-Served-By, value: web}]}}]}
  - matches: [{path: {value: /plain}}]
    backendRefs: [{name: web, port: 80}, {name: api, port: 8080}]
",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    assert_eq!(
        conds(&route_parent(&dag, "shop", "store").conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
    let routes = &dag.vhosts["shop.example.com"].routes;
    let split = routes
        .iter()
        .find(|r| r.path.to_string().contains("/split"));
    let split = split.expect("the /split rule's route");
    // The two backendRefs of web with the same filters are one backend of their summed weight;
    // the one with other filters stays apart.
    let to = forwards_to(split);
    assert_eq!(to.len(), 3, "{to:?}");
    assert!(
        to[0].starts_with("shop/web/") && to[0].ends_with("*5"),
        "{to:?}"
    );
    assert!(
        to[1].starts_with("shop/api/") && to[1].ends_with("*1"),
        "{to:?}"
    );
    assert!(
        to[2].starts_with("shop/web/") && to[2].ends_with("*1"),
        "{to:?}"
    );
    let web = split.backend_edits(0).expect("web's header changes");
    assert_eq!(web.request.set, [("x-pick".to_string(), "web".to_string())]);
    assert_eq!(web.request.remove, ["x-drop"]);
    assert_eq!(
        web.response.add,
        [("x-served-by".to_string(), "web".to_string())]
    );
    assert!(split.backend_edits(1).is_none());
    let again = split
        .backend_edits(2)
        .expect("the second web's header changes");
    assert_eq!(
        again.request.set,
        [("x-pick".to_string(), "again".to_string())]
    );
    // A rule without backendRef filters carries none.
    let plain = routes
        .iter()
        .find(|r| r.path.to_string().contains("/plain"));
    let plain = plain.expect("the /plain rule's route");
    assert!(plain.extras.is_none(), "{plain:?}");
}

#[test]
fn a_grpc_routes_backend_has_the_header_changes_of_its_filters_and_no_other_filter() {
    let with = |filters: &str| {
        grpc_route(&format!(
            "  - backendRefs:
    - {{name: api, port: 8080, filters: [{filters}]}}
    - {{name: web, port: 80}}
"
        ))
    };
    let grpc =
        with("{type: ResponseHeaderModifier, responseHeaderModifier: {remove: [X-Internal]}}");
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &grpc]);
    let route = &dag.vhosts["grpc.example.com"].routes[0];
    let api = route.backend_edits(0).expect("api's header changes");
    assert_eq!(api.response.remove, ["x-internal"]);
    assert!(api.request.is_empty() && route.backend_edits(1).is_none());

    let mirrored =
        with("{type: RequestMirror, requestMirror: {backendRef: {name: web, port: 80}}}");
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &mirrored]);
    assert!(
        dag.vhosts.is_empty(),
        "no rule of a refused route is served"
    );
    let p = route_parent_of(&dag, Kind::GrpcRoute, "shop", "cart");
    assert_eq!(conds(&p.conditions)[0], "Accepted=false/UnsupportedValue");
    assert!(
        (p.conditions[0].message).contains(&format!(
            "spec.rules[0].backendRefs[0].filters[0].type: {}",
            crate::dag::gwroute::BACKEND_FILTERS_ROUTED
        )),
        "{:?}",
        p.conditions[0]
    );
}
