//! Unit tests of the Gateway API rules, one per rule, each asserting the exact message.

use serde_json::{Value, json};

use crate::manifest::{Document, decode_value};
use crate::validate::validate_object;

const GW: &str = "gateway.networking.k8s.io/v1";

fn mk(api_version: &str, kind: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "ns"}, "spec": spec})
}

/// Every error of the object, as `path: message`.
fn errors(object: Value) -> Vec<String> {
    match decode_value(object).unwrap() {
        Document::Object(o) => validate_object(&o)
            .errors
            .iter()
            .map(ToString::to_string)
            .collect(),
        d => panic!("object did not decode: {d:?}"),
    }
}

fn mk_gateway(listeners: Value) -> Value {
    mk(
        GW,
        "Gateway",
        json!({"gatewayClassName": "sluice", "listeners": listeners}),
    )
}

fn mk_httproute(rules: Value) -> Value {
    mk(
        GW,
        "HTTPRoute",
        json!({"parentRefs": [{"name": "gw"}], "rules": rules}),
    )
}

const CERT: &str = r#"{"certificateRefs": [{"name": "tls"}]}"#;

fn cert() -> Value {
    serde_json::from_str(CERT).unwrap()
}

const HOST_FIX: &str = "must be a DNS name like \"www.example.com\" or \"*.example.com\" (lowercase letters, digits, '-' and '.'; no port, no IP address)";

// ---- GatewayClass ----

#[test]
fn gateway_class_controller_name_is_domain_prefixed() {
    let ok = mk(
        GW,
        "GatewayClass",
        json!({"controllerName": "example.com/gateway-controller"}),
    );
    assert_eq!(errors(ok), Vec::<String>::new());
    assert_eq!(
        errors(mk(
            GW,
            "GatewayClass",
            json!({"controllerName": "nodomain"})
        )),
        [
            "spec.controllerName: \"nodomain\" must be a domain-prefixed path like \"example.com/gateway-controller\""
        ]
    );
    assert_eq!(
        errors(mk(
            GW,
            "GatewayClass",
            json!({"controllerName": "Example.com/x y"})
        ))
        .len(),
        1
    );
}

#[test]
fn gateway_class_parameters_namespace_is_a_namespace_name() {
    let c = mk(
        GW,
        "GatewayClass",
        json!({"controllerName": "example.com/c",
        "parametersRef": {"group": "", "kind": "ConfigMap", "name": "p", "namespace": "Bad_NS"}}),
    );
    assert_eq!(
        errors(c),
        [
            "spec.parametersRef.namespace: \"Bad_NS\" must be a valid namespace name: lowercase letters, digits and '-', at most 63 characters"
        ]
    );
}

// ---- Gateway ----

#[test]
fn gateway_needs_a_class_and_listeners() {
    let g = mk(
        GW,
        "Gateway",
        json!({"gatewayClassName": "", "listeners": []}),
    );
    assert_eq!(
        errors(g),
        [
            "spec.gatewayClassName: is required; name the GatewayClass this Gateway is for",
            "spec.listeners: must hold at least one listener",
        ]
    );
}

#[test]
fn gateway_addresses_match_their_type() {
    let g = mk(
        GW,
        "Gateway",
        json!({"gatewayClassName": "c",
        "addresses": [{"type": "IPAddress", "value": "not-an-ip"}, {"value": "10.0.0.1"},
                      {"type": "Hostname", "value": "lb.example.com"}, {"type": "Hostname", "value": "*.example.com"}],
        "listeners": [{"name": "web", "port": 80, "protocol": "HTTP"}]}),
    );
    assert_eq!(
        errors(g),
        [
            "spec.addresses[0].value: \"not-an-ip\" must be an IPv4 or IPv6 address for type IPAddress",
            "spec.addresses[3].value: \"*.example.com\" must be a DNS name like \"www.example.com\" (lowercase letters, digits, '-' and '.'; no wildcard, no port, no IP address)",
        ]
    );
}

