use super::*;
use crate::api::{HealthCheck, LbStrategy};
use crate::dag::hosts::INDEX_ROUTES_FROM;
use crate::store::{SliceEndpoints, slice_endpoints};

#[test]
fn weights() {
    assert_eq!(effective_weights(&[None, None]), vec![1, 1]);
    assert_eq!(effective_weights(&[Some(80), None]), vec![80, 0]);
    assert_eq!(effective_weights(&[Some(0), Some(0)]), vec![1, 1]);
    assert_eq!(effective_weights(&[Some(50), Some(50)]), vec![50, 50]);
}

#[test]
fn clusters_of_a_service_are_found_by_name_prefix() {
    let cluster = |name: &str, ns: &str, svc: &str| {
        let c = Cluster {
            name: name.into(),
            service: ServiceSpan::new(ns, svc),
            port: 80,
            protocol: UpstreamProtocol::Http,
            lb: LbStrategy::RoundRobin,
            health_check: None,
            outlier_detection: None,
            upstream_tls: None,
            endpoints: Default::default(),
        };
        (ClusterName::from(name), Arc::new(c))
    };
    let clusters: crate::dag::Map<ClusterName, Arc<Cluster>> = [
        cluster("ns/web/80", "ns", "web"),
        cluster("ns/web/80/0a1b2c3d4e", "ns", "web"),
        cluster("ns/web/8080", "ns", "web"),
        cluster("ns/web-2/80", "ns", "web-2"),
        cluster("ns/webx/80", "ns", "webx"),
        cluster("ns/we/80", "ns", "we"),
        cluster("ns2/web/80", "ns2", "web"),
        cluster("n/s/web/80", "n", "s"),
    ]
    .into_iter()
    .collect();
    let names = |ns: &str, svc: &str| -> Vec<String> {
        let key = ObjKey::new(ns, svc);
        clusters_of_service(&clusters, &key)
            .map(|(n, _)| n.to_string())
            .collect()
    };
    assert_eq!(
        names("ns", "web"),
        ["ns/web/80", "ns/web/80/0a1b2c3d4e", "ns/web/8080"]
    );
    assert_eq!(names("ns", "we"), ["ns/we/80"]);
    assert_eq!(names("ns2", "web"), ["ns2/web/80"]);
    assert_eq!(names("n", "s"), ["n/s/web/80"]);
    assert!(names("ns", "w").is_empty());
    assert!(names("other", "web").is_empty());
}

/// A route with a path and two header conditions (in either order), from object `from`.
fn route(path: &str, header: usize, swapped: bool, from: usize) -> Route {
    let h = |name: &str, v: usize| HeaderMatch {
        name: name.to_string(),
        op: HeaderOp::Exact(v.to_string()),
    };
    let mut headers = vec![h("x-a", header), h("x-b", header % 2)];
    if swapped {
        headers.reverse();
    }
    Route {
        path: PathMatch::prefix(path),
        headers,
        action: RouteAction::Unavailable("none".into()),
        permit_insecure: false,
        timeout: None,
        retry: None,
        extras: None,
        source: ObjectRef::new(Kind::Ingress, "ns", format!("r{from}").as_str()),
    }
}

#[test]
fn a_route_with_the_match_of_an_earlier_one_is_refused_at_any_number_of_routes() {
    let snapshot = Snapshot::default();
    let options = Options::default();
    let mut b = Builder::new(&snapshot, &options);
    // Below and above the number of routes from which the matches are in a table; paths
    // repeat with other headers, which makes other matches.
    let n = 3 * INDEX_ROUTES_FROM;
    let path = |i: usize| format!("/p{}", i % 5);
    for i in 0..n {
        b.add_route("h", route(&path(i), i, false, i))
            .expect("a new match is added");
        for j in (0..=i).rev().step_by(3) {
            let refused = b
                .add_route("h", route(&path(j), j, j % 2 == 0, 1000 + j))
                .expect_err("the same match again");
            assert_eq!(
                refused.0,
                ObjectRef::new(Kind::Ingress, "ns", format!("r{j}").as_str())
            );
        }
    }
    assert_eq!(b.vhost("h").routes.len(), n);
}

