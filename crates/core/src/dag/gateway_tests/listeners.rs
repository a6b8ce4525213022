//! Listener statuses the Gateway API asks for when a listener is only partly usable: route kinds
//! of which some are not sluice's, a certificate that does not resolve (routes still attach and
//! are counted), every listener refused.

use super::*;

fn listener_status(dag: &Dag, name: &str) -> ListenerStatus {
    let s = status(dag, Kind::Gateway, "shop", "edge");
    let g = s.gateway.as_ref().expect("a Gateway API status");
    g.listeners
        .iter()
        .find(|l| l.name == name)
        .cloned()
        .expect("the listener")
}

#[test]
fn a_kind_sluice_does_not_attach_leaves_the_others_and_says_so() {
    let gw = gateway_with(
        "  - name: http
    protocol: HTTP
    port: 80
    allowedRoutes: {kinds: [{kind: InvalidRoute}, {kind: HTTPRoute}]}
",
    );
    let r = route("shop", "store", &["shop.example.com"], TO_WEB);
    let dag = dag_of(&[CLASS, &gw, SERVICES, &r]);
    let l = listener_status(&dag, "http");
    assert_eq!(l.supported_kinds, ["HTTPRoute"]);
    assert_eq!(
        conds(&l.conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=true/Programmed",
            "ResolvedRefs=false/InvalidRouteKinds"
        ]
    );
    assert!(
        l.conditions[2].message.contains("not InvalidRoute"),
        "{l:?}"
    );
    assert_eq!(l.attached_routes, 1, "HTTPRoutes still attach");
}

#[test]
fn a_listener_whose_certificate_does_not_resolve_counts_its_routes_and_serves_none() {
    let gw = gateway_with(
        "  - name: tls
    protocol: HTTPS
    port: 443
    tls: {certificateRefs: [{name: does-not-exist}]}
",
    );
    let missing = "  - backendRefs: [{name: does-not-exist, port: 8080}]\n";
    let r = route("shop", "store", &["shop.example.com"], missing);
    let dag = dag_of(&[CLASS, &gw, SERVICES, &r]);
    // The route's references are resolved though it serves nothing.
    let parent = route_parent(&dag, "shop", "store");
    assert_eq!(
        conds(&parent.conditions)[1],
        "ResolvedRefs=false/BackendNotFound"
    );
    let l = listener_status(&dag, "tls");
    assert_eq!(
        conds(&l.conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=false/Invalid",
            "ResolvedRefs=false/InvalidCertificateRef"
        ]
    );
    assert_eq!(l.attached_routes, 1);
    assert!(dag.vhosts.is_empty(), "nothing served: {:?}", dag.vhosts);
    // The Gateway stays accepted and programmed with its other listeners, if any.
    let s = status(&dag, Kind::Gateway, "shop", "edge");
    let c = conds(&s.gateway.as_ref().unwrap().conditions);
    assert_eq!(
        c,
        [
            "Accepted=true/ListenersNotValid",
            "Programmed=true/Programmed"
        ]
    );
}

#[test]
fn a_gateway_none_of_whose_listeners_is_accepted_is_not_accepted() {
    let gw = gateway_with("  - {name: odd, protocol: INVALID, port: 1111}\n");
    let dag = dag_of(&[CLASS, &gw]);
    let s = status(&dag, Kind::Gateway, "shop", "edge");
    let c = conds(&s.gateway.as_ref().unwrap().conditions);
    assert_eq!(
        c,
        [
            "Accepted=false/ListenersNotValid",
            "Programmed=false/Invalid"
        ]
    );
    let l = listener_status(&dag, "odd");
    assert_eq!(
        conds(&l.conditions)[0],
        "Accepted=false/UnsupportedProtocol"
    );
    assert!(l.supported_kinds.is_empty());
}
