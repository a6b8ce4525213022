//! The Gateway API features sluice serves: what an accepted GatewayClass of sluice's lists in
//! `status.supportedFeatures`, by the names of the Gateway API's conformance profiles
//! (`sigs.k8s.io/gateway-api/pkg/features`). The upstream suite runs the tests of exactly these
//! (docs/conformance.md).

/// The features of the Gateway API's conformance profiles sluice serves, by their names there
/// (`sigs.k8s.io/gateway-api/pkg/features`), in alphabetical order: what an accepted
/// GatewayClass's `status.supportedFeatures` lists. Each is in docs/gateway-api.md and tested
/// there; the Gateway API has no feature name for TCPRoute.
pub const SUPPORTED_FEATURES: [&str; 39] = [
    "BackendTLSPolicy",
    "BackendTLSPolicySANValidation",
    "GRPCRoute",
    "GRPCRouteNamedRouteRule",
    "Gateway",
    "GatewayBackendClientCertificate",
    "GatewayHTTPListenerIsolation",
    "HTTPRoute",
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute307RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteBackendTimeout",
    "HTTPRouteCORS",
    "HTTPRouteDestinationPortMatching",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteNamedRouteRule",
    "HTTPRouteParentRefPort",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteRetry",
    "HTTPRouteRetryBackendTimeout",
    "HTTPRouteRetryConnectionError",
    "HTTPRouteSchemeRedirect",
    "ListenerSet",
    "ReferenceGrant",
    "TLSRoute",
    "TLSRouteModeMixed",
    "TLSRouteModeTerminate",
];

/// The features sluice serves when Gateways have addresses of their own (`--gateway-addresses`):
/// a Gateway asks for one (`spec.addresses`, with or without a value), a listener on port
/// 8080 is a port Envoy listens on at the Gateway's address, a request whose Host belongs to
/// another HTTPS listener of the port than the one its TLS SNI picked gets 421, and a port's
/// HTTPS listeners can validate client certificates (`spec.tls.frontend`,
/// [`super::frontend_tls`]), the port being an Envoy listener of the Gateway's alone.
pub const OWN_ADDRESS_FEATURES: [&str; 6] = [
    "GatewayAddressEmpty",
    "GatewayFrontendClientCertificateValidation",
    "GatewayFrontendClientCertificateValidationInsecureFallback",
    "GatewayHTTPSListenerDetectMisdirectedRequests",
    "GatewayPort8080",
    "GatewayStaticAddresses",
];

/// What an accepted GatewayClass's `status.supportedFeatures` lists with these options, in
/// alphabetical order.
pub fn supported_features(options: &super::Options) -> Vec<&'static str> {
    let mut all = SUPPORTED_FEATURES.to_vec();
    if options.gateway_addresses.is_some() {
        all.extend(OWN_ADDRESS_FEATURES);
    }
    if options.gateway_services {
        all.push("GatewayInfrastructurePropagation");
    }
    all.sort_unstable();
    all
}
