//! Pods with no container runtime (e2e/lib/pods.sh, docs/e2e.md "Pods"): kube-controller-manager
//! and kube-scheduler place a Deployment's Pods on the kwok Node, and e2e/podrunner.py runs
//! their containers (the image `sluice-e2e/podecho`, mapped to e2e/podecho.py) as processes, one
//! network namespace per Pod on its Pod IP, with their volumes, env and logs; Services of type
//! LoadBalancer get a loopback address that forwards to their endpoints.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, curl_get, env, in_cidr, pods, wait_for};

/// A Deployment `name` of `replicas` podecho Pods (label app=NAME) on port 8080 (named http),
/// with a configMap volume (with `items`) and a secret volume (without) whose files the env
/// names, and a container whose image nothing runs.
fn deployment(ns: &str, name: &str, replicas: u32) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: echo
          image: sluice-e2e/podecho:1
          args: ["--port", "$(PORT)"]
          ports: [{{name: http, containerPort: 8080}}]
          env:
            - {{name: PORT, value: "8080"}}
            - {{name: POD_NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
            - {{name: POD_NAMESPACE, valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}}}
            - {{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
            - {{name: GREETING_FILE, value: /etc/greeting/hello.txt}}
            - {{name: SECRET_FILE, value: /var/run/token/token}}
          volumeMounts:
            - {{name: greeting, mountPath: /etc/greeting}}
            - {{name: token, mountPath: /var/run/token, readOnly: true}}
        - name: sidecar
          image: registry.example/not-run-here:1
      volumes:
        - name: greeting
          configMap: {{name: {name}-greeting, items: [{{key: hello, path: hello.txt}}]}}
        - name: token
          secret: {{secretName: {name}-token}}
"#
    )
}

/// The ConfigMap and Secret the Deployment's volumes name.
fn volumes(ns: &str, name: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: {name}-greeting, namespace: {ns}}}
data: {{hello: "hello from {name}", unused: "x"}}
---
apiVersion: v1
kind: Secret
metadata: {{name: {name}-token, namespace: {ns}}}
stringData: {{token: "s3cret-{name}"}}
"#
    )
}

/// A Service `name` of this type on port 80 (named www), to the Pods' port named http.
fn service(ns: &str, name: &str, type_: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}}}
spec:
  type: {type_}
  selector: {{app: {name}}}
  ports: [{{name: www, port: 80, targetPort: http}}]
"#
    )
}

fn name_of(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap()
}

fn ip_of(pod: &Value) -> &str {
    pod["status"]["podIP"].as_str().unwrap()
}

/// The network namespace the pod runner made for the Pod (`sp-` and the uid's first 8 hex).
fn netns_of(pod: &Value) -> String {
    let uid = pod["metadata"]["uid"].as_str().unwrap().replace('-', "");
    format!("sp-{}", &uid[..8])
}

