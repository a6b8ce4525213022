//! ListenerSets (GEP-1713): listeners attached to a Gateway of sluice's from other objects, as
//! the Gateway's `spec.allowedListeners` allows; their conflicts with the Gateway's listeners
//! and with each other; routes attached through a parentRef of kind ListenerSet; statuses.

use super::*;

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";

/// A Gateway `shop/edge` of sluice's class with an HTTP listener `gw` on port 80 for
/// `gw.example.com`, taking routes of every namespace, and `allowed` as its
/// `spec.allowedListeners` (a YAML flow mapping; empty: none).
fn edge(allowed: &str) -> String {
    let allowed = match allowed {
        "" => String::new(),
        a => format!("  allowedListeners: {a}\n"),
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: shop, generation: 2, creationTimestamp: {T0:?}}}
spec:
  gatewayClassName: sluice
{allowed}  listeners:
  - {{name: gw, protocol: HTTP, port: 80, hostname: gw.example.com, allowedRoutes: {{namespaces: {{from: All}}}}}}
"
    )
}

const FROM_ALL: &str = "{namespaces: {from: All}}";
const FROM_SAME: &str = "{namespaces: {from: Same}}";

/// A ListenerSet `ns/name` created at `created`, on Gateway `shop/edge`, with a `listeners`
/// block.
fn set(ns: &str, name: &str, created: &str, listeners: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: {name}, namespace: {ns}, generation: 5, creationTimestamp: {created:?}}}
spec:
  parentRef: {{name: edge, namespace: shop, kind: Gateway, group: gateway.networking.k8s.io}}
  listeners:
{listeners}"
    )
}

/// An HTTP listener `name` on port 80 for `host`, taking routes of every namespace.
fn http(name: &str, host: &str) -> String {
    format!(
        "  - {{name: {name}, protocol: HTTP, port: 80, hostname: {host}, allowedRoutes: {{namespaces: {{from: All}}}}}}\n"
    )
}

/// An HTTPRoute `ns/name` with `parents` (a YAML flow sequence) and one rule for `path` to
/// Service `shop/web`.
fn route_to(ns: &str, name: &str, parents: &str, path: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {ns}, generation: 7}}
spec:
  parentRefs: {parents}
  rules:
  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]
    backendRefs: [{{name: web, namespace: shop, port: 80}}]
"
    )
}

/// A parentRef to ListenerSet `ns/name`, with `section` as its sectionName when not empty.
fn to_set(ns: &str, name: &str, section: &str) -> String {
    let section = match section {
        "" => String::new(),
        s => format!(", sectionName: {s}"),
    };
    format!(
        "{{group: gateway.networking.k8s.io, kind: ListenerSet, namespace: {ns}, name: {name}{section}}}"
    )
}

