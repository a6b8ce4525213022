//! The release's own Pods as the pod runner runs them, and traffic through its Envoy Service.

use super::*;

/// With `hugePages: true`, sluice's heap is on transparent huge pages where the kernel gives them
/// to memory that asks (its `transparent_hugepage/enabled` at `always` or `madvise`).
pub fn check_huge_pages(env: &Env, ns: &str, pod: &str, pid: u32) {
    let mode =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if !(mode.contains("[always]") || mode.contains("[madvise]")) {
        eprintln!("transparent huge pages are off on this machine ({mode:?}): not checked");
        return;
    }
    let huge_kib = || -> u64 {
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .expect("sluice's smaps_rollup");
        (rollup.lines())
            .find_map(|l| l.strip_prefix("AnonHugePages:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    wait_for(
        Duration::from_secs(30),
        "huge pages in sluice's heap",
        || match huge_kib() {
            0 => Err(env.kubectl(&["logs", "-n", ns, pod, "--tail=20"]).stdout),
            _ => Ok(()),
        },
    );
}

/// Waits until Deployment `name` has rolled out (`kubectl rollout status`: every replica of the
/// current template updated and available, the old ones gone) and returns its Ready Pods.
pub fn rolled_out(
    env: &Env,
    rel: &Rel,
    ns: &str,
    name: &str,
    component: &str,
) -> (Value, Vec<Value>) {
    env.kubectl_ok(&[
        "rollout",
        "status",
        "deployment",
        name,
        "-n",
        ns,
        "--timeout=120s",
    ]);
    let deployment = json(env, &["get", "deployment", "-n", ns, name]);
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap() as usize;
    let selector = format!(
        "app.kubernetes.io/instance={},app.kubernetes.io/component={component}",
        rel.release
    );
    let pods = env.ready_pods(ns, &selector, replicas);
    (deployment, pods)
}

/// A Pod's Secret volume (`volume`) holds the files of the Secret (as written to `secret`).
pub fn same_files(volume: &Path, secret: &Path) {
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        let got = std::fs::read(volume.join(key))
            .unwrap_or_else(|e| panic!("{}/{key}: {e}", volume.display()));
        assert_eq!(
            got,
            std::fs::read(secret.join(key)).unwrap(),
            "{}/{key}",
            volume.display()
        );
    }
}

/// Whether a Pod's volumes (`dir`: its directory of the pod runner) hold a ServiceAccount token.
pub fn has_token(dir: &Path) -> bool {
    (std::fs::read_dir(dir.join("volumes"))
        .into_iter()
        .flatten()
        .flatten())
    .any(|d| d.path().join("token").is_file())
}

pub fn pod_name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap()
}

pub fn pod_ip(pod: &Value) -> &str {
    pod["status"]["podIP"].as_str().unwrap()
}

/// A namespace of the test's backends and routing objects, deleted on drop.
pub struct AppNamespace<'a> {
    pub env: &'a Env,
    pub name: String,
}

impl Drop for AppNamespace<'_> {
    fn drop(&mut self) {
        let _ = self
            .env
            .kubectl(&["delete", "namespace", &self.name, "--wait=false"]);
    }
}

/// A Deployment of one podecho Pod (docs/e2e.md, "Pods") and its Service `name` on port 80.
pub fn backend(ns: &str, name: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: echo
          image: sluice-e2e/podecho:1
          args: ["--port", "8080"]
          ports: [{{name: http, containerPort: 8080}}]
          env:
            - {{name: POD_NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}}}
spec:
  selector: {{app: {name}}}
  ports: [{{name: www, port: 80, targetPort: http}}]
"#
    )
}