#[test]
fn listener_names_are_unique_and_well_formed() {
    let g = mk_gateway(json!([
        {"name": "web", "port": 80, "protocol": "HTTP", "hostname": "a.example.com"},
        {"name": "web", "port": 8080, "protocol": "HTTP"},
        {"name": "Web", "port": 8081, "protocol": "HTTP"},
    ]));
    assert_eq!(
        errors(g),
        [
            "spec.listeners[1].name: \"web\" is already the name of spec.listeners[0]; listener names must be unique within a Gateway",
            "spec.listeners[2].name: \"Web\" must be a valid listener name: lowercase letters, digits, '-' and '.', at most 253 characters",
        ]
    );
}

#[test]
fn a_listener_taking_routes_by_namespace_label_needs_a_selector_that_reads() {
    let listener = |namespaces: Value| {
        mk_gateway(json!([{"name": "http", "protocol": "HTTP", "port": 80,
            "allowedRoutes": {"namespaces": namespaces}}]))
    };
    let ok = listener(json!({"from": "Selector", "selector": {
        "matchLabels": {"team": "shop"},
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["lab"]}]}}));
    assert_eq!(errors(ok), Vec::<String>::new());
    // A selector beside another `from` is not read.
    let unread = listener(
        json!({"from": "All", "selector": {"matchExpressions": [{"key": "a", "operator": "Nope"}]}}),
    );
    assert_eq!(errors(unread), Vec::<String>::new());
    assert_eq!(
        errors(listener(json!({"from": "Selector"}))),
        [
            "spec.listeners[0].allowedRoutes.namespaces.selector: is required; from: Selector takes the routes of the namespaces this label selector matches"
        ]
    );
    assert_eq!(
        errors(listener(json!({"from": "Selector", "selector": {
            "matchExpressions": [{"key": "team", "operator": "Equals", "values": ["shop"]}]}}))),
        [
            "spec.listeners[0].allowedRoutes.namespaces.selector.matchExpressions[0].operator: \"Equals\" is not an operator; use In, NotIn, Exists or DoesNotExist"
        ]
    );
}

#[test]
fn listener_ports_are_in_range() {
    let g = mk_gateway(json!([{"name": "web", "port": 0, "protocol": "HTTP"}]));
    assert_eq!(
        errors(g),
        ["spec.listeners[0].port: 0 must be a port number between 1 and 65535"]
    );
}

#[test]
fn listeners_with_the_same_port_protocol_and_hostname_conflict() {
    let g = mk_gateway(json!([
        {"name": "a", "port": 80, "protocol": "HTTP", "hostname": "a.example.com"},
        {"name": "b", "port": 80, "protocol": "HTTP", "hostname": "A.example.com"},
        {"name": "c", "port": 80, "protocol": "HTTP", "hostname": "c.example.com"},
        {"name": "d", "port": 80, "protocol": "HTTP"},
        {"name": "e", "port": 80, "protocol": "HTTP"},
    ]));
    assert_eq!(
        errors(g),
        [
            "spec.listeners[1]: port 80, protocol HTTP and hostname \"A.example.com\" are the same as spec.listeners[0] (\"a\", protocol HTTP); one of them must differ",
            "spec.listeners[4]: port 80, protocol HTTP and no hostname are the same as spec.listeners[3] (\"d\", protocol HTTP); one of them must differ",
        ]
    );
}

#[test]
fn http_and_https_cannot_share_a_port() {
    let g = mk_gateway(json!([
        {"name": "a", "port": 443, "protocol": "HTTPS", "tls": cert()},
        {"name": "b", "port": 443, "protocol": "HTTP"},
        {"name": "c", "port": 9000, "protocol": "TCP"},
        {"name": "d", "port": 9000, "protocol": "HTTP"},
        {"name": "e", "port": 9000, "protocol": "UDP"},
    ]));
    assert_eq!(
        errors(g),
        [
            "spec.listeners[1].protocol: HTTP on port 443 conflicts with spec.listeners[0] (\"a\", protocol HTTPS); listeners sharing a port must all be HTTP, or all HTTPS/TLS, or one TCP listener",
            "spec.listeners[3].protocol: HTTP on port 9000 conflicts with spec.listeners[2] (\"c\", protocol TCP); listeners sharing a port must all be HTTP, or all HTTPS/TLS, or one TCP listener",
        ]
    );
}

