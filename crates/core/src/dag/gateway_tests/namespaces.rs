//! `allowedRoutes.namespaces.from: Selector`: a listener takes the routes of the namespaces whose
//! labels its selector matches.

use super::*;

const NAMESPACES: &str = "apiVersion: v1
kind: Namespace
metadata: {name: money, labels: {team: shop, env: prod}}
---
apiVersion: v1
kind: Namespace
metadata: {name: lab, labels: {team: shop, env: dev}}
";

const SERVICES_ELSEWHERE: &str = "apiVersion: v1
kind: Service
metadata: {name: billing, namespace: lab}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: billing, namespace: plain}
spec: {ports: [{port: 80}]}
";

fn billing(ns: &str) -> String {
    route(
        ns,
        "pay",
        &[&format!("pay.{ns}.example.com")],
        "  - backendRefs: [{name: billing, port: 80}]\n",
    )
}

/// The build of Gateway `gw` with the Namespaces and a route in each of `money`, `lab` and
/// `plain` (which has no Namespace object).
fn with_three_routes(gw: &str) -> Dag {
    let routes = [billing("money"), billing("lab"), billing("plain")];
    let mut docs = vec![CLASS, gw, SERVICES, SERVICES_ELSEWHERE, NAMESPACES];
    docs.extend(routes.iter().map(String::as_str));
    dag_of(&docs)
}

#[test]
fn a_selector_takes_the_routes_of_the_namespaces_whose_labels_it_matches() {
    let gw = gateway(
        "sluice",
        None,
        "Selector, selector: {matchLabels: {team: shop}, matchExpressions: [{key: env, operator: NotIn, values: [dev]}]}",
    );
    let dag = with_three_routes(&gw);

    // money: team=shop, env=prod.
    assert_eq!(
        forwards_to(&dag.vhosts["pay.money.example.com"].routes[0]),
        ["money/billing/80*1"]
    );
    assert_eq!(
        conds(&route_parent(&dag, "money", "pay").conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
    // lab: env=dev; plain: no Namespace object, so only its name label.
    for ns in ["lab", "plain"] {
        assert!(!dag.vhosts.contains_key(&*format!("pay.{ns}.example.com")));
        let p = route_parent(&dag, ns, "pay");
        assert_eq!(
            conds(&p.conditions)[0],
            "Accepted=false/NotAllowedByListeners"
        );
        let want = format!(
            "spec.parentRefs[0]: the listeners of Gateway shop/edge take routes of the namespaces their allowedRoutes.namespaces.selector matches, and the labels of namespace \"{ns}\" do not match it; label the namespace or widen the selector"
        );
        assert!(p.conditions[0].message.starts_with(&want), "{p:?}");
    }
    let gw = status(&dag, Kind::Gateway, "shop", "edge");
    let l = &gw.gateway.as_ref().unwrap().listeners[0];
    assert_eq!(l.attached_routes, 1);
    assert_eq!(
        conds(&l.conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=true/Programmed",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
}

#[test]
fn every_namespace_has_its_name_label_with_or_without_a_namespace_object() {
    let gw = gateway(
        "sluice",
        None,
        "Selector, selector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [plain, lab]}]}",
    );
    let dag = with_three_routes(&gw);
    assert!(!dag.vhosts.contains_key("pay.money.example.com"));
    assert!(dag.vhosts.contains_key("pay.lab.example.com"));
    assert!(dag.vhosts.contains_key("pay.plain.example.com"));
}

#[test]
fn a_listener_whose_selector_does_not_read_takes_no_route_and_says_why() {
    for (from, want) in [
        (
            "Selector",
            "spec.listeners[0].allowedRoutes.namespaces.selector: is required; from: Selector takes the routes of the namespaces this label selector matches",
        ),
        (
            "Selector, selector: {matchExpressions: [{key: team, operator: In}]}",
            "spec.listeners[0].allowedRoutes.namespaces.selector.matchExpressions[0].values: is required; operator In needs at least one value",
        ),
    ] {
        let gw = gateway("sluice", None, from);
        let r = billing("money");
        let dag = dag_of(&[CLASS, &gw, SERVICES, NAMESPACES, &r]);
        assert!(!dag.vhosts.contains_key("pay.money.example.com"), "{from}");
        let gw = status(&dag, Kind::Gateway, "shop", "edge");
        let l = &gw.gateway.as_ref().unwrap().listeners[0];
        assert_eq!(conds(&l.conditions)[0], "Accepted=false/Invalid", "{from}");
        assert_eq!(l.conditions[0].message, want, "{from}");
    }
}