/// The release's own Pods, run by the pod runner as the chart renders them: sluice's Deployment
/// (its arguments and environment, its ServiceAccount's token, the xDS and webhook Secrets, its
/// readiness probe on the webhook port) and Envoy's (the init container's `sluice bootstrap`
/// into the emptyDir, Envoy's arguments, the client Secret, its probe); then the apiserver calls
/// the chart's webhook in those Pods, and routing objects of another namespace reach backend Pods
/// through the Envoy Service, Envoy configured by sluice over mutual TLS xDS through sluice's
/// Service. `certs`: the release's certificates as the test read them from its Secrets, which
/// the Pods' volumes must hold; `_dir`: the test's folder (the Pods need none of it).
pub fn serve_as_installed(env: &Env, rel: &Rel, ns: &str, _dir: &Path, certs: &Certs) {
    let net: PodNet = pods();
    let fullname = rel.fullname;

    // sluice: every replica runs the Deployment's container as rendered, as its user, with the
    // kubelet's environment (the API at the Service default/kubernetes, a token of the release's
    // ServiceAccount).
    let (deployment, sluices) = rolled_out(env, rel, ns, fullname, "sluice");
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], fullname);
    let container = &spec["containers"][0];
    let args = strings(&container["args"]);
    assert!(
        args.contains(&format!("--ingress-class-name={}", rel.class)),
        "{args:?}"
    );
    let literal_env: Vec<(String, String)> = (container["env"].as_array().unwrap().iter())
        .filter_map(|v| Some((v["name"].as_str()?.into(), v["value"].as_str()?.into())))
        .collect();
    let kubernetes = json(env, &["get", "service", "-n", "default", "kubernetes"]);
    let api_ip = kubernetes["spec"]["clusterIP"].as_str().unwrap();
    for pod in &sluices {
        let p = net.process(pod, "sluice");
        assert_eq!(
            p.argv[1..],
            args[..],
            "{} runs its container's args",
            pod_name(pod)
        );
        assert_eq!(
            Some(p.uid as u64),
            spec["securityContext"]["runAsUser"].as_u64()
        );
        // allowPrivilegeEscalation: false, readOnlyRootFilesystem: true.
        assert!(p.no_new_privs && p.read_only_root, "{}", pod_name(pod));
        for (k, v) in &literal_env {
            assert_eq!(p.env.get(k), Some(v), "{k} of {}", pod_name(pod));
        }
        assert_eq!(
            p.env.get("POD_NAME").map(String::as_str),
            Some(pod_name(pod))
        );
        assert_eq!(p.env.get("POD_NAMESPACE").map(String::as_str), Some(ns));
        assert_eq!(
            p.env.get("KUBERNETES_SERVICE_HOST").map(String::as_str),
            Some(api_ip)
        );
        assert!(
            has_token(&net.pod_dir(pod)),
            "{} has no token",
            pod_name(pod)
        );
        same_files(&net.pod_dir(pod).join("volumes/xds-tls"), &certs.server_dir);
        same_files(
            &net.pod_dir(pod).join("volumes/webhook-tls"),
            &certs.webhook_dir,
        );
    }
    if literal_env
        .iter()
        .any(|(k, v)| k == "_RJEM_MALLOC_CONF" && v == "thp:always")
    {
        let pod = &sluices[0];
        check_huge_pages(env, ns, pod_name(pod), net.process(pod, "sluice").pid);
    }
    // Ready only once the readiness probe (/readyz over plain HTTP on the port named
    // webhook-health) passed: the webhook Service's endpoints are these Pods, ready, on the
    // webhook port; and each serves the release's certificate for the Service's name.
    let want: BTreeSet<String> = sluices.iter().map(|p| pod_ip(p).to_string()).collect();
    let webhook_port = (container["ports"].as_array().unwrap().iter())
        .find(|p| p["name"] == "webhook")
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap();
    wait_for(
        Duration::from_secs(30),
        "the webhook Service's ready endpoints",
        || {
            let slices = json(
                env,
                &[
                    "get",
                    "endpointslices",
                    "-n",
                    ns,
                    "-l",
                    &format!("kubernetes.io/service-name={fullname}-webhook"),
                ],
            );
            let mut got = BTreeSet::new();
            for s in slices["items"].as_array().unwrap() {
                if s["ports"][0]["port"].as_u64() != Some(webhook_port) {
                    continue;
                }
                for ep in s["endpoints"].as_array().unwrap_or(&Vec::new()) {
                    if ep["conditions"]["ready"] == true {
                        got.extend(strings(&ep["addresses"]));
                    }
                }
            }
            if got == want {
                Ok(())
            } else {
                Err(format!("{got:?}, want {want:?}"))
            }
        },
    );
    let webhook_host = format!("{fullname}-webhook.{ns}.svc");
    for ip in &want {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "3", "--noproxy", "*", "--cacert"])
            .arg(certs.webhook_dir.join("ca.crt"))
            .arg("--resolve")
            .arg(format!("{webhook_host}:{webhook_port}:{ip}"))
            .arg(format!("https://{webhook_host}:{webhook_port}/readyz"))
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "{ip}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Envoy: the init container wrote the bootstrap into the emptyDir (sluice's xDS Service by
    // name, with the client certificate of the Secret Envoy mounts), then Envoy started with
    // the container's command and args.
    let envoy_name = format!("{fullname}-envoy");
    let (envoy_deployment, envoys) = rolled_out(env, rel, ns, &envoy_name, "envoy");
    let espec = &envoy_deployment["spec"]["template"]["spec"];
    let init_args = strings(&espec["initContainers"][0]["args"]);
    let xds_host = format!("{fullname}.{ns}.svc");
    assert!(
        init_args.contains(&format!("--xds-address={xds_host}:8001")),
        "{init_args:?}"
    );
    let econtainer = &espec["containers"][0];
    let command = strings(&econtainer["command"]);
    assert_eq!(command, ["envoy"]);
    for pod in &envoys {
        let bootstrap_file = net.pod_dir(pod).join("volumes/bootstrap/bootstrap.json");
        let bootstrap: Value =
            serde_json::from_str(&std::fs::read_to_string(&bootstrap_file).unwrap()).unwrap();
        let xds = &bootstrap["static_resources"]["clusters"][0];
        let address = &xds["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
            ["socket_address"];
        assert_eq!(address["address"], xds_host.as_str(), "{xds}");
        assert_eq!(address["port_value"], 8001, "{xds}");
        assert_eq!(
            xds["transport_socket"]["name"], "envoy.transport_sockets.tls",
            "{xds}"
        );
        let p = net.process(pod, "envoy");
        let want_argv: Vec<String> = strings(&econtainer["args"])
            .into_iter()
            .map(|a| a.replace("$(POD_NAME)", pod_name(pod)))
            .collect();
        assert_eq!(p.argv[1..], want_argv[..], "{}", pod_name(pod));
        assert_eq!(
            Some(p.uid as u64),
            espec["securityContext"]["runAsUser"].as_u64()
        );
        assert!(p.no_new_privs && p.read_only_root, "{}", pod_name(pod));
        same_files(&net.pod_dir(pod).join("volumes/xds-tls"), &certs.client_dir);
        // automountServiceAccountToken: false.
        assert!(
            !has_token(&net.pod_dir(pod)),
            "{} has a token",
            pod_name(pod)
        );
    }
    // Each Envoy's xDS stream reached a sluice replica (through the xDS Service's ClusterIP,
    // over mutual TLS: sluice serves only clients of its --xds-ca).
    wait_for(
        Duration::from_secs(30),
        "an xDS stream per Envoy in sluice's logs",
        || {
            let opened: usize = (sluices.iter())
                .map(|p| {
                    (env.kubectl(&["logs", "-n", ns, pod_name(p)]).stdout)
                        .matches("xDS stream opened")
                        .count()
                })
                .sum();
            if opened >= envoys.len() {
                Ok(())
            } else {
                Err(format!("{opened} streams"))
            }
        },
    );

    // The Envoy Service's address (the runner's LoadBalancer).
    let envoy_ip = wait_for(
        Duration::from_secs(30),
        "the Envoy Service's load-balancer address",
        || {
            let svc = json(env, &["get", "service", "-n", ns, &envoy_name]);
            svc["status"]["loadBalancer"]["ingress"][0]["ip"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| svc["status"].to_string())
        },
    );

    // Objects of another namespace, which the webhooks check (they skip the release's own):
    // a bad one is refused by the chart's webhook, in the sluice Pods, which the apiserver calls
    // at an endpoint of the webhook Service.
    let app = AppNamespace {
        env,
        name: env.namespace("chart-app"),
    };
    let app_ns = app.name.as_str();
    let bad = format!(
        r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: bad, namespace: {app_ns}}}