#[test]
fn tls_listeners_sharing_a_port_need_distinct_hostnames() {
    let g = mk_gateway(json!([
        {"name": "a", "port": 443, "protocol": "HTTPS", "hostname": "x.example.com", "tls": cert()},
        {"name": "b", "port": 443, "protocol": "TLS", "hostname": "x.example.com", "tls": {"mode": "Passthrough"}},
        {"name": "c", "port": 443, "protocol": "TLS", "hostname": "y.example.com", "tls": {"mode": "Passthrough"}},
        // TLS listeners of both modes on one port (TLSRouteModeMixed).
        {"name": "d", "port": 443, "protocol": "TLS", "hostname": "z.example.com", "tls": {"mode": "Terminate", "certificateRefs": [{"name": "tls"}]}},
    ]));
    assert_eq!(
        errors(g),
        [
            "spec.listeners[1]: port 443 with hostname \"x.example.com\" is already taken by spec.listeners[0] (\"a\", protocol HTTPS); TLS listeners sharing a port need distinct hostnames"
        ]
    );
}

#[test]
fn terminating_listeners_need_certificates() {
    let g = mk_gateway(json!([
        {"name": "a", "port": 443, "protocol": "HTTPS", "hostname": "a.example.com", "tls": {"mode": "Terminate"}},
        {"name": "b", "port": 443, "protocol": "HTTPS", "hostname": "b.example.com", "tls": {}},
        {"name": "c", "port": 8443, "protocol": "TLS", "tls": {"certificateRefs": []}},
    ]));
    let fix = "is required; a listener in tls mode Terminate (the default) needs at least one certificate Secret";
    assert_eq!(
        errors(g),
        [
            format!("spec.listeners[0].tls.certificateRefs: {fix}"),
            format!("spec.listeners[1].tls.certificateRefs: {fix}"),
            format!("spec.listeners[2].tls.certificateRefs: {fix}"),
        ]
    );
}

#[test]
fn tls_settings_match_the_protocol() {
    let g = mk_gateway(json!([
        {"name": "a", "port": 443, "protocol": "HTTPS"},
        {"name": "b", "port": 8443, "protocol": "TLS"},
        {"name": "c", "port": 80, "protocol": "HTTP", "tls": cert()},
        {"name": "d", "port": 9443, "protocol": "HTTPS", "tls": {"mode": "Passthrough"}},
    ]));
    assert_eq!(
        errors(g),
        [
            "spec.listeners[0].tls: is required; an HTTPS listener terminates TLS and needs tls.certificateRefs",
            "spec.listeners[1].tls: is required; a TLS listener needs tls.mode Passthrough, or Terminate with tls.certificateRefs",
            "spec.listeners[2].tls: must not be set for protocol HTTP (only HTTPS and TLS listeners use TLS)",
            "spec.listeners[3].tls.mode: \"Passthrough\" is only valid for protocol TLS; an HTTPS listener terminates TLS (mode Terminate)",
        ]
    );
}

#[test]
fn listener_hostnames_are_dns_names_and_absent_for_tcp() {
    let g = mk_gateway(json!([
        {"name": "a", "port": 80, "protocol": "HTTP", "hostname": "*.example.com"},
        {"name": "b", "port": 80, "protocol": "HTTP", "hostname": "foo_bar.com"},
        {"name": "c", "port": 9000, "protocol": "TCP", "hostname": "db.example.com"},
    ]));
    assert_eq!(
        errors(g),
        [
            format!("spec.listeners[1].hostname: \"foo_bar.com\" {HOST_FIX}"),
            "spec.listeners[2].hostname: must not be set for protocol TCP (TCP and UDP listeners do not see host names)".to_string(),
        ]
    );
}

// ---- HTTPRoute ----

#[test]
fn httproute_hostnames_are_dns_names() {
    let r = mk(
        GW,
        "HTTPRoute",
        json!({"hostnames": ["shop.example.com", "*.example.com", "*", "a.example.com:80"]}),
    );
    assert_eq!(
        errors(r),
        [
            format!("spec.hostnames[2]: \"*\" {HOST_FIX}"),
            format!("spec.hostnames[3]: \"a.example.com:80\" {HOST_FIX}"),
        ]
    );
}

#[test]
fn httproute_parent_refs_are_well_formed() {
    let r = mk(
        GW,
        "HTTPRoute",
        json!({"parentRefs": [{"name": "gw", "port": 70000, "sectionName": "Web"}]}),
    );
    assert_eq!(
        errors(r),
        [
            "spec.parentRefs[0].port: 70000 must be a port number between 1 and 65535",
            "spec.parentRefs[0].sectionName: \"Web\" must be a valid section (listener) name: lowercase letters, digits, '-' and '.', at most 253 characters",
        ]
    );
}

