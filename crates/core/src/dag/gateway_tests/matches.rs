//! HTTPRoute matches beyond paths by prefix and exact path: query parameters (the first value
//! of a name, ahead of the same path without them, told apart from it in conflicts) and
//! regular expression paths (the whole path, between exact paths and prefixes).

use super::*;
use crate::dag::lookup::{Request, lookup};

/// The backends of the route the request `path` (with its query) on `shop.example.com` takes.
fn taken_by(dag: &Dag, path: &str) -> Vec<String> {
    taken_on(dag, "shop.example.com", path)
}

/// The backends of the route the request `path` (with its query) on `host` takes.
fn taken_on(dag: &Dag, host: &str, path: &str) -> Vec<String> {
    let request = Request {
        host,
        path,
        headers: &[],
    };
    let (_, route) = lookup(dag, &request).unwrap_or_else(|| panic!("{path} finds no route"));
    forwards_to(route)
}

const RULES: &str = "  - matches: [{queryParams: [{name: v, value: \"2\"}]}]
    backendRefs: [{name: api, port: 8080}]
  - backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: Exact, value: /x}, queryParams: [{name: v, type: RegularExpression, value: \"[34]\"}, {name: lang, value: en}, {name: v, value: \"9\"}]}]
    backendRefs: [{name: api, port: 8080}]
";

#[test]
fn query_parameter_matches_take_the_requests_whose_first_value_meets_them() {
    let r = route("shop", "store", &["shop.example.com"], RULES);
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    assert_eq!(
        status(&dag, Kind::HttpRoute, "shop", "store").state,
        State::Valid
    );

    let routes = &dag.vhosts["shop.example.com"].routes;
    let got: Vec<(String, Vec<String>)> = routes
        .iter()
        .map(|r| {
            let q = r.query().iter().map(ToString::to_string).collect();
            (r.path.to_string(), q)
        })
        .collect();
    // Of two entries naming `v`, the first counts; the conditions are kept in name order; the
    // catch-all path with a condition comes before the one without.
    let want = [
        ("exact /x", vec!["?lang=\"en\"", "?v=~/[34]/"]),
        ("prefix /", vec!["?v=\"2\""]),
        ("prefix /", vec![]),
    ];
    let want: Vec<(String, Vec<String>)> = (want.iter())
        .map(|(p, q)| (p.to_string(), q.iter().map(ToString::to_string).collect()))
        .collect();
    assert_eq!(got, want);

    let api = vec!["shop/api/8080*1".to_string()];
    let web = vec!["shop/web/80*1".to_string()];
    assert_eq!(
        forwards_to(&routes[1]),
        api,
        "cluster names as the model writes them"
    );
    for (path, to) in [
        ("/?v=2", &api),
        ("/a/b?x=1&v=2", &api),
        ("/?v=2&v=3", &api),
        ("/?v=3&v=2", &web),
        ("/?v=20", &web),
        ("/?V=2", &web),
        ("/?v=%32", &web),
        ("/", &web),
        ("/x?lang=en&v=4", &api),
        ("/x?v=3&lang=en", &api),
        ("/x?lang=en&v=34", &web),
        ("/x?v=4", &web),
        ("/x?lang=en&v=9", &web),
    ] {
        assert_eq!(&taken_by(&dag, path), to, "{path}");
    }
}

#[test]
fn a_query_parameter_condition_makes_a_match_of_its_own_and_is_named_in_conflicts() {
    let dag = old_and_new(
        RULES,
        "  - matches: [{queryParams: [{name: v, value: \"2\"}]}]\n    backendRefs: [{name: web, port: 80}]\n  - matches: [{queryParams: [{name: v, value: \"5\"}]}]\n    backendRefs: [{name: web, port: 80}]\n",
    );
    let p = route_parent(&dag, "shop", "new");
    let m = &p.conditions[0].message;
    assert!(
        m.contains("path \"/\" (PathPrefix) with 1 query parameter condition on host \"shop.example.com\" is already defined by HTTPRoute shop/old"),
        "{m}"
    );
    let sources: Vec<(String, String)> = (dag.vhosts["shop.example.com"].routes.iter())
        .map(|r| {
            (
                r.query().iter().map(ToString::to_string).collect(),
                r.source.to_string(),
            )
        })
        .collect();
    assert!(
        sources.contains(&("?v=\"5\"".into(), "HTTPRoute shop/new".into())),
        "a match with a condition of its own is routed beside the old route's: {sources:?}"
    );
}

#[test]
fn a_regular_expression_path_takes_whole_paths_between_exact_paths_and_prefixes() {
    let rules = "  - matches: [{path: {type: PathPrefix, value: /items/long/prefix}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: RegularExpression, value: \"/items/[0-9]+\"}}, {path: {type: RegularExpression, value: \"/i.*\"}, headers: [{name: x-any, value: \"yes\"}]}]
    backendRefs: [{name: api, port: 8080}]
  - matches: [{path: {type: Exact, value: /items/7}}]
    backendRefs: [{name: web, port: 80}]
  - backendRefs: [{name: web, port: 80}]
";
    let r = route("shop", "store", &["shop.example.com"], rules);
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    assert_eq!(
        status(&dag, Kind::HttpRoute, "shop", "store").state,
        State::Valid
    );
    let paths: Vec<String> = (dag.vhosts["shop.example.com"].routes.iter())
        .map(|r| r.path.to_string())
        .collect();
    // Exact first, then expressions (the longer first), then prefixes (the longer first).
    assert_eq!(
        paths,
        [
            "exact /items/7",
            "regex /items/[0-9]+",
            "regex /i.*",
            "prefix /items/long/prefix",
            "prefix /",
        ]
    );
    let api = vec!["shop/api/8080*1".to_string()];
    let web = vec!["shop/web/80*1".to_string()];
    for (path, to) in [
        ("/items/12", &api),
        ("/items/12?q=1", &api),
        ("/items//12", &api),
        ("/items/7", &web),
        ("/items/12/x", &web),
        ("/items/x", &web),
        ("/items/long/prefix/9", &web),
    ] {
        assert_eq!(&taken_by(&dag, path), to, "{path}");
    }
}

#[test]
fn a_grpc_regular_expression_method_match_takes_whole_paths() {
    let grpc = grpc_route(
        "  - matches: [{method: {type: RegularExpression, service: \"shop\\\\.(Cart|Bag)\", method: \"Get.*\"}}]
    backendRefs: [{name: api, port: 8080}]
  - matches: [{method: {type: RegularExpression, method: Ping}}]
    backendRefs: [{name: api, port: 8080}]
  - backendRefs: [{name: web, port: 80}]
",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &grpc]);
    let p = route_parent_of(&dag, Kind::GrpcRoute, "shop", "cart");
    assert_eq!(conds(&p.conditions)[0], "Accepted=true/Accepted");
    let paths: Vec<String> = (dag.vhosts["grpc.example.com"].routes.iter())
        .map(|r| r.path.to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "regex /(?:shop\\.(Cart|Bag))/(?:Get.*)",
            "regex /(?:[^/]+)/(?:Ping)",
            "prefix /"
        ]
    );
    let takes = |path: &str| taken_on(&dag, "grpc.example.com", path);
    // The h2c cluster of Service shop/api, port 8080, the first two rules'.
    let api = forwards_to(&dag.vhosts["grpc.example.com"].routes[0]);
    assert!(api[0].starts_with("shop/api/8080"), "{api:?}");
    for (path, to_api) in [
        ("/shop.Bag/GetAll", true),
        ("/shop.Cart/Get", true),
        ("/shop.Cart/Put", false),
        ("/shopXCart/Get", false),
        ("/any.Service/Ping", true),
        ("/any.Service/Ping/x", false),
    ] {
        assert_eq!(takes(path) == api, to_api, "{path}: {:?}", takes(path));
    }
}

#[test]
fn a_tie_between_rules_goes_to_the_earlier_rule_whatever_the_headers_say() {
    // Gateway API precedence: as many header matches, so the first rule in list order wins.
    let rules = "  - matches: [{headers: [{name: version, value: two}]}]
    backendRefs: [{name: api, port: 8080}]
  - matches: [{headers: [{name: color, value: blue}]}]
    backendRefs: [{name: web, port: 80}]
";
    let r = route("shop", "store", &["shop.example.com"], rules);
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let v = &dag.vhosts["shop.example.com"];
    let first: Vec<&str> = v.routes[0]
        .headers
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(first, ["version"], "{:?}", v.routes);
    assert_eq!(forwards_to(&v.routes[0]), ["shop/api/8080*1"]);
}
