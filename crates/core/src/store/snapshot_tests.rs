//! The snapshot: inserting, removing and comparing objects, and the Service index it keeps.

use super::*;
use serde_json::json;

fn slice(v: serde_json::Value) -> EndpointSlice {
    serde_json::from_value(v).unwrap()
}

#[test]
fn keys_of_one_kind_in_one_namespace_share_its_text() {
    let svc = |ns: &str, name: &str| {
        // Each object's namespace a string of its own, as a watch delivers them.
        AnyObject::Service(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}})).unwrap(),
        ))
    };
    let mut s = Snapshot::default();
    for (ns, name) in [("shop", "b"), ("shop", "a"), ("blog", "a"), ("shop", "c")] {
        s.insert(svc(ns, name));
    }
    // Replaced, then removed and added again: still one text per namespace.
    s.insert(svc("shop", "a"));
    s.remove(crate::api::Kind::Service, &ObjKey::new("shop", "b"));
    s.insert(svc("shop", "b"));
    let keys: Vec<&ObjKey> = s.services.keys().collect();
    let names: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    assert_eq!(names, ["blog/a", "shop/a", "shop/b", "shop/c"]);
    for k in &keys[2..] {
        assert!(Arc::ptr_eq(&k.namespace, &keys[1].namespace), "{k}");
    }
    assert!(!Arc::ptr_eq(&keys[0].namespace, &keys[1].namespace));
    // Lookups by a key made elsewhere find them.
    assert!(s.services.contains_key(&ObjKey::new("shop", "c")));
}

#[test]
fn a_slice_is_kept_as_what_routing_reads() {
    let full = slice(json!({
        "metadata": {"name": "web-x1", "namespace": "shop",
                     "labels": {"kubernetes.io/service-name": "web", "other": "x"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}, {"port": 9090}, {"name": "big", "port": 70000},
                  {"name": "zero", "port": 0}],
        "endpoints": [
            {"addresses": ["10.0.0.1"], "conditions": {"ready": true, "serving": true},
             "nodeName": "node-1", "zone": "a",
             "targetRef": {"kind": "Pod", "name": "web-1", "namespace": "shop"}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
            {"addresses": ["10.0.0.3", "10.0.0.4"]},
            {"addresses": ["10.0.0.5"], "conditions": {}},
        ],
    }));
    let kept = SliceEndpoints::from(&full);
    assert_eq!(kept.service.as_deref(), Some("web"));
    assert_eq!(kept.port("http"), Some(8080));
    assert_eq!(kept.port(""), Some(9090));
    assert_eq!(kept.port("big"), None, "out of range");
    assert_eq!(kept.port("zero"), None, "port 0");
    assert_eq!(kept.port("missing"), None);
    let ready: Vec<String> = kept.ready.iter().map(|a| a.to_string()).collect();
    assert_eq!(ready, ["10.0.0.1", "10.0.0.3", "10.0.0.4", "10.0.0.5"]);

    // What routing does not read makes no difference.
    let mut moved = full.clone();
    moved.endpoints[0].node_name = Some("node-2".into());
    moved.endpoints[0].zone = Some("b".into());
    moved.endpoints[0].conditions.as_mut().unwrap().serving = Some(false);
    moved.metadata.labels.as_mut().unwrap().remove("other");
    assert_eq!(SliceEndpoints::from(&moved), kept);
    // Nor does the order of the endpoints, or an address listed twice.
    let mut reordered = full.clone();
    reordered.endpoints.reverse();
    let twice = reordered.endpoints[0].clone();
    reordered.endpoints.push(twice);
    assert_eq!(SliceEndpoints::from(&reordered), kept);

    let bare = SliceEndpoints::from(&slice(json!({"metadata": {}, "addressType": "IPv4",
                                                   "endpoints": []})));
    assert_eq!(bare, SliceEndpoints::default());
}

#[test]
fn a_ca_bundle_is_kept_once_its_certificates_parse() {
    let secret = |data: serde_json::Value| -> SecretData {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": "ca", "namespace": "web"},
            "stringData": data,
        }))
        .unwrap();
        SecretData::from(&s)
    };
    let a = rcgen::generate_simple_self_signed(vec!["a.example.com".into()]).unwrap();
    let b = rcgen::generate_simple_self_signed(vec!["b.example.com".into()]).unwrap();
    let two = format!("{}{}", a.cert.pem(), b.cert.pem());
    let kept = secret(json!({"ca.crt": two}));
    assert_eq!(kept.ca, CaBundle::Usable(two.clone().into()));
    // A CA-only Secret has no certificate to serve, and needs none.
    assert_eq!(kept.tls, TlsSecretData::Unusable("it has no tls.crt"));
    let framed = "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n";
    for (ca, what) in [
        (
            format!("{}{framed}", a.cert.pem()),
            "ca.crt holds a certificate that is not a valid X.509 certificate",
        ),
        ("no PEM here".to_string(), "ca.crt holds no PEM certificate"),
    ] {
        assert_eq!(secret(json!({"ca.crt": ca})).ca, CaBundle::Unusable(what));
    }
    assert_eq!(
        secret(json!({"tls.crt": a.cert.pem()})).ca,
        CaBundle::Unusable("it has no ca.crt")
    );
}