#[test]
fn httproute_prefix_and_exact_paths_are_paths() {
    let r = mk_httproute(json!([{"matches": [
        {"path": {"type": "PathPrefix", "value": "api"}},
        {"path": {"type": "Exact", "value": "/a//b"}},
        {"path": {"value": "/ok/%20"}},
        {"path": {"type": "Exact", "value": "/a/../b"}},
    ]}]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].matches[0].path.value: \"api\" must start with \"/\"",
            "spec.rules[0].matches[1].path.value: \"/a//b\" must not contain consecutive \"/\" characters",
            "spec.rules[0].matches[3].path.value: \"/a/../b\" must not contain \".\" or \"..\" segments (request paths are normalized before matching)",
        ]
    );
}

#[test]
fn httproute_regular_expressions_are_valid_bounded_re2() {
    let long = "a".repeat(100_000);
    let r = mk_httproute(json!([{"matches": [
        {"path": {"type": "RegularExpression", "value": "/api/(v1"}},
        {"path": {"type": "RegularExpression", "value": "/api/v[0-9]+/.*"}},
        {"headers": [{"type": "RegularExpression", "name": "x-a", "value": "(?=look)"}]},
        {"headers": [{"type": "RegularExpression", "name": "x-b", "value": long}]},
        {"queryParams": [{"type": "RegularExpression", "name": "q", "value": "[z-a]"}]},
        {"headers": [{"type": "RegularExpression", "name": "x-c", "value": "(?x) v [0-9]+"}]},
        {"headers": [{"type": "RegularExpression", "name": "x-d", "value": "\\p{Letter}+"}]},
    ]}]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].matches[0].path.value: \"/api/(v1\" is not a valid RE2 regular expression (error: unclosed group)",
            "spec.rules[0].matches[2].headers[0].value: \"(?=look)\" is not a valid RE2 regular expression (error: look-around, including look-ahead and look-behind, is not supported)",
            "spec.rules[0].matches[3].headers[0].value: regular expression of 100000 bytes is longer than the 1024 bytes allowed",
            "spec.rules[0].matches[4].queryParams[0].value: \"[z-a]\" is not a valid RE2 regular expression (error: invalid character class range, the start must be <= the end)",
            "spec.rules[0].matches[5].headers[0].value: \"(?x) v [0-9]+\" sets the flag `x`, which RE2 (Envoy's regex engine) does not have; it takes the flags i, m, s and U",
            "spec.rules[0].matches[6].headers[0].value: \"\\\\p{Letter}+\" names the Unicode class `Letter`, which RE2 (Envoy's regex engine) does not know; it takes a general category abbreviation like `\\p{Lu}` or `\\pL`, a script name like `\\p{Greek}`, or `\\p{Any}`",
        ]
    );
}

#[test]
fn httproute_header_and_query_matches_are_well_formed() {
    let r = mk_httproute(json!([{"matches": [{
        "headers": [{"name": "x header", "value": "v"}, {"name": "x-ok", "value": "a\nb"}, {"name": "x-lit", "value": "%ENVIRONMENT(X)%;{}\""}],
        "queryParams": [{"name": "a b", "value": "1"}, {"name": "c", "value": "x\u{0}y"}],
    }]}]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].matches[0].headers[0].name: \"x header\" must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~; no ':' pseudo-headers)",
            "spec.rules[0].matches[0].headers[1].value: \"a\\nb\" must not contain control characters such as newlines",
            "spec.rules[0].matches[0].queryParams[0].name: \"a b\" must be a query parameter name (letters, digits and !#$%&'*+-.^_`|~)",
            "spec.rules[0].matches[0].queryParams[1].value: \"x\\0y\" must not contain control characters such as newlines",
        ]
    );
}

