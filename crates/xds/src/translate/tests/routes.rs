//! Envoy routes from the model's routes: path specifiers, header and query parameter matchers,
//! weights, timeouts and retries, mirrors, CORS policies, and the virtual host bytes written directly rather
//! than by prost.

use super::*;

#[test]
fn path_matches_map_to_envoy_path_specifiers() {
    let dag = mk_dag(
        vec![mk_vhost(
            "a.com",
            vec![
                mk_route(PathMatch::Exact("/foo".into()), "app"),
                mk_route(PathMatch::prefix("/aaa/bbb/"), "app"),
                mk_route(PathMatch::StringPrefix("/str//x".into()), "app"),
                mk_route(PathMatch::Regex("/r/[a-z]+".into()), "app"),
                mk_route(PathMatch::prefix("/"), "app"),
            ],
        )],
        vec![mk_cluster("app", 9000)],
    );
    let res = build(&dag, &Options::default());
    let paths: Vec<PathSpecifier> = vhost_routes(http_rc(&res), "a.com")
        .iter()
        .map(path_of)
        .collect();
    assert_eq!(
        paths,
        vec![
            PathSpecifier::Path("/foo".into()),
            PathSpecifier::PathSeparatedPrefix("/aaa/bbb".into()),
            PathSpecifier::Prefix("/str/x".into()),
            PathSpecifier::SafeRegex(envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher {
                regex: "/r/[a-z]+".into(),
                ..Default::default()
            }),
            PathSpecifier::Prefix("/".into()),
        ]
    );
}

#[test]
fn header_conditions_map_to_matchers() {
    let mut r = mk_route(PathMatch::prefix("/"), "app");
    r.headers = vec![
        HeaderMatch {
            name: "x-a".into(),
            op: HeaderOp::Exact("100%".into()),
        },
        HeaderMatch {
            name: "x-b".into(),
            op: HeaderOp::Contains("c".into()),
        },
        HeaderMatch {
            name: "x-c".into(),
            op: HeaderOp::NotContains("d".into()),
        },
        HeaderMatch {
            name: "x-d".into(),
            op: HeaderOp::Present,
        },
        HeaderMatch {
            name: "x-e".into(),
            op: HeaderOp::Absent,
        },
        HeaderMatch {
            name: "x-f".into(),
            op: HeaderOp::Regex("v[0-9]+".into()),
        },
    ];
    let got: Vec<String> = r
        .headers
        .iter()
        .map(|h| {
            let m = route::build_header_matcher(h);
            let spec = match &m.header_match_specifier {
                Some(HeaderMatchSpecifier::StringMatch(s)) => format!("{:?}", s.match_pattern),
                other => format!("{other:?}"),
            };
            format!(
                "{} {spec} invert={} missing_empty={}",
                m.name, m.invert_match, m.treat_missing_header_as_empty
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            r#"x-a Some(Exact("100%")) invert=false missing_empty=false"#,
            r#"x-b Some(Contains("c")) invert=false missing_empty=false"#,
            r#"x-c Some(Contains("d")) invert=true missing_empty=true"#,
            r#"x-d Some(PresentMatch(true)) invert=false missing_empty=false"#,
            r#"x-e Some(PresentMatch(true)) invert=true missing_empty=false"#,
            r#"x-f Some(SafeRegex(RegexMatcher { regex: "v[0-9]+", engine_type: None })) invert=false missing_empty=false"#,
        ]
    );
}

#[test]
fn weights_timeouts_retries_and_unavailable() {
    let mut split = mk_route(PathMatch::prefix("/split"), "a");
    split.action = forward(&[("a", 80), ("b", 20), ("c", 0)]);
    split.timeout = Some(Timeout::Infinite);
    split.retry = Some(RetryPolicy {
        count: 3,
        per_try_timeout: Some(Duration::from_millis(250)),
        ..RetryPolicy::new(0, None)
    });
    let mut one = mk_route(PathMatch::prefix("/one"), "a");
    one.action = forward(&[("a", 0), ("b", 5)]);
    one.timeout = Some(Timeout::After(Duration::from_secs(90)));
    let mut gone = mk_route(PathMatch::prefix("/gone"), "a");
    gone.action = RouteAction::Unavailable("Service \"x\" not found".into());
    let dag = mk_dag(
        vec![mk_vhost("h", vec![split, one, gone])],
        vec![mk_cluster("a", 1), mk_cluster("b", 2), mk_cluster("c", 3)],
    );
    let res = build(&dag, &Options::default());
    let routes = vhost_routes(http_rc(&res), "h");
    let Some(Action::Route(a)) = &routes[0].action else {
        panic!("route action")
    };
    let Some(ClusterSpecifier::WeightedClusters(w)) = &a.cluster_specifier else {
        panic!("weighted")
    };
    let ws: Vec<(String, u32)> = w
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.weight.unwrap().value))
        .collect();
    assert_eq!(ws, vec![("a".to_string(), 80), ("b".to_string(), 20)]);
    assert_eq!(a.timeout.map(|d| (d.seconds, d.nanos)), Some((0, 0)));
    let retry = a.retry_policy.as_ref().unwrap();
    assert_eq!(retry.retry_on, "5xx,connect-failure,reset");
    assert_eq!(retry.num_retries.unwrap().value, 3);
    assert_eq!(retry.per_try_timeout.map(|d| d.nanos), Some(250_000_000));
    assert_eq!(cluster_of(&routes[1]), "b");
    let Some(Action::Route(a1)) = &routes[1].action else {
        panic!()
    };
    assert_eq!(a1.timeout.map(|d| d.seconds), Some(90));
    match &routes[2].action {
        Some(Action::DirectResponse(d)) => assert_eq!(d.status, 503),
        other => panic!("not 503: {other:?}"),
    }
}

