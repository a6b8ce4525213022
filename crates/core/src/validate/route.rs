//! Single-object rules of Route `contour.heptio.com/v1alpha1` (seed 004).

use std::collections::HashMap;

use super::common::{validate_dns1035_label, validate_hostname, validate_path};
use super::ingressroute::{validate_health_check, validate_port};
use super::{FieldError, Verdict};
use crate::api::route_v1alpha1::Route;
use crate::route_match::PathMatch;

/// The single-object rules of a Route `contour.heptio.com/v1alpha1`.
pub fn validate_route(o: &Route) -> Verdict {
    let mut v = Verdict::default();
    let spec = &o.spec;
    if let Err(e) = validate_hostname("spec.host", &spec.host, false) {
        v.error(e);
    }
    if let Some(h) = &spec.lb_health_check {
        validate_health_check(&mut v, "spec.lbHealthCheck", h);
    }
    if spec.routes.is_empty() {
        v.error(FieldError::spec(
            "spec.routes",
            "must hold at least one route",
        ));
    }
    let mut seen: HashMap<PathMatch, usize> = HashMap::new();
    for (i, r) in spec.routes.iter().enumerate() {
        let at = format!("spec.routes[{i}]");
        let prefix_path = format!("{at}.pathPrefix");
        match validate_path(&prefix_path, &r.path_prefix, true) {
            Err(e) => v.error(e),
            Ok(()) => {
                if let Some(first) = seen.insert(PathMatch::prefix(&r.path_prefix), i) {
                    v.error(FieldError::invalid(
                        &prefix_path,
                        &r.path_prefix,
                        format!("is the same prefix as spec.routes[{first}]; a prefix may appear once per Route"),
                    ));
                }
            }
        }
        if r.upstreams.is_empty() {
            v.error(FieldError::spec(
                format!("{at}.upstreams"),
                "must hold at least one upstream",
            ));
        }
        super::ingressroute::check_service_count(
            &mut v,
            format_args!("{at}.upstreams"),
            r.upstreams.len(),
        );
        for (j, u) in r.upstreams.iter().enumerate() {
            let up = format!("{at}.upstreams[{j}]");
            if let Err(e) =
                validate_dns1035_label(format_args!("{up}.serviceName"), &u.service_name, "Service")
            {
                v.error(e);
            }
            if let Err(e) = validate_port(format_args!("{up}.servicePort"), u.service_port) {
                v.error(e);
            }
            if let Some(w) = u.weight.filter(|w| *w > 100) {
                v.error(FieldError::spec(
                    format!("{up}.weight"),
                    format!("{w} must be between 0 and 100 (a percentage of the route's traffic)"),
                ));
            }
            if let Some(h) = &u.lb_health_check {
                validate_health_check(&mut v, &format!("{up}.lbHealthCheck"), h);
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::route_v1alpha1::RouteSpec;

    fn errors(yaml: &str) -> Vec<String> {
        let spec: RouteSpec = serde_norway::from_str(yaml).expect("test spec parses");
        validate_route(&Route::new("r", spec))
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn seed_example_is_allowed() {
        let seed = r#"
host: heptio.com
strategy: RoundRobin
routes:
- pathPrefix: /
  upstreams:
  - lbHealthCheck: {intervalSeconds: 1, path: /status}
    serviceName: www
    servicePort: 8080
  - lbHealthCheck: {intervalSeconds: 1, path: /status}
    serviceName: canarywww
    servicePort: 8080
- pathPrefix: /ticker
  upstreams:
  - {serviceName: tickersvc, servicePort: 80}
"#;
        assert_eq!(errors(seed), Vec::<String>::new());
    }

    #[test]
    fn host() {
        assert_eq!(
            errors(
                "host: heptio.com:80\nroutes: [{pathPrefix: /, upstreams: [{serviceName: a, servicePort: 80}]}]"
            ),
            vec![
                "spec.host: \"heptio.com:80\" must be a DNS name like \"www.example.com\" (lowercase letters, digits, '-' and '.'; no wildcard, no port, no IP address)"
            ]
        );
    }

    #[test]
    fn routes_and_prefixes() {
        assert_eq!(
            errors("host: a.com\nroutes: []"),
            vec!["spec.routes: must hold at least one route"]
        );
        assert_eq!(
            errors(
                "host: a.com\nroutes: [{pathPrefix: ticker, upstreams: [{serviceName: a, servicePort: 80}]}]"
            ),
            vec!["spec.routes[0].pathPrefix: \"ticker\" must start with \"/\""]
        );
        assert_eq!(
            errors(
                "host: a.com\nroutes: [{pathPrefix: /t, upstreams: [{serviceName: a, servicePort: 80}]}, {pathPrefix: /t/, upstreams: [{serviceName: b, servicePort: 80}]}]"
            ),
            vec![
                "spec.routes[1].pathPrefix: \"/t/\" is the same prefix as spec.routes[0]; a prefix may appear once per Route"
            ]
        );
        assert_eq!(
            errors("host: a.com\nroutes: [{pathPrefix: /, upstreams: []}]"),
            vec!["spec.routes[0].upstreams: must hold at least one upstream"]
        );
        let upstreams = vec!["{serviceName: a, servicePort: 80, weight: 1}"; 129].join(", ");
        assert_eq!(
            errors(&format!(
                "host: a.com\nroutes: [{{pathPrefix: /, upstreams: [{upstreams}]}}]"
            )),
            vec![
                "spec.routes[0].upstreams: holds 129 services; a route may name at most 128 (list each Service once, with its weight)"
            ]
        );
    }

    #[test]
    fn upstreams() {
        assert_eq!(
            errors(
                "host: a.com\nroutes: [{pathPrefix: /, upstreams: [{serviceName: Www, servicePort: 0, weight: 101, lbHealthCheck: {path: status, unhealthyThresholdCount: 0}}]}]"
            ),
            vec![
                "spec.routes[0].upstreams[0].serviceName: \"Www\" must be the name of a Service in the same namespace: lowercase letters, digits and '-', starting with a letter, at most 63 characters",
                "spec.routes[0].upstreams[0].servicePort: 0 must be a port number between 1 and 65535",
                "spec.routes[0].upstreams[0].weight: 101 must be between 0 and 100 (a percentage of the route's traffic)",
                "spec.routes[0].upstreams[0].lbHealthCheck.path: \"status\" must start with \"/\"",
                "spec.routes[0].upstreams[0].lbHealthCheck.unhealthyThresholdCount: 0 must be between 1 and 1000",
            ]
        );
        assert_eq!(
            errors(
                "host: a.com\nlbHealthCheck: {path: /s, timeoutSeconds: 0}\nroutes: [{pathPrefix: /, upstreams: [{serviceName: a, servicePort: 80}]}]"
            ),
            vec!["spec.lbHealthCheck.timeoutSeconds: 0 must be between 1 and 86400 seconds"]
        );
    }
}