#[test]
fn a_mirrors_share_is_a_percent_or_a_fraction_of_at_most_all() {
    let mirror = |extra: serde_json::Value| {
        let mut m = json!({"backendRef": {"name": "shadow", "port": 80}});
        m.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"type": "RequestMirror", "requestMirror": m})
    };
    let r = mk_httproute(json!([{"filters": [
        mirror(json!({})),
        mirror(json!({"percent": 0})),
        mirror(json!({"fraction": {"numerator": 3}})),
        mirror(json!({"percent": 101})),
        mirror(json!({"fraction": {"numerator": 5, "denominator": 4}})),
        mirror(json!({"fraction": {"numerator": 0, "denominator": 0}})),
        mirror(json!({"percent": 5, "fraction": {"numerator": 1}})),
    ]}]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].filters[3].requestMirror.percent: 101 must be between 0 and 100",
            "spec.rules[0].filters[4].requestMirror.fraction.numerator: 5 must be between 0 and the denominator, 4",
            "spec.rules[0].filters[5].requestMirror.fraction.denominator: 0 must be above 0",
            "spec.rules[0].filters[6].requestMirror.fraction: set percent or fraction, not both",
        ]
    );
}

#[test]
fn a_cors_policy_names_origins_methods_and_headers_envoy_can_match() {
    let cors = |policy: serde_json::Value| json!({"type": "CORS", "cors": policy});
    let r = mk_httproute(json!([{"filters": [
        cors(json!({"allowOrigins": ["*", "https://app.example.com", "http://*.example.com:8080",
                                     "HTTPS://Shop.Example.com", "https://*"],
                    "allowMethods": ["GET", "*"], "allowHeaders": ["x-token", "*"],
                    "exposeHeaders": ["x-trace"], "maxAge": 60, "allowCredentials": true})),
        cors(json!({"allowOrigins": ["app.example.com", "ftp://files.example.com",
                                     "https://app.example.com:0", "https://app.example.com/path",
                                     "https://a*.example.com", "https://"],
                    "allowMethods": ["GET, PUT"], "allowHeaders": ["x token"],
                    "exposeHeaders": [""], "maxAge": 0})),
        {"type": "CORS"},
    ]}]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].filters[1].cors.allowOrigins[0]: \"app.example.com\" has no scheme; write \"*\" or <scheme>://<host>[:<port>] with scheme http or https, such as \"https://app.example.com\" or \"https://*.example.com\"",
            "spec.rules[0].filters[1].cors.allowOrigins[1]: \"ftp://files.example.com\" has a scheme other than http and https; write \"*\" or <scheme>://<host>[:<port>] with scheme http or https, such as \"https://app.example.com\" or \"https://*.example.com\"",
            "spec.rules[0].filters[1].cors.allowOrigins[2]: \"https://app.example.com:0\" has a port that is not a number between 1 and 65535; write \"*\" or <scheme>://<host>[:<port>] with scheme http or https, such as \"https://app.example.com\" or \"https://*.example.com\"",
            "spec.rules[0].filters[1].cors.allowOrigins[3]: \"https://app.example.com/path\" has no host name, or one with characters other than letters, digits, '-' and '.' (and a leading '*'); write \"*\" or <scheme>://<host>[:<port>] with scheme http or https, such as \"https://app.example.com\" or \"https://*.example.com\"",
            "spec.rules[0].filters[1].cors.allowOrigins[4]: \"https://a*.example.com\" has no host name, or one with characters other than letters, digits, '-' and '.' (and a leading '*'); write \"*\" or <scheme>://<host>[:<port>] with scheme http or https, such as \"https://app.example.com\" or \"https://*.example.com\"",
            "spec.rules[0].filters[1].cors.allowOrigins[5]: \"https://\" has no host name, or one with characters other than letters, digits, '-' and '.' (and a leading '*'); write \"*\" or <scheme>://<host>[:<port>] with scheme http or https, such as \"https://app.example.com\" or \"https://*.example.com\"",
            "spec.rules[0].filters[1].cors.allowMethods[0]: \"GET, PUT\" must be an HTTP method such as GET or PUT, or \"*\"",
            "spec.rules[0].filters[1].cors.allowHeaders[0]: \"x token\" must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~; no ':' pseudo-headers)",
            "spec.rules[0].filters[1].cors.exposeHeaders[0]: \"\" must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~; no ':' pseudo-headers)",
            "spec.rules[0].filters[1].cors.maxAge: 0 must be at least 1 (seconds a browser keeps a preflight's answer)",
            "spec.rules[0].filters[2].cors: is required for a CORS filter: set allowOrigins and the other fields of the policy",
        ]
    );
}

