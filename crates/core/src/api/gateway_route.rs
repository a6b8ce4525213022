//! The parts of a Gateway API route that the API defines once for every route kind:
//! `parentRefs` (`ParentReference`), `hostnames`, and each rule's `name`, `backendRefs`
//! (`BackendRef`) and `filters` (`HTTPRouteFilter`, whose header modifiers and mirror GRPCRoute
//! shares). The generated `gateway-api` crate gives each kind (and each list inside it) a Rust
//! type of its own for these; sluice reads them through the one type each here instead, so that
//! validation and the build are written once for HTTPRoute, GRPCRoute, TLSRoute and TCPRoute.
//!
//! [`RouteSpec::read`] takes any kind's `spec` through its serde form, which for these fields is
//! the same JSON for every kind (fields a kind does not have stay empty; fields only one kind
//! has, such as matches, timeouts and retries, are read from the kind's own type).

use serde::de::{Deserialize, Deserializer};
use serde::{Serialize, de::DeserializeOwned};

/// The shared fields of a route's `spec`.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    #[serde(default, deserialize_with = "null_default")]
    pub parent_refs: Vec<ParentRef>,
    /// Host names (HTTPRoute, GRPCRoute) or SNI names (TLSRoute); none for a TCPRoute.
    #[serde(default, deserialize_with = "null_default")]
    pub hostnames: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub rules: Vec<Rule>,
}

impl RouteSpec {
    /// The shared fields of `spec`, the `spec` of a generated route type (`HttpRouteSpec`,
    /// `GrpcRouteSpec`, `TlsRouteSpec`, `TcpRouteSpec`). An error means this model and the
    /// generated type disagree on a field's JSON type (a bug of sluice, not of the object).
    pub fn read(spec: &impl Serialize) -> Result<RouteSpec, serde_json::Error> {
        from_serde(spec)
    }
}

fn from_serde<T: DeserializeOwned>(value: &impl Serialize) -> Result<T, serde_json::Error> {
    serde_json::from_value(serde_json::to_value(value)?)
}

/// A `parentRefs` entry.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: String,
    pub section_name: Option<String>,
    pub port: Option<i32>,
}

/// A rule's shared fields.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub backend_refs: Vec<BackendRef>,
    /// The rule's filters (none for TLSRoute and TCPRoute).
    #[serde(default, deserialize_with = "null_default")]
    pub filters: Vec<Filter>,
}

/// A `backendRefs` entry of a rule.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: String,
    pub port: Option<i32>,
    pub weight: Option<i32>,
    /// Its own filters (HTTPRoute, GRPCRoute).
    #[serde(default, deserialize_with = "null_default")]
    pub filters: Vec<Filter>,
}

/// A filter of a rule or of a backendRef: its `type` as written and the field that type names.
/// A GRPCRoute's filters have no redirect, rewrite or CORS policy (theirs stay None).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Filter {
    #[serde(rename = "type")]
    pub type_: String,
    pub request_header_modifier: Option<HeaderModifier>,
    pub response_header_modifier: Option<HeaderModifier>,
    pub request_mirror: Option<Mirror>,
    pub request_redirect: Option<Redirect>,
    pub url_rewrite: Option<Rewrite>,
    pub cors: Option<Cors>,
}

/// The `type` of a `RequestMirror` filter.
pub const REQUEST_MIRROR: &str = "RequestMirror";
/// The `type` of a `CORS` filter.
pub const CORS: &str = "CORS";

/// A `RequestHeaderModifier` or `ResponseHeaderModifier`.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
pub struct HeaderModifier {
    #[serde(default, deserialize_with = "null_default")]
    pub set: Vec<Header>,
    #[serde(default, deserialize_with = "null_default")]
    pub add: Vec<Header>,
    #[serde(default, deserialize_with = "null_default")]
    pub remove: Vec<String>,
}

/// A header of a modifier's `set` or `add` list.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// A `RequestMirror` filter.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirror {
    pub backend_ref: MirrorBackend,
    pub percent: Option<i32>,
    pub fraction: Option<Fraction>,
}

/// A mirror's `backendRef` (no weight, no filters).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
pub struct MirrorBackend {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: String,
    pub port: Option<i32>,
}

/// A mirror's `fraction`.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
pub struct Fraction {
    pub numerator: i32,
    pub denominator: Option<i32>,
}