fn netns_list() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// GET http://ADDR/PATH, parsed (status 200 required).
fn get_json(url: &str) -> Result<Value, String> {
    let (code, body) = curl_get(url, &[]);
    if code != 200 {
        return Err(format!("{url}: {code} {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("{url}: {e}: {body}"))
}

/// Deletes the Deployment and waits until its Pods and their namespaces are gone.
fn delete_deployment(env: &Env, ns: &str, name: &str, pods: &[Value]) {
    env.kubectl_ok(&["delete", "deployment", "-n", ns, name, "--wait=false"]);
    wait_for(
        Duration::from_secs(30),
        &format!("the Pods of {ns}/{name} and their namespaces to be gone"),
        || {
            let left = env.kubectl_ok(&[
                "get",
                "pods",
                "-n",
                ns,
                "-l",
                &format!("app={name}"),
                "-o",
                "name",
            ]);
            let list = netns_list();
            let netns: Vec<String> = pods
                .iter()
                .map(netns_of)
                .filter(|n| list.contains(n.as_str()))
                .collect();
            if left.trim().is_empty() && netns.is_empty() {
                Ok(())
            } else {
                Err(format!("pods {left:?}, namespaces {netns:?}"))
            }
        },
    );
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn pods_of_a_deployment_run_on_their_ips_with_volumes_env_and_logs() {
    let env = env();
    let net = pods();
    let ns = env.namespace("e2e-pods");
    env.apply_ok(&deployment(&ns, "echo", 2));
    env.apply_ok(&service(&ns, "echo", "ClusterIP"));
    // The volumes' ConfigMap and Secret come after the Pods, which wait for them.
    std::thread::sleep(Duration::from_millis(300));
    env.apply_ok(&volumes(&ns, "echo"));
    let pods = env.ready_pods(&ns, "app=echo", 2);

    let name_re = regex::Regex::new(r"^echo-[a-z0-9]{6,10}-[a-z0-9]{5}$").unwrap();
    let mut ips = BTreeSet::new();
    for pod in &pods {
        let (name, ip) = (name_of(pod), ip_of(pod));
        assert!(
            name_re.is_match(name),
            "not a ReplicaSet's Pod name: {name}"
        );
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
        assert_eq!(pod["status"]["phase"], "Running");
        assert!(
            in_cidr(ip, &net.cidr),
            "{name}: {ip} is not in {}",
            net.cidr
        );
        assert!(
            netns_list().contains(&netns_of(pod)),
            "{name}: no namespace {}",
            netns_of(pod)
        );
        ips.insert(ip.to_string());
        // Ready means the first containerPort answers: at once, from the host.
        let answer = get_json(&format!("http://{ip}:8080/hello")).unwrap();
        assert_eq!(answer["pod"], name, "{answer}");
        assert_eq!(answer["namespace"], ns.as_str(), "{answer}");
        assert_eq!(answer["ip"], ip, "{answer}");
        assert_eq!(answer["path"], "/hello", "{answer}");
        assert_eq!(answer["greeting"], "hello from echo", "{answer}");
        assert_eq!(answer["secret"], "s3cret-echo", "{answer}");
    }
    assert_eq!(ips.len(), 2, "two Pods, two IPs: {ips:?}");

    // The EndpointSlice controller lists both, ready, on the container port.
    wait_for(
        Duration::from_secs(30),
        "the EndpointSlice of echo to list both Pods",
        || {
            let out = env.kubectl_ok(&[
                "get",
                "endpointslices",
                "-n",
                &ns,
                "-l",
                "kubernetes.io/service-name=echo",
                "-o",
                "json",
            ]);
            let list: Value = serde_json::from_str(&out).unwrap();
            let mut listed = BTreeSet::new();
            for slice in list["items"].as_array().unwrap() {
                assert_eq!(slice["ports"][0]["port"], 8080, "{slice}");
                for ep in slice["endpoints"].as_array().into_iter().flatten() {
                    if ep["conditions"]["ready"] == true {
                        listed.insert(ep["addresses"][0].as_str().unwrap().to_string());
                    }
                }
            }
            if listed == ips {
                Ok(())
            } else {
                Err(format!("{listed:?}"))
            }
        },
    );

    // kubectl logs through the apiserver and kwok: the container's output, line by line.
    let first = name_of(&pods[0]);
    let logs = env.kubectl_ok(&["logs", "-n", &ns, first, "-c", "echo"]);
    assert!(
        logs.contains(&format!(
            "podecho {first}: listening on {}:8080",
            ip_of(&pods[0])
        )),
        "{logs}"
    );
    assert!(
        logs.contains(&format!("podecho {first}: GET /hello from ")),
        "{logs}"
    );
    // The container nothing runs has an empty log, not an error.
    let sidecar = env.kubectl_ok(&["logs", "-n", &ns, first, "-c", "sidecar"]);
    assert_eq!(sidecar, "");

    delete_deployment(&env, &ns, "echo", &pods);
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn pods_behind_a_loadbalancer_service_answer_on_its_loopback_address() {
    let env = env();
    let net = pods();
    let ns = env.namespace("e2e-pods-lb");
    env.apply_ok(&volumes(&ns, "web"));
    env.apply_ok(&deployment(&ns, "web", 2));
    env.apply_ok(&service(&ns, "web", "LoadBalancer"));
    let pods = env.ready_pods(&ns, "app=web", 2);
    let address = wait_for(
        Duration::from_secs(30),
        "Service web to get a LoadBalancer address",
        || {
            let svc = env.get("service", &ns, "web").unwrap();
            match svc["status"]["loadBalancer"]["ingress"][0]["ip"].as_str() {
                Some(ip) => Ok(ip.to_string()),
                None => Err(svc["status"].to_string()),
            }
        },
    );
    assert!(
        in_cidr(&address, &net.lb_pool),
        "{address} is not in {}",
        net.lb_pool
    );
    // Connections to ADDRESS:80 reach both Pods' port 8080 (round robin over the ready
    // endpoints, once the EndpointSlice lists them).
    let want: BTreeSet<String> = pods.iter().map(|p| name_of(p).to_string()).collect();
    let mut seen = BTreeSet::new();
    wait_for(
        Duration::from_secs(30),
        &format!("http://{address}/ to reach both Pods"),
        || {
            let answer = get_json(&format!("http://{address}/via-lb"))?;
            assert_eq!(answer["path"], "/via-lb");
            seen.insert(answer["pod"].as_str().unwrap_or_default().to_string());
            if seen == want {
                Ok(())
            } else {
                Err(format!("seen {seen:?}"))
            }
        },
    );

    // Deleting the Service frees the address: nothing listens there any more.
    env.kubectl_ok(&["delete", "service", "-n", &ns, "web"]);
    wait_for(
        Duration::from_secs(30),
        &format!("{address}:80 to stop answering"),
        || match curl_get(&format!("http://{address}/"), &[]) {
            (0, _) => Ok(()),
            (code, body) => Err(format!("{code} {body}")),
        },
    );
    delete_deployment(&env, &ns, "web", &pods);
}