#[test]
fn a_tls_secret_is_kept_once_its_certificate_and_key_are_checked() {
    let secret = |crt: &str, key: &str| -> TlsSecretData {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": "tls", "namespace": "web"},
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": crt, "tls.key": key},
        }))
        .unwrap();
        TlsSecretData::from(&s)
    };
    let a = rcgen::generate_simple_self_signed(vec!["a.example.com".into()]).unwrap();
    let b = rcgen::generate_simple_self_signed(vec!["b.example.com".into()]).unwrap();
    let (a_crt, a_key) = (a.cert.pem(), a.signing_key.serialize_pem());
    let b_key = b.signing_key.serialize_pem();
    assert_eq!(
        secret(&a_crt, &a_key),
        TlsSecretData::Usable {
            cert_pem: a_crt.clone().into(),
            key_pem: a_key.clone().into()
        }
    );
    assert_eq!(
        secret(&a_crt, &b_key),
        TlsSecretData::Unusable(
            "tls.key is not the private key of the first certificate in tls.crt"
        )
    );
    // PEM framing around bytes that are no certificate.
    let framed = "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n";
    assert_eq!(
        secret(framed, &a_key),
        TlsSecretData::Unusable(
            "the first certificate in tls.crt is not a valid X.509 certificate"
        )
    );
    assert_eq!(
        secret("not a certificate", &a_key),
        TlsSecretData::Unusable("tls.crt holds no PEM certificate")
    );
    assert_eq!(
        secret(&a_crt, &a_crt),
        TlsSecretData::Unusable("tls.key holds no PEM private key")
    );
    let missing: Secret = serde_json::from_value(json!({
        "metadata": {"name": "tls", "namespace": "web"},
        "data": {"tls.key": "a2V5"},
    }))
    .unwrap();
    assert_eq!(
        TlsSecretData::from(&missing),
        TlsSecretData::Unusable("it has no tls.crt")
    );
}