#[test]
fn health_check_defaults() {
    let p = health_check_policy(&HealthCheck {
        path: "/healthz".into(),
        ..Default::default()
    });
    assert_eq!(p.interval.as_secs(), 5);
    assert_eq!(p.timeout.as_secs(), 2);
    assert_eq!(p.unhealthy_threshold, 3);
    assert_eq!(p.healthy_threshold, 2);
    // Seed 000: "If left empty (default value), the name "contour-envoy-healthcheck" will be used."
    assert_eq!(p.host, "contour-envoy-healthcheck");
    assert_eq!(p.host, DEFAULT_HEALTH_CHECK_HOST);
}

#[test]
fn a_cluster_of_one_slice_shares_its_addresses_and_several_slices_merge() {
    let slice = |port: (&str, Option<u16>), ready: &[&str]| SliceEndpoints {
        service: Some("web".into()),
        ports: Box::new([(port.0.into(), port.1)]),
        ready: ready.iter().map(|a| a.parse().unwrap()).collect(),
    };
    let ep = |a: &str, port: u16| Endpoint {
        address: a.parse().unwrap(),
        port,
    };
    let a = slice(("http", Some(8080)), &["10.0.0.1", "10.0.0.3"]);
    let b = slice(("http", Some(8080)), &["10.0.0.2", "10.0.0.3"]);
    let other_port = slice(("admin", Some(9000)), &["10.0.0.9"]);
    let no_number = slice(("http", None), &["10.0.0.8"]);

    // One slice with the port (the others lack it, or its number): the slice's own list.
    let one = slice_endpoints([&other_port, &a, &no_number], "http");
    match &one {
        Endpoints::Shared { addresses, port } => {
            assert!(Arc::ptr_eq(addresses, &a.ready));
            assert_eq!(*port, 8080);
        }
        Endpoints::Owned(_) => panic!("not shared: {one:?}"),
    }
    let want_one = vec![ep("10.0.0.1", 8080), ep("10.0.0.3", 8080)];
    assert_eq!(one.iter().collect::<Vec<_>>(), want_one);
    assert_eq!(one.len(), 2);
    // Equal to the same endpoints held any other way, and not to others.
    assert_eq!(one, Endpoints::from(want_one.clone()));
    assert_eq!(Endpoints::from(want_one), one);
    assert_ne!(one, slice_endpoints([&b], "http"));
    assert_ne!(
        one,
        Endpoints::Shared {
            addresses: a.ready.clone(),
            port: 8081
        }
    );
    // Several slices: merged in order, the address both hold once.
    let merged = slice_endpoints([&b, &a], "http");
    assert!(matches!(merged, Endpoints::Owned(_)), "{merged:?}");
    assert_eq!(
        merged.iter().collect::<Vec<_>>(),
        [
            ep("10.0.0.1", 8080),
            ep("10.0.0.2", 8080),
            ep("10.0.0.3", 8080)
        ]
    );
    // None with the port: no endpoints, equal to an empty list however held.
    let none = slice_endpoints([&other_port, &no_number], "http");
    assert!(none.is_empty());
    assert_eq!(none, Endpoints::default());
    assert_eq!(
        Endpoints::Shared {
            addresses: Arc::new([]),
            port: 1
        },
        none
    );
    // Printed and serialized as the list of endpoints.
    assert_eq!(
        serde_json::to_string(&one).unwrap(),
        serde_json::to_string(&[ep("10.0.0.1", 8080), ep("10.0.0.3", 8080)]).unwrap()
    );
    assert_eq!(
        format!("{one:?}"),
        format!("{:?}", one.iter().collect::<Vec<_>>())
    );
}
