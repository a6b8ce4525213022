//! The builder's backends: Service ports resolved to clusters (with their TLS settings), and the
//! Secrets and CA bundles those clusters and the hosts' TLS use.

use super::*;

impl<'a> Builder<'a> {
    /// Resolves a Service port to a cluster (created on first use, endpoints from EndpointSlices).
    /// The error is the referring object's problem, with no path (the caller knows the field).
    pub fn cluster_for(&mut self, b: &BackendRef<'_>) -> Result<ClusterName, FieldError> {
        self.cluster_verifying(b, None)
    }

    /// [`Builder::cluster_for`], whose TLS backend's certificate Envoy verifies with
    /// `validation` (its CA secret resolved by [`Builder::ca_secret`]); without it, the
    /// certificate of a TLS backend is not verified. Ignored for the other protocols.
    pub fn cluster_verifying(
        &mut self,
        b: &BackendRef<'_>,
        validation: Option<&UpstreamValidation>,
    ) -> Result<ClusterName, FieldError> {
        self.cluster_tls(b, validation, None)
    }

    /// [`Builder::cluster_verifying`], with the client certificate Envoy presents to a TLS
    /// backend (`client_secret`, a key into the secrets table resolved by
    /// [`Builder::tls_secret`]); None: it presents none.
    pub fn cluster_tls(
        &mut self,
        b: &BackendRef<'_>,
        validation: Option<&UpstreamValidation>,
        client_secret: Option<&str>,
    ) -> Result<ClusterName, FieldError> {
        let tls = matches!(b.protocol, UpstreamProtocol::Https | UpstreamProtocol::H2);
        let client_secret = client_secret.filter(|_| tls);
        let validation = validation.filter(|_| tls);
        let sp = self.service_port(b)?;
        let health_check = b.health_check.map(health_check_policy);
        let name = &mut self.cluster_name;
        write_cluster_name(
            name,
            b.namespace,
            b.service,
            sp.port,
            b,
            health_check.as_ref(),
            validation,
            client_secret,
        );
        // One hash of the name, whether the cluster is new or not.
        match self.clusters.raw_entry_mut().from_key(name.as_str()) {
            RawEntryMut::Occupied(e) => Ok(e.key().clone()),
            RawEntryMut::Vacant(e) => {
                let name = ClusterName::from(name.as_str());
                let upstream_tls = tls.then(|| {
                    Arc::new(UpstreamTls {
                        sni: match validation {
                            Some(v) => v.subject_name.clone(),
                            None => format!("{}.{}.svc", b.service, b.namespace),
                        },
                        validation: validation.cloned(),
                        client_secret: client_secret.map(str::to_string),
                    })
                });
                if validation.is_some() || client_secret.is_some() {
                    self.verifying.push(name.clone());
                }
                let cluster = Cluster {
                    name: name.clone(),
                    service: ServiceSpan::new(b.namespace, b.service),
                    port: sp.port,
                    protocol: b.protocol,
                    lb: b.lb,
                    health_check: health_check.map(Box::new),
                    outlier_detection: b.outlier_detection.clone(),
                    upstream_tls,
                    endpoints: sp.endpoints.clone(),
                };
                e.insert(name.clone(), (Arc::new(cluster), false));
                Ok(name)
            }
        }
    }