/// Lets HTTPRoutes of every namespace use Services of `shop`.
const GRANT_SERVICES: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: services, namespace: shop}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team}, {group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: other}]
  to: [{group: \"\", kind: Service}]
";

const NAMESPACES: &str = "apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {listeners: allowed}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
";

fn gateway_api_status(dag: &Dag, kind: Kind, ns: &str, name: &str) -> GatewayApiStatus {
    let s = status(dag, kind, ns, name);
    let g = s.gateway.as_ref();
    g.unwrap_or_else(|| panic!("no Gateway API status on {kind:?} {ns}/{name}: {s:?}"))
        .as_ref()
        .clone()
}

fn set_status(dag: &Dag, ns: &str, name: &str) -> GatewayApiStatus {
    gateway_api_status(dag, Kind::ListenerSet, ns, name)
}

fn set_listener(dag: &Dag, ns: &str, name: &str, listener: &str) -> ListenerStatus {
    let s = set_status(dag, ns, name);
    let l = s.listeners.iter().find(|l| l.name == listener);
    l.unwrap_or_else(|| panic!("no listener {listener} in {s:?}"))
        .clone()
}

fn attached_sets(dag: &Dag) -> Option<u32> {
    gateway_api_status(dag, Kind::Gateway, "shop", "edge").attached_listener_sets
}

/// The parent entry of route `ns/name` for the parent named `parent`.
fn parent_named(dag: &Dag, ns: &str, name: &str, kind: Option<&str>) -> ParentStatus {
    let s = gateway_api_status(dag, Kind::HttpRoute, ns, name);
    let p = s.parents.iter().find(|p| p.kind == kind);
    p.unwrap_or_else(|| panic!("no parent of kind {kind:?}: {s:?}"))
        .clone()
}

/// The paths the host `host` routes (none when it is not served).
fn paths_of(dag: &Dag, host: &str) -> Vec<String> {
    let Some(v) = dag.vhosts.get(host) else {
        return Vec::new();
    };
    v.routes
        .iter()
        .map(|r| r.path.value().to_string())
        .collect()
}

#[test]
fn a_gateway_takes_no_listener_set_unless_its_allowed_listeners_say_so() {
    let ls = set("shop", "extra", T0, &http("extra", "extra.example.com"));
    for allowed in ["", "{namespaces: {from: None}}"] {
        let dag = dag_of(&[CLASS, &edge(allowed), SERVICES, &ls]);
        let s = set_status(&dag, "shop", "extra");
        assert_eq!(
            conds(&s.conditions),
            ["Accepted=false/NotAllowed", "Programmed=false/NotAllowed"],
            "{allowed}"
        );
        assert!(s.conditions[0].message.contains("takes no ListenerSets"));
        assert!(s.listeners.is_empty());
        let st = status(&dag, Kind::ListenerSet, "shop", "extra");
        assert_eq!((st.state, st.generation), (State::Invalid, Some(5)));
        // A Gateway that takes none and has none says nothing of them.
        assert_eq!(attached_sets(&dag), None);
        assert!(paths_of(&dag, "extra.example.com").is_empty());
    }
}

#[test]
fn allowed_listeners_from_same_all_and_selector_pick_the_namespaces() {
    let here = set("shop", "here", T0, &http("here", "here.example.com"));
    let team = set("team", "team", T0, &http("team", "team.example.com"));
    let other = set("other", "other", T0, &http("other", "other.example.com"));
    let cases = [
        ("{namespaces: {from: Same}}", [true, false, false]),
        ("{namespaces: {from: All}}", [true, true, true]),
        (
            "{namespaces: {from: Selector, selector: {matchLabels: {listeners: allowed}}}}",
            [false, true, false],
        ),
    ];
    for (allowed, expected) in cases {
        let dag = dag_of(&[
            CLASS,
            &edge(allowed),
            SERVICES,
            NAMESPACES,
            &here,
            &team,
            &other,
        ]);
        for ((ns, name), attached) in [("shop", "here"), ("team", "team"), ("other", "other")]
            .into_iter()
            .zip(expected)
        {
            let s = set_status(&dag, ns, name);
            let want = match attached {
                true => ["Accepted=true/Accepted", "Programmed=true/Programmed"],
                false => ["Accepted=false/NotAllowed", "Programmed=false/NotAllowed"],
            };
            assert_eq!(conds(&s.conditions), want, "{allowed} {ns}/{name}");
        }
        let count = expected.iter().filter(|a| **a).count() as u32;
        assert_eq!(attached_sets(&dag), Some(count), "{allowed}");
    }
}

#[test]
fn the_gateways_listeners_win_then_older_listener_sets_then_namespace_and_name() {
    let first = set(
        "shop",
        "b-first",
        T0,
        &[
            http("own", "one.example.com"),
            http("dup-of-gateway", "gw.example.com"),
            http("shared", "shared.example.com"),
            "  - {name: tcp-on-80, protocol: TCP, port: 80}\n".to_string(),
        ]
        .concat(),
    );
    // Created later: loses "shared" to b-first although its name sorts first.
    let later = set("shop", "a-later", T1, &http("shared", "shared.example.com"));
    // Created with b-first: the name decides, b-first before c-same-time.
    let same_time = set(
        "shop",
        "c-same-time",
        T0,
        &[
            http("shared-too", "shared.example.com"),
            http("mine", "mine.example.com"),
        ]
        .concat(),
    );
    let dag = dag_of(&[
        CLASS,
        &edge("{namespaces: {from: Same}}"),
        SERVICES,
        &first,
        &later,
        &same_time,
    ]);

    let conflicted = |reason: &str| {
        [
            format!("Accepted=false/{reason}"),
            format!("Programmed=false/{reason}"),
            format!("Conflicted=true/{reason}"),
            "ResolvedRefs=true/ResolvedRefs".to_string(),
        ]
    };
    let ok = [
        "Accepted=true/Accepted",
        "Programmed=true/Programmed",
        "ResolvedRefs=true/ResolvedRefs",
    ];
    let l = |set: &str, name: &str| conds(&set_listener(&dag, "shop", set, name).conditions);
    assert_eq!(l("b-first", "own"), ok);
    assert_eq!(l("b-first", "shared"), ok);
    assert_eq!(
        l("b-first", "dup-of-gateway"),
        conflicted("HostnameConflict")
    );
    assert_eq!(l("b-first", "tcp-on-80"), conflicted("ProtocolConflict"));
    let m = &set_listener(&dag, "shop", "b-first", "dup-of-gateway").conditions[0].message;
    assert!(m.contains("listener \"gw\" of Gateway shop/edge"), "{m}");
    assert_eq!(l("a-later", "shared"), conflicted("HostnameConflict"));
    assert_eq!(
        l("c-same-time", "shared-too"),
        conflicted("HostnameConflict")
    );
    assert_eq!(l("c-same-time", "mine"), ok);

    // Some listeners accepted: the set is; none: it is not.
    let s = |name: &str| conds(&set_status(&dag, "shop", name).conditions);
    assert_eq!(
        s("b-first"),
        [
            "Accepted=true/ListenersNotValid",
            "Programmed=true/Programmed"
        ]
    );
    assert_eq!(
        s("a-later"),
        [
            "Accepted=false/ListenersNotValid",
            "Programmed=false/ListenersNotValid"
        ]
    );
    assert_eq!(
        s("c-same-time"),
        [
            "Accepted=true/ListenersNotValid",
            "Programmed=true/Programmed"
        ]
    );
    assert_eq!(attached_sets(&dag), Some(2));
    // The Gateway's own listener and status are untouched.
    let gw = gateway_api_status(&dag, Kind::Gateway, "shop", "edge");
    assert_eq!(gw.listeners.len(), 1);
    assert_eq!(
        conds(&gw.conditions),
        ["Accepted=true/Accepted", "Programmed=true/Programmed"]
    );
    assert_eq!(conds(&gw.listeners[0].conditions), ok);
}

#[test]
fn routes_attach_to_a_listener_set_through_a_parent_ref_of_its_kind() {
    let ls = set(
        "shop",
        "extra",
        T0,
        &[
            http("one", "one.example.com"),
            http("two", "two.example.com"),
        ]
        .concat(),
    );
    let to_gateway = route_to("shop", "gw-only", "[{name: edge}]", "/gw");
    let to_set_only = route_to(
        "shop",
        "set-only",
        &format!("[{}]", to_set("shop", "extra", "")),
        "/set",
    );
    let to_section = route_to(
        "shop",
        "section",
        &format!("[{}]", to_set("shop", "extra", "one")),
        "/one-only",
    );
    // A Gateway parentRef does not reach the ListenerSet's listeners, even by their name.
    let wrong = route_to(
        "shop",
        "wrong",
        &format!(
            "[{{name: edge, sectionName: one}}, {}]",
            to_set("shop", "extra", "one")
        ),
        "/wrong",
    );
    let dag = dag_of(&[
        CLASS,
        &edge("{namespaces: {from: Same}}"),
        SERVICES,
        &ls,
        &to_gateway,
        &to_set_only,
        &to_section,
        &wrong,
    ]);

    assert_eq!(paths_of(&dag, "gw.example.com"), ["/gw"]);
    let mut one = paths_of(&dag, "one.example.com");
    one.sort();
    assert_eq!(one, ["/one-only", "/set", "/wrong"]);
    assert_eq!(paths_of(&dag, "two.example.com"), ["/set"]);

    let p = parent_named(&dag, "shop", "set-only", Some("ListenerSet"));
    assert_eq!((p.namespace.as_str(), p.name.as_str()), ("shop", "extra"));
    assert_eq!(conds(&p.conditions)[0], "Accepted=true/Accepted");
    let s = gateway_api_status(&dag, Kind::HttpRoute, "shop", "gw-only");
    assert_eq!(s.parents.len(), 1, "one entry per parentRef: {s:?}");
    assert_eq!(s.parents[0].kind, None);
    let p = parent_named(&dag, "shop", "wrong", None);
    assert_eq!(conds(&p.conditions)[0], "Accepted=false/NoMatchingParent");
    let p = parent_named(&dag, "shop", "wrong", Some("ListenerSet"));
    assert_eq!(conds(&p.conditions)[0], "Accepted=true/Accepted");

    assert_eq!(
        set_listener(&dag, "shop", "extra", "one").attached_routes,
        3
    );
    assert_eq!(
        set_listener(&dag, "shop", "extra", "two").attached_routes,
        1
    );
    let gw = gateway_api_status(&dag, Kind::Gateway, "shop", "edge");
    assert_eq!(gw.listeners[0].attached_routes, 1);
    assert_eq!(
        set_listener(&dag, "shop", "extra", "one").supported_kinds,
        ["HTTPRoute", "GRPCRoute"]
    );
}

#[test]
fn same_namespace_routes_of_a_listener_set_listener_are_the_sets_namespace() {
    let ls = set(
        "team",
        "extra",
        T0,
        &format!(
            "  - {{name: same, protocol: HTTP, port: 80, hostname: same.example.com, allowedRoutes: {FROM_SAME}}}\n  - {{name: all, protocol: HTTP, port: 80, hostname: all.example.com, allowedRoutes: {FROM_ALL}}}\n"
        ),
    );
    let parents = format!("[{}]", to_set("team", "extra", ""));
    let in_team = route_to("team", "in-team", &parents, "/team");
    let in_shop = route_to("shop", "in-shop", &parents, "/shop");
    let only_same = format!("[{}]", to_set("team", "extra", "same"));
    let refused = route_to("shop", "refused", &only_same, "/refused");
    let dag = dag_of(&[
        CLASS,
        &edge("{namespaces: {from: All}}"),
        SERVICES,
        NAMESPACES,
        GRANT_SERVICES,
        &ls,
        &in_team,
        &in_shop,
        &refused,
    ]);
    let p = parent_named(&dag, "shop", "refused", Some("ListenerSet"));
    assert_eq!(
        conds(&p.conditions)[0],
        "Accepted=false/NotAllowedByListeners"
    );
    let m = &p.conditions[0].message;
    assert!(
        m.contains(
            "the listeners of ListenerSet team/extra take routes of namespace \"team\" only"
        ),
        "{m}"
    );
    assert_eq!(paths_of(&dag, "same.example.com"), ["/team"]);
    let mut all = paths_of(&dag, "all.example.com");
    all.sort();
    assert_eq!(all, ["/shop", "/team"]);
    assert_eq!(
        set_listener(&dag, "team", "extra", "same").attached_routes,
        1
    );
    assert_eq!(
        set_listener(&dag, "team", "extra", "all").attached_routes,
        2
    );
}

#[test]
fn a_listener_sets_certificate_in_another_namespace_needs_a_grant_to_listener_sets() {
    let https = |name: &str| {
        format!(
            "  - {{name: {name}, protocol: HTTPS, port: 443, hostname: {name}.example.com, tls: {{certificateRefs: [{{name: cert, namespace: certs}}]}}}}\n"
        )
    };
    let granted = set("shop", "granted", T0, &https("granted"));
    let ungranted = set("team", "ungranted", T0, &https("ungranted"));
    let grant = "apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: to-listener-sets, namespace: certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: ListenerSet, namespace: shop}, {group: gateway.networking.k8s.io, kind: Gateway, namespace: team}]
  to: [{group: \"\", kind: Secret}]
";
    let mut snap = snapshot(&[
        CLASS,
        &edge("{namespaces: {from: All}}"),
        SERVICES,
        grant,
        &granted,
        &ungranted,
    ]);
    snap.insert(AnyObject::Secret(Arc::new(crate::synth::tls_secret(
        "certs", "cert",
    ))));
    let dag = build(&snap, &Options::default());

    let ok = set_listener(&dag, "shop", "granted", "granted");
    assert_eq!(conds(&ok.conditions)[2], "ResolvedRefs=true/ResolvedRefs");
    assert_eq!(
        conds(&set_status(&dag, "shop", "granted").conditions),
        ["Accepted=true/Accepted", "Programmed=true/Programmed"]
    );
    // A grant to Gateways of the set's namespace is not one to ListenerSets.
    let refused = set_listener(&dag, "team", "ungranted", "ungranted");
    assert_eq!(
        conds(&refused.conditions)[2],
        "ResolvedRefs=false/RefNotPermitted"
    );
    assert!(
        refused.conditions[2]
            .message
            .contains("lets ListenerSets of \"team\"")
    );
    assert_eq!(
        conds(&set_status(&dag, "team", "ungranted").conditions),
        [
            "Accepted=false/ListenersNotValid",
            "Programmed=false/ListenersNotValid"
        ]
    );
    assert_eq!(attached_sets(&dag), Some(1));
}

#[test]
fn a_listener_set_breaking_a_rule_or_on_a_gateway_not_accepted_is_not_attached() {
    let dup = set(
        "shop",
        "dup",
        T0,
        &[http("x", "a.example.com"), http("x", "b.example.com")].concat(),
    );
    let dag = dag_of(&[CLASS, &edge("{namespaces: {from: Same}}"), SERVICES, &dup]);
    let s = set_status(&dag, "shop", "dup");
    assert_eq!(
        conds(&s.conditions),
        ["Accepted=false/Invalid", "Programmed=false/Invalid"]
    );
    assert!(
        s.conditions[0]
            .message
            .contains("spec.listeners[1].name: \"x\" is already the name of spec.listeners[0]"),
        "{s:?}"
    );
    assert!(paths_of(&dag, "a.example.com").is_empty());

    // A Gateway refused for its own listeners (two on one port and hostname).
    let bad_gateway = edge("{namespaces: {from: Same}}").replace(
        "  - {name: gw,",
        "  - {name: twin, protocol: HTTP, port: 80, hostname: gw.example.com}\n  - {name: gw,",
    );
    let ls = set("shop", "extra", T0, &http("extra", "extra.example.com"));
    let dag = dag_of(&[CLASS, &bad_gateway, SERVICES, &ls]);
    assert_eq!(
        conds(&set_status(&dag, "shop", "extra").conditions),
        [
            "Accepted=false/ParentNotAccepted",
            "Programmed=false/ParentNotAccepted"
        ]
    );

    // A ListenerSet of another controller's Gateway is not sluice's.
    let theirs = gateway("other", None, "Same");
    let dag = dag_of(&[CLASS, OTHER_CLASS, &theirs, &ls]);
    assert_eq!(
        status(&dag, Kind::ListenerSet, "shop", "extra").state,
        State::Ignored
    );
}

#[test]
fn incremental_builds_equal_full_builds_with_listener_sets() {
    let base = [CLASS, SERVICES, NAMESPACES, GRANT_SERVICES];
    let gw_none = edge("");
    let gw_all = edge("{namespaces: {from: All}}");
    let ls = set("team", "extra", T0, &http("extra", "extra.example.com"));
    let ls_moved = set("team", "extra", T0, &http("extra", "moved.example.com"));
    let r = route_to(
        "team",
        "r",
        &format!("[{}]", to_set("team", "extra", "")),
        "/r",
    );
    let steps: Vec<Vec<&str>> = vec![
        [&base[..], &[gw_none.as_str(), r.as_str()]].concat(),
        [&base[..], &[gw_none.as_str(), r.as_str(), ls.as_str()]].concat(),
        [&base[..], &[gw_all.as_str(), r.as_str(), ls.as_str()]].concat(),
        [&base[..], &[gw_all.as_str(), r.as_str(), ls_moved.as_str()]].concat(),
        [&base[..], &[gw_all.as_str(), r.as_str()]].concat(),
    ];
    let options = Options::default();
    let mut inc = incremental::Incremental::new(options.clone());
    let mut prev: Option<(Snapshot, Dag)> = None;
    let mut served = Vec::new();
    for docs in steps {
        let next = snapshot(&docs);
        let (dag, _) = inc.build(prev.as_ref().map(|(s, d)| (s, d)), &next);
        assert_eq!(dag, build(&next, &options));
        served.push((
            paths_of(&dag, "extra.example.com"),
            paths_of(&dag, "moved.example.com"),
        ));
        prev = Some((next, dag));
    }
    let r = || vec!["/r".to_string()];
    assert_eq!(
        served,
        [
            (vec![], vec![]),
            (vec![], vec![]),
            (r(), vec![]),
            (vec![], r()),
            (vec![], vec![]),
        ]
    );
}

#[test]
fn with_addresses_of_their_own_a_listener_sets_port_is_opened_at_its_gateways_address() {
    let ls = set(
        "shop",
        "extra",
        T0,
        "  - {name: alt, protocol: HTTP, port: 9090, hostname: alt.example.com}\n",
    );
    let r = route_to(
        "shop",
        "r",
        &format!("[{}]", to_set("shop", "extra", "")),
        "/alt",
    );
    let options = Options {
        gateway_addresses: Some("127.0.1.0/24".parse().unwrap()),
        ..Options::default()
    };
    let snap = snapshot(&[
        CLASS,
        &edge("{namespaces: {from: Same}}"),
        SERVICES,
        &ls,
        &r,
    ]);
    let dag = build(&snap, &options);
    let at = |port: u16| {
        let key = EntryKey {
            gateway: crate::api::ObjKey::new("shop", "edge"),
            port,
        };
        dag.entries.get(&key).cloned()
    };
    let gw = gateway_api_status(&dag, Kind::Gateway, "shop", "edge");
    assert_eq!(gw.addresses.len(), 1, "{gw:?}");
    let alt = at(9090).expect("the ListenerSet's port is opened");
    assert_eq!(alt.address, gw.addresses[0]);
    let hosts: Vec<&String> = alt.vhosts.keys().collect();
    assert_eq!(hosts, ["alt.example.com"]);
    // The Gateway's own port does not serve the set's route.
    let own = at(80).expect("the Gateway's own port");
    assert!(!own.vhosts.contains_key("alt.example.com"));
    assert_eq!(
        conds(&set_status(&dag, "shop", "extra").conditions),
        ["Accepted=true/Accepted", "Programmed=true/Programmed"]
    );

    // A pool with no address left for the Gateway: its sets are not accepted either.
    let taken = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: first, namespace: shop, creationTimestamp: \"2025-01-01T00:00:00Z\"}
spec:
  gatewayClassName: sluice
  listeners: [{name: http, protocol: HTTP, port: 80}]
";
    let options = Options {
        gateway_addresses: Some("127.0.1.7/32".parse().unwrap()),
        ..Options::default()
    };
    let snap = snapshot(&[
        CLASS,
        taken,
        &edge("{namespaces: {from: Same}}"),
        SERVICES,
        &ls,
    ]);
    let dag = build(&snap, &options);
    let s = conds(&set_status(&dag, "shop", "extra").conditions);
    assert_eq!(s[1], "Programmed=false/ParentNotProgrammed", "{s:?}");
}
