//! The rules of the API server for the parts of a Service sluice reads (`core/v1` Service): its
//! name, type, ports and ExternalName. `sluice validate` applies them so that a manifest it passes
//! is not refused by `kubectl apply` for a reason sluice could have seen. The webhook is not
//! registered for Services (the API server checks them itself).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::common::{validate_dns1035_label, validate_dns1123_label, validate_dns1123_subdomain};
use super::ingress::validate_iana_svc_name;
use super::{FieldError, Verdict, quote};

const TYPES: [&str; 4] = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];

/// The API server's rules for a Service, as far as sluice reads it.
pub fn validate_service(o: &Service) -> Verdict {
    let mut v = Verdict::default();
    if let Some(name) = o.metadata.name.as_deref() {
        push(
            &mut v,
            validate_dns1035_label("metadata.name", name, "Service"),
        );
    }
    let Some(spec) = o.spec.as_ref() else {
        v.error(FieldError::required(
            "spec",
            "a Service has a spec with its ports",
        ));
        return v;
    };
    let ports = spec.ports.as_deref().unwrap_or(&[]);
    validate_kind(spec, ports, &mut v);
    let mut seen = SeenPorts::default();
    for (i, p) in ports.iter().enumerate() {
        validate_port(
            &format!("spec.ports[{i}]"),
            p,
            ports.len(),
            &mut seen,
            &mut v,
        );
    }
    v
}

/// Checks the Service's type and what that type asks for: an ExternalName Service names a DNS
/// name; any other type lists at least one port unless it is headless (`clusterIP: None`).
fn validate_kind(spec: &ServiceSpec, ports: &[ServicePort], v: &mut Verdict) {
    let type_ = spec.type_.as_deref().unwrap_or("ClusterIP");
    if !TYPES.contains(&type_) {
        v.error(FieldError::invalid(
            "spec.type",
            type_,
            "must be one of \"ClusterIP\", \"NodePort\", \"LoadBalancer\", \"ExternalName\"",
        ));
    }
    let headless = spec.cluster_ip.as_deref() == Some("None");
    if type_ == "ExternalName" {
        match spec.external_name.as_deref().filter(|n| !n.is_empty()) {
            None => v.error(FieldError::required(
                "spec.externalName",
                "a Service of type ExternalName names the DNS name it stands for",
            )),
            Some(name) => push(
                v,
                validate_dns1123_subdomain(
                    "spec.externalName",
                    name.strip_suffix('.').unwrap_or(name),
                    "DNS",
                ),
            ),
        }
    } else if ports.is_empty() && !headless {
        v.error(FieldError::required(
            "spec.ports",
            "list at least one port (only a headless Service, clusterIP: None, may have none)",
        ));
    }
}

/// The port names and (port, protocol) pairs of the ports checked so far, each unique in a
/// Service.
#[derive(Default)]
struct SeenPorts<'a> {
    names: HashSet<&'a str>,
    pairs: HashSet<(i32, &'a str)>,
}

/// Checks one entry of `spec.ports` (at `at`): its name, port number, protocol and target port,
/// and that its name and its port with protocol were not listed before it.
fn validate_port<'a>(
    at: &str,
    p: &'a ServicePort,
    count: usize,
    seen: &mut SeenPorts<'a>,
    v: &mut Verdict,
) {
    match p.name.as_deref().filter(|n| !n.is_empty()) {
        None if count > 1 => v.error(FieldError::required(
            format!("{at}.name"),
            "a Service with several ports names each of them",
        )),
        None => {}
        Some(name) => {
            push(
                v,
                validate_dns1123_label(format!("{at}.name"), name, "port"),
            );
            if !seen.names.insert(name) {
                v.error(FieldError::invalid(
                    format!("{at}.name"),
                    name,
                    "is the name of an earlier port; port names are unique",
                ));
            }
        }
    }
    if !(1..=65535).contains(&p.port) {
        v.error(FieldError::invalid(
            format!("{at}.port"),
            &p.port.to_string(),
            "must be a port number from 1 to 65535",
        ));
    }
    validate_protocol(at, p, seen, v);
    validate_target_port(at, p.target_port.as_ref(), v);
}

/// Checks a port's protocol (TCP when unset) and that its port with that protocol is new.
fn validate_protocol<'a>(at: &str, p: &'a ServicePort, seen: &mut SeenPorts<'a>, v: &mut Verdict) {
    let protocol = p.protocol.as_deref().unwrap_or("TCP");
    if !PROTOCOLS.contains(&protocol) {
        v.error(FieldError::invalid(
            format!("{at}.protocol"),
            protocol,
            "must be one of \"TCP\", \"UDP\", \"SCTP\"",
        ));
    } else if !seen.pairs.insert((p.port, protocol)) {
        v.error(FieldError::spec(
            format!("{at}.port"),
            format!(
                "port {} with protocol {} is listed twice; each port and protocol is unique",
                p.port,
                quote(protocol)
            ),
        ));
    }
}