#[test]
fn a_backends_header_changes_are_its_weighted_clusters() {
    use envoy_types::pb::envoy::config::core::v3::{
        HeaderValueOption, header_value_option::HeaderAppendAction,
    };
    use sluice_core::dag::{HeaderEdit, HeaderEdits};
    let edits = |name: &str| HeaderEdits {
        request: HeaderEdit {
            set: vec![("x-pick".into(), name.into())],
            remove: vec!["x-drop".into()],
            ..Default::default()
        },
        response: HeaderEdit {
            add: vec![("x-served-by".into(), format!("{name} 100%"))],
            remove: vec!["x-internal".into()],
            ..Default::default()
        },
    };
    // Two backends, the second with changes and a third of no weight between them; one backend
    // with changes (a weighted cluster of one, where a cluster alone could carry none).
    let mut split = mk_route(PathMatch::prefix("/split"), "a");
    split.action = forward(&[("a", 1), ("c", 0), ("b", 3)]);
    split.extras_mut().backend_edits = vec![None, Some(edits("c")), Some(edits("b"))];
    let mut one = mk_route(PathMatch::prefix("/one"), "a");
    one.extras_mut().backend_edits = vec![Some(edits("a"))];
    let dag = mk_dag(
        vec![mk_vhost("h", vec![split, one])],
        vec![mk_cluster("a", 1), mk_cluster("b", 2), mk_cluster("c", 3)],
    );
    let res = build(&dag, &Options::default());
    let routes = vhost_routes(http_rc(&res), "h");
    let weighted = |k: usize| {
        let Some(Action::Route(a)) = &routes[k].action else {
            panic!("route action")
        };
        let Some(ClusterSpecifier::WeightedClusters(w)) = &a.cluster_specifier else {
            panic!("weighted clusters: {a:?}")
        };
        w.clusters.clone()
    };
    let header = |o: &HeaderValueOption| {
        let h = o.header.as_ref().unwrap();
        (h.key.clone(), h.value.clone(), o.append_action)
    };
    let split = weighted(0);
    assert_eq!(split.len(), 2, "{split:?}");
    assert_eq!(
        (split[0].name.as_str(), split[0].weight.unwrap().value),
        ("a", 1)
    );
    assert!(
        split[0].request_headers_to_add.is_empty() && split[0].response_headers_to_add.is_empty()
    );
    let b = &split[1];
    assert_eq!((b.name.as_str(), b.weight.unwrap().value), ("b", 3));
    let overwrite = HeaderAppendAction::OverwriteIfExistsOrAdd as i32;
    let append = HeaderAppendAction::AppendIfExistsOrAdd as i32;
    assert_eq!(
        b.request_headers_to_add
            .iter()
            .map(header)
            .collect::<Vec<_>>(),
        [("x-pick".to_string(), "b".to_string(), overwrite)]
    );
    assert_eq!(b.request_headers_to_remove, ["x-drop"]);
    assert_eq!(
        b.response_headers_to_add
            .iter()
            .map(header)
            .collect::<Vec<_>>(),
        [("x-served-by".to_string(), "b 100%%".to_string(), append)]
    );
    assert_eq!(b.response_headers_to_remove, ["x-internal"]);
    let one = weighted(1);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].name, "a");
    assert_eq!(one[0].request_headers_to_remove, ["x-drop"]);
}

