//! Gateway API fixtures of the real-Envoy tests: sluice's GatewayClass, Gateways and HTTPRoutes
//! as YAML.

/// sluice's GatewayClass `sluice` (controller `sluice.dev/gateway-controller`).
pub const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
";

/// A Gateway `ns/name` of sluice's class asking for address `ip` (`--gateway-addresses`), with
/// `spec`: the rest of its spec (YAML lines indented by two: listeners, tls).
pub fn addressed_gateway(ns: &str, name: &str, ip: &str, spec: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: {ns}}}
spec:
  gatewayClassName: sluice
  addresses: [{{value: {ip}}}]
{spec}"
    )
}

/// sluice's GatewayClass and one of another controller.
pub const CLASSES: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other-controller}
";

/// Gateway `gw/edge` of sluice's (HTTP, and HTTPS for secure.example.com with Secret `cert`)
/// and Gateway `gw/elsewhere` of the other controller.
pub const GATEWAYS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: gw}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - name: https
    protocol: HTTPS
    port: 443
    hostname: secure.example.com
    tls: {certificateRefs: [{name: cert}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: elsewhere, namespace: gw}
spec:
  gatewayClassName: other
  listeners: [{name: http, protocol: HTTP, port: 80}]
";

/// The GatewayClasses, then a Gateway `edge` of sluice's in `namespace` with one HTTP listener.
pub fn http_gateway(namespace: &str) -> String {
    format!(
        "{CLASSES}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: {namespace}}}
spec:
  gatewayClassName: sluice
  listeners: [{{name: http, protocol: HTTP, port: 80}}]
"
    )
}

/// An HTTPRoute `app` in `namespace` on Gateway `edge`, for `app.example.com`, with `rules`
/// (the YAML of the list under `rules:`).
pub fn app_route(namespace: &str, rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app, namespace: {namespace}}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [app.example.com]
  rules:
{rules}"
    )
}

/// HTTPRoute `gw/store` on `edge` for shop.example.com: `/api` to `api_backend`, a canary header
/// to `canary`, POSTs of `/submit` to `api`, the rest to `web`.
pub fn store_route(api_backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: store, namespace: gw}}
spec:
  parentRefs: [{{name: edge, sectionName: http}}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
    backendRefs: [{{name: {api_backend}, port: 80}}]
  - matches: [{{headers: [{{name: x-canary, value: \"yes\"}}]}}]
    backendRefs: [{{name: canary, port: 80}}]
  - matches: [{{path: {{type: Exact, value: /submit}}, method: POST}}]
    backendRefs: [{{name: api, port: 80}}]
  - backendRefs: [{{name: web, port: 80}}]
"
    )
}

/// HTTPRoutes of `gw` that serve nothing or only in part: on the HTTPS listener, with an
/// unknown filter, on the other controller's Gateway, and with missing backends.
pub const OTHER_ROUTES: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure, namespace: gw}
spec:
  parentRefs: [{name: edge, sectionName: https}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: filtered, namespace: gw}
spec:
  parentRefs: [{name: edge}]
  hostnames: [filtered.example.com]
  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Limit, name: slow}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: theirs, namespace: gw}
spec:
  parentRefs: [{name: elsewhere}]
  hostnames: [theirs.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: broken, namespace: gw}
spec:
  parentRefs: [{name: edge}]
  hostnames: [broken.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /gone}}]
    backendRefs: [{name: nothere, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /none}}]
  - matches: [{path: {type: PathPrefix, value: /half}}]
    backendRefs: [{name: web, port: 80}, {name: nothere, port: 80}]
  - backendRefs: [{name: web, port: 80}]
";