/// Checks a port's `targetPort`: a port number, or the IANA name of a container port.
fn validate_target_port(at: &str, target: Option<&IntOrString>, v: &mut Verdict) {
    match target {
        // 0 is "not set": the API server defaults it to the port.
        Some(IntOrString::Int(n)) if !(0..=65535).contains(n) => v.error(FieldError::invalid(
            format!("{at}.targetPort"),
            &n.to_string(),
            "must be a port number from 1 to 65535, or the name of a container port",
        )),
        Some(IntOrString::String(name)) => {
            push(v, validate_iana_svc_name(format!("{at}.targetPort"), name))
        }
        _ => {}
    }
}

fn push(v: &mut Verdict, r: Result<(), FieldError>) {
    if let Err(e) = r {
        v.error(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(yaml: &str) -> Vec<String> {
        let s: Service = serde_norway::from_str(yaml).unwrap();
        validate_service(&s)
            .errors
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_plain_service_passes() {
        assert!(
            errors("metadata: {name: web}\nspec: {ports: [{name: http, port: 80, targetPort: 8080}, {name: https, port: 443, targetPort: https}]}\n").is_empty()
        );
        assert!(errors("metadata: {name: db}\nspec: {clusterIP: None}\n").is_empty());
        assert!(
            errors("metadata: {name: ext}\nspec: {type: ExternalName, externalName: api.example.com.}\n").is_empty()
        );
    }

    #[test]
    fn what_the_api_server_refuses_is_refused_naming_the_field() {
        let cases = [
            (
                "metadata: {name: Web}\nspec: {ports: [{port: 80}]}\n",
                "metadata.name: \"Web\"",
            ),
            (
                "metadata: {name: web}\nspec: {ports: []}\n",
                "spec.ports: is required",
            ),
            (
                "metadata: {name: web}\nspec: {ports: [{port: 80}, {port: 81}]}\n",
                "spec.ports[0].name: is required",
            ),
            (
                "metadata: {name: web}\nspec: {ports: [{name: a, port: 80}, {name: a, port: 81}]}\n",
                "spec.ports[1].name: \"a\" is the name of an earlier port",
            ),
            (
                "metadata: {name: web}\nspec: {ports: [{name: Http, port: 80}]}\n",
                "spec.ports[0].name: \"Http\"",
            ),
            (
                "metadata: {name: web}\nspec: {ports: [{port: 0}]}\n",
                "spec.ports[0].port: \"0\"",
            ),
            (
                "metadata: {name: web}\nspec: {ports: [{port: 70000}]}\n",
                "spec.ports[0].port: \"70000\"",
            ),
            (
                "metadata: {name: web}\nspec: {ports: [{port: 80, protocol: HTTP}]}\n",
                "spec.ports[0].protocol: \"HTTP\"",
            ),
            (
                "metadata: {name: web}\nspec: {ports: [{name: a, port: 80}, {name: b, port: 80}]}\n",
                "spec.ports[1].port: port 80 with protocol \"TCP\" is listed twice",
            ),
            (
                "metadata: {name: web}\nspec: {ports: [{port: 80, targetPort: http_port}]}\n",
                "spec.ports[0].targetPort: \"http_port\"",
            ),
            (
                "metadata: {name: web}\nspec: {ports: [{port: 80, targetPort: 65536}]}\n",
                "spec.ports[0].targetPort: \"65536\"",
            ),
            (
                "metadata: {name: web}\nspec: {type: Internal, ports: [{port: 80}]}\n",
                "spec.type: \"Internal\"",
            ),
            (
                "metadata: {name: ext}\nspec: {type: ExternalName}\n",
                "spec.externalName: is required",
            ),
            (
                "metadata: {name: ext}\nspec: {type: ExternalName, externalName: API.example.com}\n",
                "spec.externalName: \"API.example.com\"",
            ),
        ];
        for (yaml, want) in cases {
            let got = errors(yaml);
            assert!(
                got.iter().any(|e| e.starts_with(want)),
                "{yaml}: want {want:?}, got {got:?}"
            );
        }
    }

    #[test]
    fn a_port_is_checked_against_the_ports_before_it() {
        let port = |yaml: &str| -> ServicePort { serde_norway::from_str(yaml).unwrap() };
        let (a, b) = (
            port("{name: a, port: 80}"),
            port("{name: a, port: 80, protocol: TCP}"),
        );
        let mut seen = SeenPorts::default();
        let mut v = Verdict::default();
        validate_port("p[0]", &a, 2, &mut seen, &mut v);
        assert!(v.allowed(), "{:?}", v.errors);
        validate_port("p[1]", &b, 2, &mut seen, &mut v);
        let e: Vec<String> = v.errors.iter().map(ToString::to_string).collect();
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].starts_with("p[1].name: \"a\" is the name of an earlier port"));
        assert!(e[1].starts_with("p[1].port: port 80 with protocol \"TCP\" is listed twice"));
    }

    #[test]
    fn a_target_port_of_zero_is_unset() {
        let mut v = Verdict::default();
        validate_target_port("t", Some(&IntOrString::Int(0)), &mut v);
        validate_target_port("t", None, &mut v);
        assert!(v.allowed());
        validate_target_port("t", Some(&IntOrString::Int(-1)), &mut v);
        assert_eq!(v.errors.len(), 1);
    }
}