    /// The Service port a backend names, with its endpoints; the status message when the
    /// Service, or that port of it, is not there (or not routable).
    fn service_port(&self, b: &BackendRef<'_>) -> Result<&'a PortEndpoints, FieldError> {
        let key = || ObjKey::new(b.namespace, b.service);
        let entry = self.backing.service_index().get(b.namespace, b.service);
        let Some((_, e)) = entry.filter(|(_, e)| e.service.is_some()) else {
            return Err(FieldError {
                path: String::new(),
                reason: reason::SERVICE_NOT_FOUND,
                message: format!("Service {:?} not found", key().to_string()),
            });
        };
        if e.is_external_name() {
            return Err(FieldError {
                path: String::new(),
                reason: reason::UNSUPPORTED_BACKEND,
                message: format!(
                    "Service {:?} is of type ExternalName, which sluice does not route to",
                    key().to_string()
                ),
            });
        }
        // A port by number is found in the entry alone; by name, in the Service's ports (the
        // entry's are in their order), which are read only then (a cache miss a backend).
        let service_ports = e.service.as_deref().map_or(&[][..], |s| &s.ports);
        let found = match b.port {
            PortRef::Number(n) => e.ports().iter().find(|p| p.port == n),
            PortRef::Name(n) => (service_ports.iter())
                .position(|p| p.name.as_deref() == Some(n))
                .and_then(|at| e.ports().get(at)),
        };
        found.ok_or_else(|| port_not_found(&key(), b.port, service_ports))
    }

    /// Resolves a TLS Secret to a key into the secrets table.
    pub fn tls_secret(&mut self, namespace: &str, name: &str) -> Result<String, FieldError> {
        // The id as `ObjKey`'s `Display` writes it, without the formatting machinery; the key
        // (two shared texts) only for a Secret this build has not resolved yet.
        let mut id = String::with_capacity(namespace.len() + 1 + name.len());
        if !namespace.is_empty() {
            id.push_str(namespace);
            id.push('/');
        }
        id.push_str(name);
        if self.secrets.contains_key(&id) {
            return Ok(id);
        }
        let key = ObjKey::new(namespace, name);
        let Some(secret) = self.backing.secrets.get(&key) else {
            return Err(FieldError {
                path: String::new(),
                reason: reason::SECRET_NOT_FOUND,
                message: format!("TLS Secret {id:?} not found"),
            });
        };
        let (cert, key_pem) = match &secret.tls {
            TlsSecretData::Usable { cert_pem, key_pem } => (cert_pem.clone(), key_pem.clone()),
            TlsSecretData::Unusable(what) => {
                return Err(FieldError {
                    path: String::new(),
                    reason: reason::SECRET_INVALID,
                    message: format!("Secret {id:?} is not a usable TLS certificate: {what}"),
                });
            }
        };
        self.secrets.insert(
            id.clone(),
            TlsSecret {
                name: id.clone(),
                kind: SecretKind::Certificate,
                cert_pem: cert,
                key_pem,
            },
        );
        Ok(id)
    }

    /// Adds CA certificates (PEM) to the secrets table under `id` (a BackendTLSPolicy's, from
    /// its ConfigMaps).
    pub(in crate::dag) fn trusted_ca(&mut self, id: &str, pem: Arc<str>) {
        let secret = TlsSecret {
            name: id.to_string(),
            kind: SecretKind::TrustedCa,
            cert_pem: pem,
            key_pem: Arc::from(""),
        };
        self.secrets.insert(id.to_string(), secret);
    }

    /// Resolves a TLS Secret Envoy presents to TLS backends as its client certificate to a key
    /// into the secrets table: `namespace/name/client`, apart from the id of the same Secret
    /// serving a listener. The error says why it does not resolve.
    pub(in crate::dag) fn client_certificate(
        &mut self,
        namespace: &str,
        name: &str,
    ) -> Result<String, String> {
        let id = format!("{namespace}/{name}/client");
        if self.secrets.contains_key(&id) {
            return Ok(id);
        }
        let key = ObjKey::new(namespace, name);
        let Some(secret) = self.backing.secrets.get(&key) else {
            return Err(format!(
                "Secret {:?} not found (sluice reads Secrets of type kubernetes.io/tls)",
                key.to_string()
            ));
        };
        let (cert_pem, key_pem) =
            crate::dag::backend_tls_state::usable_tls(&secret.tls).map_err(|what| {
                format!(
                    "Secret {:?} is not a usable TLS certificate: {what}",
                    key.to_string()
                )
            })?;
        let secret = TlsSecret {
            name: id.clone(),
            kind: SecretKind::ClientCertificate,
            cert_pem,
            key_pem,
        };
        self.secrets.insert(id.clone(), secret);
        Ok(id)
    }

    /// Resolves the CA certificates (`ca.crt`) of a Secret to a key into the secrets table
    /// ([`ca_secret_id`]). The error is the status message of the field naming the Secret.
    pub fn ca_secret(&mut self, namespace: &str, name: &str) -> Result<String, FieldError> {
        let id = ca_secret_id(namespace, name);
        if self.secrets.contains_key(&id) {
            return Ok(id);
        }
        let key = ObjKey::new(namespace, name);
        let Some(secret) = self.backing.secrets.get(&key) else {
            return Err(FieldError {
                path: String::new(),
                reason: reason::SECRET_NOT_FOUND,
                message: format!(
                    "CA Secret {:?} not found; create it in namespace {namespace:?} with the PEM certificates of the CA that signed the backend's certificate under ca.crt (in a cluster, sluice reads only Secrets of type kubernetes.io/tls, as cert-manager writes them)",
                    key.to_string()
                ),
            });
        };
        let pem = match &secret.ca {
            CaBundle::Usable(pem) => pem.clone(),
            CaBundle::Unusable(what) => {
                return Err(FieldError {
                    path: String::new(),
                    reason: reason::SECRET_INVALID,
                    message: format!(
                        "Secret {:?} holds no usable CA certificates ({what}); put the PEM certificates of the CA that signed the backend's certificate under ca.crt",
                        key.to_string()
                    ),
                });
            }
        };
        let secret = TlsSecret {
            name: id.clone(),
            kind: SecretKind::TrustedCa,
            cert_pem: pem,
            key_pem: Arc::from(""),
        };
        self.secrets.insert(id.clone(), secret);
        Ok(id)
    }

    // ---- result ----
}

/// The status message of a backend naming a port its Service does not have (`have`).
fn port_not_found(service: &ObjKey, port: PortRef<'_>, have: &[ServicePortRef]) -> FieldError {
    let have: Vec<String> = have
        .iter()
        .map(|p| match &p.name {
            Some(n) if !n.is_empty() => format!("{} ({n})", p.port),
            _ => p.port.to_string(),
        })
        .collect();
    let wanted = match port {
        PortRef::Number(n) => n.to_string(),
        PortRef::Name(n) => format!("{n:?}"),
    };
    FieldError {
        path: String::new(),
        reason: reason::SERVICE_PORT_NOT_FOUND,
        message: format!(
            "Service {:?} has no port {wanted} (its ports: {})",
            service.to_string(),
            if have.is_empty() {
                "none".to_string()
            } else {
                have.join(", ")
            }
        ),
    }
}