/// A mirror of every request and one of an eighth of them.
fn mirrors() -> Vec<sluice_core::dag::Mirror> {
    vec![
        sluice_core::dag::Mirror {
            cluster: "all".into(),
            per_million: 1_000_000,
        },
        sluice_core::dag::Mirror {
            cluster: "some".into(),
            per_million: 125_000,
        },
    ]
}

#[test]
fn mirrors_map_to_request_mirror_policies() {
    let mut r = mk_route(PathMatch::prefix("/"), "app");
    r.extras_mut().mirrors = mirrors();
    let dag = mk_dag(
        vec![mk_vhost("a.com", vec![r])],
        vec![mk_cluster("app", 9000)],
    );
    let res = build(&dag, &Options::default());
    let Some(Action::Route(action)) = &vhost_routes(http_rc(&res), "a.com")[0].action else {
        panic!("a route action");
    };
    let got: Vec<(String, Option<(u32, i32)>)> = (action.request_mirror_policies.iter())
        .map(|p| {
            let share = (p.runtime_fraction.as_ref())
                .and_then(|f| f.default_value.as_ref())
                .map(|v| (v.numerator, v.denominator));
            assert!(!p.disable_shadow_host_suffix_append);
            (p.cluster.clone(), share)
        })
        .collect();
    // Every request: no fraction; an eighth: 125,000 of a million (denominator MILLION, 2).
    assert_eq!(
        got,
        [
            ("all".to_string(), None),
            ("some".to_string(), Some((125_000, 2)))
        ]
    );
}