#[test]
fn header_modifiers_name_each_header_once_and_carry_values_as_data() {
    let r = mk_httproute(
        json!([{"filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "set": [{"name": "X-Foo", "value": "a"}, {"name": "x-foo", "value": "b"}, {"name": "x-env", "value": "%ENVIRONMENT(HOME)% ; {} \" '"}],
            "add": [{"name": "x-bar", "value": "1\r\nInjected: yes"}],
            "remove": ["x-gone", "X-GONE", ":authority"],
        }}]}]),
    );
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].filters[0].requestHeaderModifier.set[1].name: \"x-foo\" names the same header as set[0] (header names are case-insensitive)",
            "spec.rules[0].filters[0].requestHeaderModifier.add[0].value: \"1\\r\\nInjected: yes\" must not contain control characters such as newlines",
            "spec.rules[0].filters[0].requestHeaderModifier.remove[1]: \"X-GONE\" names the same header as remove[0] (header names are case-insensitive)",
            "spec.rules[0].filters[0].requestHeaderModifier.remove[2]: \":authority\" must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~; no ':' pseudo-headers)",
        ]
    );
}

#[test]
fn redirects_and_rewrites_are_well_formed() {
    let r = mk_httproute(json!([{"filters": [
        {"type": "RequestRedirect", "requestRedirect": {"hostname": "*.example.com", "statusCode": 304, "port": 0}},
        {"type": "URLRewrite", "urlRewrite": {"hostname": "ok.example.com", "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "v2"}}},
        {"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/a b"}}},
    ], "backendRefs": [{"name": "s", "port": 80, "filters": [
        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"set": [{"name": "x", "value": "1"}, {"name": "X", "value": "2"}]}},
    ]}]}]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].filters[0].requestRedirect.hostname: \"*.example.com\" must be a DNS name like \"www.example.com\" (lowercase letters, digits, '-' and '.'; no wildcard, no port, no IP address)",
            "spec.rules[0].filters[0].requestRedirect.port: 0 must be a port number between 1 and 65535",
            "spec.rules[0].filters[0].requestRedirect.statusCode: 304 must be one of 301, 302, 303, 307, 308",
            "spec.rules[0].filters[1].urlRewrite.path.replacePrefixMatch: \"v2\" must start with \"/\"",
            "spec.rules[0].filters[2].requestRedirect.path.replaceFullPath: \"/a b\" must not contain whitespace or control characters (found ' ')",
            "spec.rules[0].backendRefs[0].filters[0].responseHeaderModifier.set[1].name: \"X\" names the same header as set[0] (header names are case-insensitive)",
        ]
    );
}

#[test]
fn service_backends_name_a_port_and_weights_are_in_range() {
    let r = mk_httproute(json!([{"backendRefs": [
        {"name": "svc"},
        {"name": "svc", "port": 80, "weight": -1},
        {"group": "example.com", "kind": "Bucket", "name": "b"},
        {"name": "svc", "port": 8080, "weight": 5},
    ]}]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].backendRefs[0].port: is required; a Service backend names the Service port to send to",
            "spec.rules[0].backendRefs[1].weight: -1 must be between 0 and 1000000",
        ]
    );
}

#[test]
fn timeouts_are_durations_and_backend_within_request() {
    let r = mk_httproute(json!([
        {"timeouts": {"request": "10 seconds"}},
        {"timeouts": {"request": "10s", "backendRequest": "20s"}},
        {"timeouts": {"request": "1m", "backendRequest": "500ms"}},
        {"timeouts": {"request": "0s", "backendRequest": "5s"}},
        {"timeouts": {"request": "10s", "backendRequest": "0s"}},
    ]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].timeouts.request: \"10 seconds\" must be a duration like \"10s\", \"500ms\" or \"1h30m\" (units h, m, s, ms; at most 5 digits per unit)",
            "spec.rules[1].timeouts.backendRequest: \"20s\" must not be longer than timeouts.request (\"10s\")",
        ]
    );
}