/// A `RequestRedirect` filter's fields sluice checks the values of.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Redirect {
    pub hostname: Option<String>,
    pub path: Option<ReplacementPath>,
    pub port: Option<i32>,
    pub status_code: Option<i64>,
}

/// A `URLRewrite` filter's fields sluice checks the values of.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
pub struct Rewrite {
    pub hostname: Option<String>,
    pub path: Option<ReplacementPath>,
}

/// The path of a redirect or a rewrite.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplacementPath {
    pub replace_full_path: Option<String>,
    pub replace_prefix_match: Option<String>,
}

/// A `CORS` filter's lists and `maxAge`.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cors {
    #[serde(default, deserialize_with = "null_default")]
    pub allow_origins: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub allow_methods: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub allow_headers: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub expose_headers: Vec<String>,
    pub max_age: Option<i32>,
}

/// A list or object written as `null` reads as absent (empty).
fn null_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use gateway_api::apis::experimental::httproutes::HttpRoute;
    use gateway_api::apis::experimental::tcproutes::TcpRoute;
    use gateway_api::apis::standard::grpcroutes::GrpcRoute;

    use super::*;

    fn yaml<T: DeserializeOwned>(text: &str) -> T {
        serde_norway::from_str(text).expect("test object")
    }

    #[test]
    fn an_httproute_and_a_grpcroute_read_as_the_same_shape() {
        let spec = r#"
spec:
  parentRefs: [{name: gw, sectionName: web, port: 80}]
  hostnames: [a.example.com]
  rules:
  - name: one
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: X-A, value: "1"}], remove: [X-B]}
    - type: RequestMirror
      requestMirror: {backendRef: {name: shadow, port: 8080}, fraction: {numerator: 1, denominator: 4}}
    backendRefs:
    - name: api
      port: 80
      weight: 3
      filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: X-C, value: c}]}}]
"#;
        let head = "apiVersion: gateway.networking.k8s.io/v1\nmetadata: {name: r, namespace: ns}\n";
        let http: HttpRoute = yaml(&format!("{head}kind: HTTPRoute\n{spec}"));
        let grpc: GrpcRoute = yaml(&format!("{head}kind: GRPCRoute\n{spec}"));
        let a = RouteSpec::read(&http.spec).expect("http");
        let b = RouteSpec::read(&grpc.spec).expect("grpc");
        assert_eq!(a, b);
        assert_eq!(a.parent_refs[0].section_name.as_deref(), Some("web"));
        assert_eq!(a.rules[0].name.as_deref(), Some("one"));
        let f = &a.rules[0].filters;
        assert_eq!(
            f[0].request_header_modifier.as_ref().unwrap().remove,
            ["X-B"]
        );
        let m = f[1].request_mirror.as_ref().expect("mirror");
        assert_eq!(
            (m.backend_ref.name.as_str(), m.backend_ref.port),
            ("shadow", Some(8080))
        );
        assert_eq!(
            m.fraction.as_ref().map(|f| (f.numerator, f.denominator)),
            Some((1, Some(4)))
        );
        let be = &a.rules[0].backend_refs[0];
        assert_eq!((be.name.as_str(), be.weight), ("api", Some(3)));
        let add = &be.filters[0].response_header_modifier.as_ref().unwrap().add;
        assert_eq!((add[0].name.as_str(), add[0].value.as_str()), ("X-C", "c"));
    }

    #[test]
    fn a_tcproute_has_parents_and_backends_only() {
        let r: TcpRoute = yaml(
            "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TCPRoute\nmetadata: {name: t}\nspec:\n  parentRefs: [{name: gw}]\n  rules: [{backendRefs: [{name: db, port: 5432}]}]\n",
        );
        let s = RouteSpec::read(&r.spec).expect("tcp");
        assert!(s.hostnames.is_empty());
        assert_eq!(s.rules[0].backend_refs[0].port, Some(5432));
        assert!(s.rules[0].filters.is_empty());
    }

    #[test]
    fn null_lists_read_as_empty() {
        let s: RouteSpec = serde_json::from_str(
            r#"{"parentRefs":null,"rules":[{"backendRefs":null,"filters":null}]}"#,
        )
        .expect("nulls");
        assert!(s.parent_refs.is_empty());
        assert!(s.rules[0].backend_refs.is_empty() && s.rules[0].filters.is_empty());
    }
}