#[test]
fn a_cors_policy_is_the_routes_configuration_of_envoys_cors_filter() {
    use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
    use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
    use prost::Message;
    let mut r = mk_route(PathMatch::prefix("/"), "app");
    r.extras_mut().cors = Some(sluice_core::dag::Cors {
        allow_origins: vec![
            "https://app.example.com".into(),
            "https://*.example.org:8443".into(),
            "*".into(),
        ],
        allow_methods: vec!["GET".into(), "PUT".into()],
        allow_headers: vec!["x-token".into()],
        expose_headers: vec!["x-trace".into(), "x-id".into()],
        max_age: 5,
        allow_credentials: true,
    });
    let plain = mk_route(PathMatch::prefix("/plain"), "app");
    let dag = mk_dag(
        vec![mk_vhost("a.com", vec![plain, r])],
        vec![mk_cluster("app", 9000)],
    );
    let res = build(&dag, &Options::default());
    let routes = vhost_routes(http_rc(&res), "a.com");
    assert!(routes[0].typed_per_filter_config.is_empty());
    let config = &routes[1].typed_per_filter_config["envoy.filters.http.cors"];
    assert_eq!(
        config.type_url,
        "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy"
    );
    let policy = CorsPolicy::decode(config.value.as_slice()).expect("a CorsPolicy");
    let origins: Vec<(Option<MatchPattern>, bool)> = (policy.allow_origin_string_match.iter())
        .map(|m| (m.match_pattern.clone(), m.ignore_case))
        .collect();
    let regex = |r: &str| {
        MatchPattern::SafeRegex(envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher {
            regex: r.into(),
            ..Default::default()
        })
    };
    assert_eq!(
        origins,
        [
            (
                Some(MatchPattern::Exact("https://app.example.com".into())),
                true
            ),
            (Some(regex(r"(?i)https://[^/:]+\.example\.org:8443")), false),
            (Some(regex(".*")), false),
        ]
    );
    assert_eq!(policy.allow_methods, "GET,PUT");
    assert_eq!(policy.allow_headers, "x-token");
    assert_eq!(policy.expose_headers, "x-trace,x-id");
    assert_eq!(policy.max_age, "5");
    assert_eq!(policy.allow_credentials.map(|b| b.value), Some(true));
    // A preflight from an origin the policy does not allow is answered by Envoy, not forwarded.
    assert_eq!(
        policy.forward_not_matching_preflights.map(|b| b.value),
        Some(false)
    );
}

/// A query parameter condition of each kind.
fn query_conditions() -> Vec<QueryMatch> {
    vec![
        QueryMatch {
            name: "lang".into(),
            op: QueryOp::Regex("en|de".into()),
        },
        QueryMatch {
            name: "v".into(),
            op: QueryOp::Exact("2".into()),
        },
    ]
}