#[test]
fn a_rules_retry_takes_error_codes_a_bounded_number_of_attempts_and_a_duration() {
    let r = mk_httproute(json!([
        {"retry": {"codes": [500, 503], "attempts": 3, "backoff": "100ms"}},
        {"retry": {"codes": [200, 600], "attempts": 101, "backoff": "a while"}},
        {"retry": {}},
    ]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[1].retry.backoff: \"a while\" must be a duration like \"10s\", \"500ms\" or \"1h30m\" (units h, m, s, ms; at most 5 digits per unit)",
            "spec.rules[1].retry.attempts: 101 is not a number of retries from 0 to 100",
            "spec.rules[1].retry.codes[0]: 200 is not an HTTP error status code (400 to 599)",
            "spec.rules[1].retry.codes[1]: 600 is not an HTTP error status code (400 to 599)",
        ]
    );
}

// ---- GRPCRoute ----

#[test]
fn grpc_method_matches_are_names_or_valid_regexes() {
    let r = mk(
        GW,
        "GRPCRoute",
        json!({"rules": [{"matches": [
            {"method": {"service": "my service", "method": "1abc"}},
            {"method": {"type": "Exact"}},
            {"method": {"type": "RegularExpression", "service": "pkg\\.(Foo", "method": "Get.*"}},
            {"method": {"service": "grpc.health.v1.Health", "method": "Check"}},
            {"headers": [{"type": "RegularExpression", "name": "x-a", "value": "a{2,1}"}]},
        ]}]}),
    );
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].matches[0].method.service: \"my service\" must be a fully qualified gRPC service name like \"package.Service\"",
            "spec.rules[0].matches[0].method.method: \"1abc\" must be a gRPC method name (letters, digits and '_', not starting with a digit)",
            "spec.rules[0].matches[1].method: must name a service, a method, or both",
            "spec.rules[0].matches[2].method.service: \"pkg\\\\.(Foo\" is not a valid RE2 regular expression (error: unclosed group)",
            "spec.rules[0].matches[4].headers[0].value: \"a{2,1}\" is not a valid RE2 regular expression (error: invalid repetition count range, the start must be <= the end)",
        ]
    );
}

/// GRPCRoute's filters (a rule's and a backendRef's) and backends take HTTPRoute's checks.
#[test]
fn grpc_filters_and_backends_are_checked_as_http_ones() {
    let r = mk(
        GW,
        "GRPCRoute",
        json!({"rules": [{
            "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "x-a", "value": "1"}, {"name": "X-A", "value": "2"}]}}],
            "backendRefs": [
                {"name": "api", "port": 8080, "filters": [{"type": "RequestMirror",
                    "requestMirror": {"backendRef": {"name": "m", "port": 80}, "percent": 150}}]},
                {"name": "api"},
            ],
        }]}),
    );
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].filters[0].requestHeaderModifier.set[1].name: \"X-A\" names the same header as set[0] (header names are case-insensitive)",
            "spec.rules[0].backendRefs[0].filters[0].requestMirror.percent: 150 must be between 0 and 100",
            "spec.rules[0].backendRefs[1].port: is required; a Service backend names the Service port to send to",
        ]
    );
}

#[test]
fn rule_names_are_section_names_unique_within_the_route() {
    let backend = json!([{"name": "web", "port": 80}]);
    let r = mk_httproute(json!([
        {"name": "read", "backendRefs": backend},
        {"name": "write", "backendRefs": backend},
        {"name": "read", "backendRefs": backend},
        {"name": "Write Path", "backendRefs": backend},
        {"backendRefs": backend},
        {"backendRefs": backend},
    ]));
    assert_eq!(
        errors(r),
        [
            "spec.rules[2].name: \"read\" is already the name of spec.rules[0]; rule names must be unique within a route",
            "spec.rules[3].name: \"Write Path\" must be a valid rule name: lowercase letters, digits, '-' and '.', at most 253 characters",
        ]
    );
    let g = mk(
        GW,
        "GRPCRoute",
        json!({"rules": [
            {"name": "health", "backendRefs": backend},
            {"name": "health", "backendRefs": backend},
        ]}),
    );
    assert_eq!(
        errors(g),
        [
            "spec.rules[1].name: \"health\" is already the name of spec.rules[0]; rule names must be unique within a route"
        ]
    );
}

#[test]
fn a_grpc_regular_expression_match_is_checked_as_the_path_expression_envoy_runs() {
    let (service, method) = ("s".repeat(600), "m".repeat(600));
    let r = mk(
        GW,
        "GRPCRoute",
        json!({"rules": [{"matches": [
            {"method": {"type": "RegularExpression", "service": service, "method": method}},
            {"method": {"type": "RegularExpression", "service": service}},
        ]}]}),
    );
    let errors = errors(r);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.rules[0].matches[0].method: regular expression of 1210 bytes is longer than the 1024 bytes allowed"),
        "{errors:?}"
    );
}