spec:
  virtualhost: {{fqdn: bad.{app_ns}.example.com}}
  routes: [{{match: finance, services: [{{name: web, port: 80}}]}}]
"#
    );
    let out = env.apply(&bad);
    assert!(!out.ok, "a bad IngressRoute was accepted");
    assert!(
        out.stderr
            .contains(r#"spec.routes[0].match: "finance" must start with "/""#),
        "{}",
        out.stderr
    );
    assert!(
        env.get(IR, app_ns, "bad").is_none(),
        "the bad IngressRoute was stored"
    );

    env.apply_ok(&backend(app_ns, "web"));
    env.apply_ok(&backend(app_ns, "shop"));
    env.apply_ok(&format!(
        r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: root, namespace: {app_ns}}}
spec:
  virtualhost: {{fqdn: {app_ns}.example.com}}
  routes: [{{match: /, services: [{{name: web, port: 80}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: shop, namespace: {app_ns}}}
spec:
  ingressClassName: {class}
  rules:
    - host: shop.{app_ns}.example.com
      http:
        paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: shop, port: {{number: 80}}}}}}}}]
"#,
        class = rel.class
    ));
    // Status written by the leader Pod (the release's ClusterRole, its Lease); the Ingress
    // carries the Envoy Service's address (--envoy-service).
    wait_status(env, IR, app_ns, "root", "valid");
    wait_for(Duration::from_secs(30), "the Ingress's address", || {
        let ing = json(env, &["get", "ingress", "-n", app_ns, "shop"]);
        let ip = &ing["status"]["loadBalancer"]["ingress"][0]["ip"];
        if ip == envoy_ip.as_str() {
            Ok(())
        } else {
            Err(ing["status"].to_string())
        }
    });
    let lease = json(env, &["get", "lease", "-n", ns, "sluice-leader"]);
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
    assert!(
        sluices.iter().any(|p| pod_name(p) == holder),
        "the Lease is held by {holder:?}, not a sluice Pod"
    );

    // Requests through the Envoy Service (its load-balancer address, port 80) and through each
    // Envoy Pod's HTTP port reach the backend Pods.
    let mut entries = vec![format!("http://{envoy_ip}")];
    let http_port = (econtainer["ports"].as_array().unwrap().iter())
        .find(|p| p["name"] == "http")
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap();
    entries.extend(
        envoys
            .iter()
            .map(|p| format!("http://{}:{http_port}", pod_ip(p))),
    );
    for entry in &entries {
        for (host, backend) in [
            (format!("{app_ns}.example.com"), "\"pod\": \"web-"),
            (format!("shop.{app_ns}.example.com"), "\"pod\": \"shop-"),
        ] {
            wait_for(
                Duration::from_secs(30),
                &format!("{host} through {entry} → {backend}"),
                || {
                    let (code, body) = curl_get(&format!("{entry}/"), &[format!("Host: {host}")]);
                    if code == 200 && body.contains(backend) {
                        Ok(())
                    } else {
                        Err(format!("{code} {body}"))
                    }
                },
            );
        }
    }
    // Envoy's statistics on each Pod's metrics port (the bootstrap's --stats-address), and
    // nothing else of its admin interface; its access log on its standard output, which
    // `kubectl logs` shows.
    let metrics_port = (econtainer["ports"].as_array().unwrap().iter())
        .find(|p| p["name"] == "metrics")
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap();
    let web = format!("envoy_cluster_name=\"{app_ns}/web/");
    for pod in &envoys {
        let stats = format!("http://{}:{metrics_port}", pod_ip(pod));
        let (code, text) = curl_get(&format!("{stats}/stats/prometheus"), &[]);
        assert_eq!(code, 200, "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("envoy_cluster_upstream_rq_total{") && l.contains(&web)),
            "no request count of {app_ns}/web in:\n{text}"
        );
        assert_eq!(curl_get(&format!("{stats}/config_dump"), &[]).0, 404);
        wait_for(
            Duration::from_secs(10),
            "an access log line in kubectl logs",
            || {
                let logs = env
                    .kubectl(&["logs", "-n", ns, pod_name(pod), "-c", "envoy"])
                    .stdout;
                let served = logs.lines().any(|l| {
                    serde_json::from_str::<Value>(l).is_ok_and(|v| {
                        v["authority"] == format!("shop.{app_ns}.example.com")
                            && v["response_code"] == 200
                    })
                });
                if served {
                    Ok(())
                } else {
                    Err(crate::support::tail(&logs))
                }
            },
        );
    }
}