#[test]
fn query_conditions_map_to_query_parameter_matchers() {
    use envoy_types::pb::envoy::config::route::v3::query_parameter_matcher::QueryParameterMatchSpecifier;
    let mut r = mk_route(PathMatch::prefix("/"), "app");
    r.extras_mut().query = query_conditions();
    let dag = mk_dag(
        vec![mk_vhost("a.com", vec![r])],
        vec![mk_cluster("app", 9000)],
    );
    let res = build(&dag, &Options::default());
    let route = &vhost_routes(http_rc(&res), "a.com")[0];
    let got: Vec<String> = (route.r#match.as_ref().unwrap().query_parameters.iter())
        .map(|q| match &q.query_parameter_match_specifier {
            Some(QueryParameterMatchSpecifier::StringMatch(s)) => {
                assert!(!s.ignore_case);
                format!("{} {:?}", q.name, s.match_pattern)
            }
            other => format!("{} {other:?}", q.name),
        })
        .collect();
    assert_eq!(
        got,
        [
            r#"lang Some(SafeRegex(RegexMatcher { regex: "en|de", engine_type: None }))"#,
            r#"v Some(Exact("2"))"#,
        ]
    );
}

#[test]
fn virtual_host_bytes_are_prosts_encoding_of_the_virtual_host() {
    // Every route kind: plain, TLS (redirected unless insecure is permitted), headers, query
    // parameters, a regular expression path, mirrors and a CORS policy, weights,
    // none live, timeouts and retries, a wildcard host with the catch-all host's routes after its
    // own, a host name whose length takes two bytes, and the empty host name prost leaves out.
    let mut headers = mk_route(PathMatch::Exact("/exact".into()), "c1");
    headers.headers = vec![
        HeaderMatch {
            name: "x-a".into(),
            op: HeaderOp::Exact("1".into()),
        },
        HeaderMatch {
            name: "x-b".into(),
            op: HeaderOp::NotContains("no".into()),
        },
    ];
    let mut weighted = mk_route(PathMatch::prefix("/w"), "c1");
    weighted.action = forward(&[("c1", 3), ("c2", 0), ("c3", 1)]);
    let mut query = mk_route(PathMatch::prefix("/q"), "c1");
    query.extras_mut().query = query_conditions();
    let regex = mk_route(PathMatch::Regex("/r/[0-9]+".into()), "c2");
    let mut mirrored = mk_route(PathMatch::prefix("/m"), "c1");
    mirrored.extras_mut().mirrors = mirrors();
    mirrored.extras_mut().cors = Some(sluice_core::dag::Cors {
        allow_origins: vec!["https://*.example.com".into()],
        max_age: 5,
        ..Default::default()
    });
    let mut none_live = mk_route(PathMatch::StringPrefix("/a//b".into()), "c1");
    none_live.action = RouteAction::Forward(smallvec::smallvec![WeightedCluster {
        cluster: "c1".into(),
        weight: 0,
    }]);
    let mut unavailable = mk_route(PathMatch::prefix("/gone"), "c1");
    unavailable.action = RouteAction::Unavailable("Service not found".into());
    let mut slow = mk_route(PathMatch::prefix("/slow"), "c2");
    slow.timeout = Some(Timeout::After(Duration::from_secs(9)));
    slow.retry = Some(RetryPolicy {
        count: 2,
        per_try_timeout: Some(Duration::from_millis(250)),
        ..RetryPolicy::new(0, None)
    });
    slow.permit_insecure = true;
    // Written directly rather than by prost (`put_plain_route`): one live cluster of several,
    // an exact path, a string prefix, names and paths whose lengths take two bytes, an empty
    // cluster name, and insecure routes of a TLS host.
    let mut one_live = mk_route(PathMatch::prefix("/one"), "c1");
    one_live.action = forward(&[("c0", 0), ("c9", 7)]);
    let mut insecure = mk_route(PathMatch::Exact("/insecure".into()), "c2");
    insecure.permit_insecure = true;
    let long = format!("/{}", "p".repeat(300));
    let routes = vec![
        headers,
        query,
        regex,
        mirrored,
        weighted,
        none_live,
        unavailable,
        slow,
        one_live,
        insecure,
        mk_route(PathMatch::Exact("/exact/only".into()), "c2"),
        mk_route(PathMatch::StringPrefix("/str".into()), "c3"),
        mk_route(PathMatch::prefix(&long), &"n".repeat(130)),
        mk_route(PathMatch::Exact(long.as_str().into()), ""),
        mk_route(PathMatch::prefix("/"), "c1"),
    ];
    let mut tls = mk_vhost("tls.example.com", routes.clone());
    tls.tls = Some(VhostTls {
        secret: "default/cert".into(),
        min_version: TlsVersion::V1_2,
    });
    let fallback = mk_vhost("*", routes.clone());
    let vhosts = [
        mk_vhost("plain.example.com", routes.clone()),
        tls,
        mk_vhost("*.example.com", routes.clone()),
        fallback.clone(),
        mk_vhost(&format!("{}.example.com", "l".repeat(200)), routes.clone()),
        mk_vhost("", routes),
        mk_vhost("empty.example.com", vec![]),
    ];
    for v in &vhosts {
        for fb in [None, Some(&fallback)] {
            let want = route::build_http_vhost(v, fb);
            let got = route::encode_http_vhost(v, fb);
            assert_eq!(got, want.encode_to_vec(), "{}", v.host);
            assert_eq!(
                envoy_types::pb::envoy::config::route::v3::VirtualHost::decode(&got[..]).unwrap(),
                want
            );
        }
        // The same routes in a TLS host's own route configuration (none redirected there).
        let want = route::build_https_route_config(v);
        let (name, got) = route::encode_https_route_config(v);
        assert_eq!(name, want.name);
        assert_eq!(got, want.encode_to_vec(), "https/{}", v.host);
    }
}