#[test]
fn grpc_filters_and_backends_are_checked() {
    let r = mk(
        GW,
        "GRPCRoute",
        json!({"hostnames": ["grpc.example.com"], "rules": [{
            "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"add": [{"name": "bad name", "value": "v"}]}}],
            "backendRefs": [{"name": "svc"}],
        }]}),
    );
    assert_eq!(
        errors(r),
        [
            "spec.rules[0].filters[0].requestHeaderModifier.add[0].name: \"bad name\" must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~; no ':' pseudo-headers)",
            "spec.rules[0].backendRefs[0].port: is required; a Service backend names the Service port to send to",
        ]
    );
}

// ---- TLSRoute, TCPRoute ----

#[test]
fn tlsroute_hostnames_and_backends() {
    let r = mk(
        GW,
        "TLSRoute",
        json!({"hostnames": ["*.example.com", "bad_host"], "rules": [{"backendRefs": [{"name": "svc"}]}]}),
    );
    assert_eq!(
        errors(r),
        [
            format!("spec.hostnames[1]: \"bad_host\" {HOST_FIX}"),
            "spec.rules[0].backendRefs[0].port: is required; a Service backend names the Service port to send to".to_string(),
        ]
    );
}

#[test]
fn tcproute_rules_and_backends() {
    let empty = mk(
        "gateway.networking.k8s.io/v1alpha2",
        "TCPRoute",
        json!({"rules": []}),
    );
    assert_eq!(errors(empty), ["spec.rules: must hold at least one rule"]);
    let r = mk(
        "gateway.networking.k8s.io/v1alpha2",
        "TCPRoute",
        json!({"rules": [{"backendRefs": [{"name": "db", "port": 0}]}]}),
    );
    assert_eq!(
        errors(r),
        ["spec.rules[0].backendRefs[0].port: 0 must be a port number between 1 and 65535"]
    );
}

// ---- ReferenceGrant ----

#[test]
fn reference_grants_name_namespaces_and_kinds() {
    let g = mk(
        "gateway.networking.k8s.io/v1beta1",
        "ReferenceGrant",
        json!({
        "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "Bad NS"},
                 {"group": "", "kind": "", "namespace": "ok"}],
        "to": [{"group": "", "kind": "Service", "name": "a/b"}]}),
    );
    assert_eq!(
        errors(g),
        [
            "spec.from[0].namespace: \"Bad NS\" must be a valid namespace name: lowercase letters, digits and '-', at most 63 characters",
            "spec.from[1].kind: is required; name the kind of the referring objects, e.g. HTTPRoute",
            "spec.to[0].name: \"a/b\" must be a valid object name: lowercase letters, digits, '-' and '.', at most 253 characters",
        ]
    );
    let empty = mk(
        "gateway.networking.k8s.io/v1beta1",
        "ReferenceGrant",
        json!({"from": [], "to": []}),
    );
    assert_eq!(
        errors(empty),
        [
            "spec.from: must hold at least one entry",
            "spec.to: must hold at least one entry"
        ]
    );
}

#[test]
fn a_valid_gateway_and_route_pass() {
    let g = mk_gateway(json!([
        {"name": "http", "port": 80, "protocol": "HTTP"},
        {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.example.com", "tls": cert()},
        {"name": "tls", "port": 443, "protocol": "TLS", "hostname": "db.example.com", "tls": {"mode": "Passthrough"}},
        {"name": "dns", "port": 53, "protocol": "UDP"},
        {"name": "tcp", "port": 53, "protocol": "TCP"},
    ]));
    assert_eq!(errors(g), Vec::<String>::new());
    let r = mk_httproute(
        json!([{"matches": [{"path": {"type": "PathPrefix", "value": "/api"},
        "headers": [{"name": "x-env", "value": "canary"}], "method": "GET"}],
        "backendRefs": [{"name": "api", "port": 8080, "weight": 90}, {"name": "api-canary", "port": 8080, "weight": 10}]}]),
    );
    assert_eq!(errors(r), Vec::<String>::new());
}