#[test]
fn a_slice_keeps_ip_addresses_only() {
    let ready = |v: serde_json::Value| -> Vec<String> {
        SliceEndpoints::from(&slice(v))
            .ready
            .iter()
            .map(|a| a.to_string())
            .collect()
    };
    let v6 = ready(json!({"metadata": {}, "addressType": "IPv6",
                           "endpoints": [{"addresses": ["fd00::1", "2001:db8::a"]}]}));
    // Kept sorted as numbers, whatever order the slice lists them in.
    assert_eq!(v6, ["2001:db8::a", "fd00::1"]);
    // Hostnames (an FQDN slice) are not endpoints Envoy accepts.
    let fqdn = ready(json!({"metadata": {}, "addressType": "FQDN",
                             "endpoints": [{"addresses": ["db.example.com"]}]}));
    assert!(fqdn.is_empty(), "{fqdn:?}");
    // Whatever else a slice holds that is not an IP address is left out, the rest kept.
    let mixed = ready(json!({"metadata": {}, "addressType": "IPv4",
                              "endpoints": [{"addresses": ["10.0.0.1"]},
                                            {"addresses": ["10.0.0.300", " 10.0.0.2", ""]},
                                            {"addresses": ["10.0.0.3"]}]}));
    assert_eq!(mixed, ["10.0.0.1", "10.0.0.3"]);
    // Addresses are kept parsed: a cluster's endpoints are ordered as numbers, and two
    // spellings of one IPv6 address are one endpoint in its canonical form.
    let endpoints = |family: &str, addresses: &[&str]| -> Vec<String> {
        let s = SliceEndpoints::from(&slice(json!({"metadata": {}, "addressType": family,
            "endpoints": [{"addresses": addresses}], "ports": [{"name": "", "port": 80}]})));
        let eps = slice_endpoints([&s], "");
        eps.iter().map(|e| e.address.to_string()).collect()
    };
    let spelled = endpoints("IPv6", &["2001:DB8:0::1", "fd00::1", "2001:db8::1"]);
    assert_eq!(spelled, ["2001:db8::1", "fd00::1"]);
    let numbered = endpoints("IPv4", &["10.0.0.10", "10.0.0.9", "9.0.0.1"]);
    assert_eq!(numbered, ["9.0.0.1", "10.0.0.9", "10.0.0.10"]);
}

#[test]
fn a_service_is_kept_as_what_routing_reads() {
    let svc = |v: serde_json::Value| -> Service { serde_json::from_value(v).unwrap() };
    let full = svc(json!({
        "metadata": {"name": "web", "namespace": "shop", "labels": {"tier": "web"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                           {"port": 9000, "protocol": "UDP"}]},
    }));
    let kept = ServicePorts::from(&full);
    assert!(!kept.external_name);
    assert_eq!(
        kept.ports
            .iter()
            .map(|p| (p.slice_port_name(), p.port))
            .collect::<Vec<_>>(),
        [("http", 80), ("", 9000)]
    );
    assert_eq!(kept.ports[1].name, None);
    let mut relabelled = full.clone();
    relabelled.metadata.labels = None;
    relabelled.spec.as_mut().unwrap().cluster_ip = Some("10.96.0.11".into());
    assert_eq!(ServicePorts::from(&relabelled), kept);

    let external = svc(json!({"metadata": {"name": "ext"},
                              "spec": {"type": "ExternalName", "externalName": "db.example.com"}}));
    assert_eq!(
        ServicePorts::from(&external),
        ServicePorts {
            external_name: true,
            ports: Box::new([]),
        }
    );
    assert_eq!(
        ServicePorts::from(&svc(json!({"metadata": {}}))),
        ServicePorts::default()
    );
}

#[test]
fn the_snapshot_stores_slices_reduced_and_finds_endpoint_only_changes() {
    let mk = |addr: &str, zone: &str| {
        AnyObject::EndpointSlice(Arc::new(slice(json!({
            "metadata": {"name": "web-x1", "namespace": "shop",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": [addr], "zone": zone}],
        }))))
    };
    let a = Snapshot::from_objects([mk("10.0.0.1", "a")]);
    let key = ObjKey::new("shop", "web-x1");
    assert_eq!(a.endpoint_slices[&key].ready[0].to_string(), "10.0.0.1");

    let mut b = a.clone();
    b.insert(mk("10.0.0.1", "b"));
    assert_eq!(
        a.endpoint_only_changes(&b),
        Some(EndpointChanges::default())
    );

    b.insert(mk("10.0.0.9", "b"));
    let changes = a.endpoint_only_changes(&b).unwrap();
    assert_eq!(changes.slices, vec![key.clone()]);
    assert_eq!(
        changes.services.into_iter().collect::<Vec<_>>(),
        vec![ObjKey::new("shop", "web")]
    );
    assert!(b.remove(crate::api::Kind::EndpointSlice, &key));
    assert!(b.endpoint_slices.is_empty());
}
