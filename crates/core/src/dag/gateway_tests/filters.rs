//! HTTPRoute filters on a rule's routes: header modifiers, redirects and URL rewrites.

use super::*;

#[test]
fn header_filters_and_redirects_become_part_of_the_routes() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /old}}]\n    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, port: 8443, path: {type: ReplaceFullPath, replaceFullPath: /new}}}]\n    backendRefs: [{name: gone, port: 80}]\n  - filters:\n    - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-A, value: a}], add: [{name: x-b, value: b}], remove: [X-C]}}\n    - {type: ResponseHeaderModifier, responseHeaderModifier: {remove: [server]}}\n    backendRefs: [{name: web, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let routes = &dag.vhosts["shop.example.com"].routes;
    assert_eq!(routes.len(), 2);
    let RouteAction::Redirect(redirect) = &routes[0].action else {
        panic!("{:?}", routes[0]);
    };
    assert_eq!(
        **redirect,
        Redirect {
            scheme: Some("https".into()),
            hostname: None,
            port: Some(8443),
            path: Some("/new".into()),
            prefix: None,
            status: 302,
        }
    );
    let edits = routes[1].headers_edit().expect("header edits");
    assert_eq!(edits.request.set, [("x-a".to_string(), "a".to_string())]);
    assert_eq!(edits.request.add, [("x-b".to_string(), "b".to_string())]);
    assert_eq!(edits.request.remove, ["x-c"]);
    assert_eq!(edits.response.remove, ["server"]);
    // A redirect's backends take no requests, so a missing one is no problem.
    assert_eq!(
        conds(&route_parent(&dag, "shop", "store").conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
    assert!(crate::dag::table::backends(&routes[0])[0].starts_with("302 to https://"));
}

#[test]
fn a_redirect_replaces_the_matched_prefix_of_a_path_prefix_match_only() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /old}}]\n    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 301, path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}}]\n  - matches: [{path: {value: /root}}]\n    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch}}}]\n  - backendRefs: [{name: web, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let redirect_of = |path: &str| match &shop_route(&dag, path).action {
        RouteAction::Redirect(redirect) => (**redirect).clone(),
        other => panic!("{path}: {other:?}"),
    };
    assert_eq!(
        redirect_of("/old"),
        Redirect {
            scheme: None,
            hostname: None,
            port: None,
            path: None,
            prefix: Some("/new".into()),
            status: 301,
        }
    );
    // No value: the prefix goes, leaving the rest of the path.
    assert_eq!(redirect_of("/root").prefix.as_deref(), Some("/"));
    assert_eq!(
        conds(&route_parent(&dag, "shop", "store").conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );

    refused_beside_an_exact_match(&r, "/old", "spec.rules[0].filters[0].requestRedirect");
}

#[test]
fn a_url_rewrite_sets_the_host_and_the_whole_path_or_the_matched_prefix() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - filters: [{type: URLRewrite, urlRewrite: {hostname: internal.example.com, path: {type: ReplaceFullPath, replaceFullPath: /v2}}}]\n    backendRefs: [{name: web, port: 80}]\n  - matches: [{path: {value: /p}}]\n    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /q}}}]\n    backendRefs: [{name: web, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let rewrite_of = |path: &str| shop_route(&dag, path).rewrite().cloned();
    assert_eq!(
        rewrite_of("/"),
        Some(Rewrite {
            hostname: Some("internal.example.com".into()),
            path: Some("/v2".into()),
            prefix: None,
        })
    );
    assert_eq!(
        rewrite_of("/p"),
        Some(Rewrite {
            prefix: Some("/q".into()),
            ..Rewrite::default()
        })
    );

    refused_beside_an_exact_match(&r, "/p", "spec.rules[1].filters[0].urlRewrite");
}
