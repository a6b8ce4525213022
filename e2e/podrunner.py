#!/usr/bin/env python3
"""The e2e pod runner: runs the Pods kwok says are Running as local processes, and plays the
load balancer of Services of type LoadBalancer. Python 3 standard library only.

Started by e2e/lib/pods.sh (see docs/e2e.md, "Pods"). It talks to the apiserver with the admin
client certificate, and

* for every Pod with `status.podIP` and no `deletionTimestamp` (phase not Succeeded/Failed):
  - makes the network namespace `sp-<uid8>` with a veth pair (`vh<uid8>` on the host, attached
    to the bridge; `vp<uid8>` inside with the Pod IP/PREFIX, default route via the bridge);
    kwok reuses Pod IPs, so a namespace that still holds the IP is removed first;
  - writes its secret, configMap and emptyDir volumes under RUN_DIR/<uid>/volumes/<volume>
    (waiting until each Secret/ConfigMap exists);
  - runs every container whose image the image map names (`ip netns exec sp-<uid8> env -i
    ENV... BINARY [ARGS]`) in RUN_DIR/<uid>, restarting it (1 s, 2 s, ... 10 s) when it exits
    unless `restartPolicy: Never` (or `OnFailure` and it exited 0); its stdout and stderr go to
    RUN_DIR/<uid>/<container>.log in CRI format, and a kwok `Logs` object named like the Pod
    points kwok at those files, so `kubectl logs` works;
  - annotates the Pod `sluice.e2e/started: "true"` once the first containerPort of a container
    it runs accepts TCP connections (at once when it runs nothing or no port is declared);
    kwok's stage pod-ready (e2e/lib/kwok-pod-stages.yaml) then makes the Pod Ready;
* on Pod deletion (or completion) it kills the processes and deletes the namespace;
* with --lb-pool, for every Service of type LoadBalancer with no loadBalancerClass: takes the
  lowest free address of the pool, writes it to status.loadBalancer.ingress[0].ip, and
  forwards TCP connections on ADDRESS:PORT (each TCP port of the Service) to a ready endpoint
  of its EndpointSlices (round robin), the port picked by the Service port's name.

Image map (--images, default $SLUICE_E2E_IMAGES): comma-separated `PREFIX=BINARY` entries. A
container whose image starts with PREFIX (the longest matching prefix wins) runs BINARY, an
absolute path, with no arguments; `PREFIX=BINARY+args` appends the container's `command` and
then its `args`. Env values and arguments that start with a volumeMount's mountPath are
rewritten to the volume's directory on the host (there is no mount namespace).
"""
import argparse
import asyncio
import base64
import datetime
import http.client
import ipaddress
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

STARTED = "sluice.e2e/started"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def log(*a):
    ts = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
    print(ts, *a, file=sys.stderr, flush=True)


# --- apiserver client ----------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body[:300]!r}")
        self.status = status


class Api:
    def __init__(self, server, ca, cert, key):
        u = urllib.parse.urlsplit(server)
        self.host, self.port = u.hostname, u.port or 443
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)

    def _conn(self, timeout):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def call(self, method, path, body=None, ctype="application/json", timeout=30):
        """The decoded JSON answer; raises ApiError on a non-2xx status."""
        c = self._conn(timeout)
        try:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = ctype
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            text = r.read()
            if r.status >= 300:
                raise ApiError(r.status, text.decode(errors="replace"))
            return json.loads(text) if text else None
        finally:
            c.close()

    def get(self, path):
        """The object, or None when it does not exist."""
        try:
            return self.call("GET", path)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def patch(self, path, body):
        return self.call("PATCH", path, body, ctype="application/merge-patch+json")

    def watch(self, path, rv):
        """Yields watch events of `path` from resourceVersion `rv` until the server ends it."""
        sep = "&" if "?" in path else "?"
        q = f"{path}{sep}watch=1&allowWatchBookmarks=true&timeoutSeconds=240&resourceVersion={rv}"
        c = self._conn(300)
        try:
            c.request("GET", q, headers={"Accept": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                raise ApiError(r.status, r.read().decode(errors="replace"))
            while True:
                line = r.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            c.close()


def informer(api, path, name, on_list, on_event, stop):
    """List-then-watch `path` forever (a thread): on_list(items) after every (re)list,
    on_event(type, obj) for each change. Relists after a 410 or a broken watch it cannot resume."""
    while not stop.is_set():
        try:
            lst = api.call("GET", path, timeout=60)
            rv = lst["metadata"]["resourceVersion"]
            on_list(lst.get("items") or [])
            failures = 0
            while not stop.is_set():
                try:
                    for ev in api.watch(path, rv):
                        t, obj = ev["type"], ev["object"]
                        if t == "ERROR":
                            raise ApiError(obj.get("code", 500), json.dumps(obj))
                        rv = obj["metadata"]["resourceVersion"]
                        if t != "BOOKMARK":
                            on_event(t, obj)
                    failures = 0
                except ApiError as e:
                    if e.status == 410:
                        break  # too old: relist
                    raise
                except (OSError, http.client.HTTPException, ValueError) as e:
                    failures += 1
                    if failures > 3:
                        raise
                    log(f"{name}: watch broke ({e}); resuming")
                    time.sleep(0.5)
        except Exception as e:  # noqa: BLE001 - keep the loop alive whatever happens
            if stop.is_set():
                return
            log(f"{name}: {type(e).__name__}: {e}; relisting in 1 s")
            time.sleep(1)


# --- image map ---------------------------------------------------------------------------


def parse_images(spec):
    """[(prefix, binary, with_args)], longest prefix first."""
    out = []
    for entry in filter(None, (e.strip() for e in (spec or "").split(","))):
        prefix, sep, target = entry.partition("=")
        if not sep or not prefix or not target:
            raise SystemExit(f"image map entry {entry!r} is not PREFIX=BINARY[+args]")
        with_args = target.endswith("+args")
        if with_args:
            target = target[: -len("+args")]
        if not os.path.isabs(target):
            raise SystemExit(f"image map entry {entry!r}: {target} is not an absolute path")
        out.append((prefix, target, with_args))
    out.sort(key=lambda e: -len(e[0]))
    return out


def image_target(images, image):
    for prefix, binary, with_args in images:
        if image.startswith(prefix):
            return binary, with_args
    return None


# --- pods ----------------------------------------------------------------------------------


def sh(*cmd, check=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


def netns_pids(ns):
    r = sh("ip", "netns", "pids", ns, check=False)
    return [int(p) for p in r.stdout.split()]


def delete_netns(ns, host_if):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = netns_pids(ns)
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        if pids and sig == signal.SIGTERM:
            deadline = time.time() + 2
            while time.time() < deadline and netns_pids(ns):
                time.sleep(0.05)
    sh("ip", "link", "del", host_if, check=False)
    sh("ip", "netns", "del", ns, check=False)


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class CriLog:
    """One container's log file in the CRI format kwok reads (`TIME STREAM F LINE`)."""

    def __init__(self, path, streams):
        self.f = open(path, "ab", buffering=0)
        self.lock = threading.Lock()
        self.open_streams = streams

    def pump(self, pipe, stream):
        tag = stream.encode()
        for line in iter(pipe.readline, b""):
            line = line.rstrip(b"\n")
            with self.lock:
                self.f.write(now_rfc3339().encode() + b" " + tag + b" F " + line + b"\n")
        pipe.close()
        with self.lock:
            self.open_streams -= 1
            if self.open_streams == 0:
                self.f.close()


def expand(value, env):
    """Kubernetes' $(VAR) expansion ($$ escapes)."""

    def rep(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", rep, value)


def field_value(pod, path):
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return (pod["metadata"].get(m.group(1)) or {}).get(m.group(2), "")
    simple = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "metadata.uid": pod["metadata"]["uid"],
        "spec.nodeName": pod["spec"].get("nodeName", ""),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
        "status.podIP": pod["status"].get("podIP", ""),
        "status.hostIP": pod["status"].get("hostIP", ""),
    }
    if path not in simple:
        log(f"fieldRef {path} is not supported; empty")
    return simple.get(path, "")


class PodRun:
    """One Pod: its namespace, volumes, processes and Logs object."""

    def __init__(self, mgr, pod):
        self.mgr = mgr
        self.pod = pod
        md = pod["metadata"]
        self.uid, self.name, self.ns = md["uid"], md["name"], md["namespace"]
        self.key = f"{self.ns}/{self.name}"
        self.ip = pod["status"]["podIP"]
        u8 = self.uid.replace("-", "")[:8]
        self.netns, self.host_if, self.pod_if = f"sp-{u8}", f"vh{u8}", f"vp{u8}"
        self.dir = os.path.join(mgr.run_dir, self.uid)
        self.stopping = threading.Event()
        self.stopped = threading.Event()
        self.stop_lock = threading.Lock()
        self.procs = {}  # container name -> Popen
        self.net_up = False
        self.thread = threading.Thread(target=self.run, name=self.key, daemon=True)

    # The Pod's life here.
    def run(self):
        try:
            self.setup_net()
            if self.stopping.is_set():
                return
            vols = self.volumes()
            if vols is None:
                return
            runs = self.plan(vols)
            self.write_logs_object()
            for c in runs:
                self.start(c)
            # Beside supervise: a container that exits before its port answers is restarted.
            threading.Thread(target=self.guard, args=(self.announce, runs), daemon=True).start()
            self.supervise(runs)
        except Exception as e:  # noqa: BLE001
            if not self.stopping.is_set():
                log(f"{self.key}: {type(e).__name__}: {e}")

    def guard(self, f, *args):
        try:
            f(*args)
        except Exception as e:  # noqa: BLE001
            if not self.stopping.is_set():
                log(f"{self.key}: {type(e).__name__}: {e}")

    def setup_net(self):
        while True:
            with self.mgr.net_lock:
                old = self.mgr.by_ip.get(self.ip)
                if old is None or old is self:
                    self._make_net()
                    return
            # kwok gave this Pod the IP of a Pod whose namespace is still here: remove that first
            # (outside net_lock: stop() takes it).
            log(f"{self.key}: {self.ip} still held by {old.key} ({old.netns}); removing it")
            old.stop()

    def _make_net(self):
        """Under net_lock."""
        if self.stopping.is_set():
            return
        self.mgr.by_ip[self.ip] = self
        self.mgr.record(self.netns, True)
        ns, h, p = self.netns, self.host_if, self.pod_if
        delete_netns(ns, h)  # a leftover of the same Pod (a restarted runner)
        self.net_up = True
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", h, "type", "veth", "peer", "name", p)
        sh("ip", "link", "set", p, "netns", ns)
        sh("ip", "link", "set", h, "master", self.mgr.bridge)
        sh("ip", "link", "set", h, "up")
        sh("ip", "-n", ns, "addr", "add", f"{self.ip}/{self.mgr.prefix_len}", "dev", p)
        # kwok hands a deleted Pod's address to the next Pod: neighbours on the bridge (the host,
        # other Pods) may still hold the old Pod's MAC for it and would not reach this one for
        # half a minute. A gratuitous ARP when the link comes up (arp_notify) updates theirs;
        # the host's entry goes for good measure.
        sh("ip", "netns", "exec", ns, "sh", "-c", f"echo 1 > /proc/sys/net/ipv4/conf/{p}/arp_notify")
        sh("ip", "neigh", "del", self.ip, "dev", self.mgr.bridge, check=False)
        sh("ip", "-n", ns, "link", "set", p, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "route", "add", "default", "via", self.mgr.gateway)
        log(f"{self.key}: {ns} holds {self.ip}")

    def wait_object(self, kind, name, optional):
        """The Secret/ConfigMap `name` of the Pod's namespace, waiting until it exists; None
        when optional and missing, or when the Pod goes away first."""
        path = f"/api/v1/namespaces/{self.ns}/{kind}/{name}"
        said = False
        while not self.stopping.is_set():
            obj = self.mgr.api.get(path)
            if obj is not None:
                return obj
            if optional:
                return None
            if not said:
                log(f"{self.key}: waiting for {kind} {self.ns}/{name}")
                said = True
            self.stopping.wait(0.5)
        return None

    def source_data(self, kind, obj):
        data = {}
        if obj is None:
            return data
        if kind == "secrets":
            for k, v in (obj.get("data") or {}).items():
                data[k] = base64.b64decode(v)
        else:
            for k, v in (obj.get("data") or {}).items():
                data[k] = v.encode()
            for k, v in (obj.get("binaryData") or {}).items():
                data[k] = base64.b64decode(v)
        return data

    def volumes(self):
        """{volume name: host directory}; None when the Pod went away while waiting."""
        out = {}
        for v in self.pod["spec"].get("volumes") or []:
            d = os.path.join(self.dir, "volumes", v["name"])
            os.makedirs(d, exist_ok=True)
            out[v["name"]] = d
            if "secret" in v:
                kind, src = "secrets", v["secret"]
                name = src.get("secretName", "")
            elif "configMap" in v:
                kind, src = "configmaps", v["configMap"]
                name = src.get("name", "")
            else:
                if "emptyDir" not in v:
                    log(f"{self.key}: volume {v['name']} is neither secret, configMap nor emptyDir: an empty directory")
                continue
            obj = self.wait_object(kind, name, src.get("optional", False))
            if self.stopping.is_set():
                return None
            data = self.source_data(kind, obj)
            items = src.get("items")
            files = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
            for key, rel in files:
                if key not in data:
                    if not src.get("optional", False):
                        log(f"{self.key}: {kind} {name} has no key {key}")
                    continue
                path = os.path.join(d, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data[key])
        return out

    def plan(self, vols):
        """[(container, argv, env)] of the containers the image map names."""
        runs = []
        for c in self.pod["spec"].get("containers") or []:
            target = image_target(self.mgr.images, c.get("image", ""))
            if target is None:
                continue
            binary, with_args = target
            mounts = []
            for m in c.get("volumeMounts") or []:
                host = vols.get(m["name"])
                if host is None:
                    continue
                if m.get("subPath"):
                    host = os.path.join(host, m["subPath"])
                mounts.append((m["mountPath"].rstrip("/") or "/", host))
            mounts.sort(key=lambda x: -len(x[0]))

            def rewrite(value):
                for mp, host in mounts:
                    if value == mp or value.startswith(mp + "/"):
                        return host + value[len(mp):]
                return value

            env = {"PATH": DEFAULT_PATH}
            for ef in c.get("envFrom") or []:
                prefix = ef.get("prefix", "")
                for kind, key in (("configmaps", "configMapRef"), ("secrets", "secretRef")):
                    if key in ef:
                        ref = ef[key]
                        obj = self.wait_object(kind, ref["name"], ref.get("optional", False))
                        for k, v in self.source_data(kind, obj).items():
                            env[prefix + k] = v.decode(errors="replace")
            for e in c.get("env") or []:
                if "value" in e:
                    val = expand(e["value"], env)
                elif "valueFrom" in e:
                    vf = e["valueFrom"]
                    val = ""
                    if "fieldRef" in vf:
                        val = field_value(self.pod, vf["fieldRef"]["fieldPath"])
                    else:
                        for kind, key in (("configmaps", "configMapKeyRef"), ("secrets", "secretKeyRef")):
                            if key in vf:
                                ref = vf[key]
                                obj = self.wait_object(kind, ref["name"], ref.get("optional", False))
                                raw = self.source_data(kind, obj).get(ref["key"])
                                val = raw.decode(errors="replace") if raw is not None else ""
                        if "resourceFieldRef" in vf:
                            log(f"{self.key}: env {e['name']}: resourceFieldRef is not supported; empty")
                else:
                    val = ""
                env[e["name"]] = rewrite(val)
            argv = [binary]
            if with_args:
                argv += [rewrite(expand(a, env)) for a in (c.get("command") or []) + (c.get("args") or [])]
            runs.append((c, argv, env))
        return runs

    def log_path(self, container):
        return os.path.join(self.dir, f"{container}.log")

    def write_logs_object(self):
        """The kwok Logs object (named like the Pod) pointing at every container's log file."""
        os.makedirs(self.dir, exist_ok=True)
        logs = []
        for c in self.pod["spec"].get("containers") or []:
            path = self.log_path(c["name"])
            open(path, "ab").close()
            logs.append({"containers": [c["name"]], "logsFile": path, "follow": True})
        body = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": {
                "name": self.name,
                "namespace": self.ns,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": self.name, "uid": self.uid}],
            },
            "spec": {"logs": logs},
        }
        base = f"/apis/kwok.x-k8s.io/v1alpha1/namespaces/{self.ns}/logs"
        for _ in range(5):
            try:
                self.mgr.api.call("POST", base, body)
                return
            except ApiError as e:
                if e.status != 409:
                    raise
            # A same-named Pod's Logs object the garbage collector has not removed yet: take it.
            old = self.mgr.api.get(f"{base}/{self.name}")
            if old is None:
                continue
            body["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            try:
                self.mgr.api.call("PUT", f"{base}/{self.name}", body)
                return
            except ApiError as e:
                if e.status not in (404, 409):
                    raise
            body["metadata"].pop("resourceVersion", None)

    def start(self, run):
        c, argv, env = run
        cmd = ["ip", "netns", "exec", self.netns, "env", "-i"]
        cmd += [f"{k}={v}" for k, v in env.items()] + argv
        # Under stop_lock, so stop() either sees the process or start() sees stopping.
        with self.stop_lock:
            if self.stopping.is_set():
                return
            p = subprocess.Popen(cmd, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
            self.procs[c["name"]] = p
        logf = CriLog(self.log_path(c["name"]), streams=2)
        for pipe, stream in ((p.stdout, "stdout"), (p.stderr, "stderr")):
            threading.Thread(target=logf.pump, args=(pipe, stream), daemon=True).start()
        log(f"{self.key}: container {c['name']} runs {' '.join(argv)} (pid {p.pid})")

    def first_port(self, runs):
        for c, _, _ in runs:
            for port in c.get("ports") or []:
                if port.get("protocol", "TCP") == "TCP" and port.get("containerPort"):
                    return port["containerPort"]
        return None

    def announce(self, runs):
        """Annotates the Pod started once its first containerPort answers (kwok makes it Ready)."""
        port = self.first_port(runs)
        if port is not None:
            t0 = time.time()
            while not self.stopping.is_set():
                try:
                    with socket.create_connection((self.ip, port), timeout=1):
                        break
                except OSError:
                    self.stopping.wait(0.1)
            if self.stopping.is_set():
                return
            log(f"{self.key}: {self.ip}:{port} answers after {time.time() - t0:.2f}s")
        if (self.pod["metadata"].get("annotations") or {}).get(STARTED) == "true":
            return
        try:
            self.mgr.api.patch(f"/api/v1/namespaces/{self.ns}/pods/{self.name}",
                               {"metadata": {"annotations": {STARTED: "true"}}})
        except ApiError as e:
            if e.status != 404:
                raise

    def supervise(self, runs):
        policy = self.pod["spec"].get("restartPolicy", "Always")
        backoff = {}
        while not self.stopping.wait(0.2):
            for run in runs:
                name = run[0]["name"]
                p = self.procs.get(name)
                if p is None or p.poll() is None:
                    continue
                code = p.returncode
                if policy == "Never" or (policy == "OnFailure" and code == 0):
                    log(f"{self.key}: container {name} exited {code}; not restarted ({policy})")
                    self.procs.pop(name)
                    continue
                delay = backoff.get(name, 1)
                log(f"{self.key}: container {name} exited {code}; restarting in {delay}s")
                self.procs.pop(name)
                if self.stopping.wait(delay):
                    return
                backoff[name] = min(delay * 2, 10)
                self.start(run)

    def stop(self):
        """Kills the processes and removes the namespace (idempotent; waits until done)."""
        self.stopping.set()
        with self.stop_lock:
            if self.stopped.is_set():
                return
            for p in list(self.procs.values()):
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            deadline = time.time() + 2
            for p in list(self.procs.values()):
                try:
                    p.wait(max(0.01, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
            with self.mgr.net_lock:
                if self.net_up:
                    delete_netns(self.netns, self.host_if)
                    self.mgr.record(self.netns, False)
                    self.net_up = False
                if self.mgr.by_ip.get(self.ip) is self:
                    del self.mgr.by_ip[self.ip]
            self.stopped.set()
            log(f"{self.key}: stopped, {self.netns} removed")


class Pods:
    def __init__(self, api, args):
        self.api = api
        self.images = parse_images(args.images)
        self.run_dir = args.run_dir
        self.bridge = args.bridge
        self.gateway = args.gateway
        self.prefix_len = args.prefix_len
        self.state_dir = args.state_dir
        self.lock = threading.Lock()  # runs
        # by_ip and the namespaces: one set up or torn down at a time. Order: a PodRun's
        # stop_lock, then net_lock, never the other way round.
        self.net_lock = threading.Lock()
        self.runs = {}  # uid -> PodRun
        self.by_ip = {}  # pod IP -> PodRun holding it
        os.makedirs(self.run_dir, exist_ok=True)
        if self.state_dir:
            os.makedirs(os.path.join(self.state_dir, "netns"), exist_ok=True)

    def record(self, netns, present):
        """Lists the namespaces this run made in STATE_DIR/netns, for a later run to reap."""
        if not self.state_dir:
            return
        path = os.path.join(self.state_dir, "netns", netns)
        if present:
            open(path, "w").close()
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    @staticmethod
    def wanted(pod):
        st = pod.get("status") or {}
        return (not pod["metadata"].get("deletionTimestamp")
                and pod.get("spec", {}).get("nodeName")
                and st.get("podIP")
                and st.get("phase") not in ("Succeeded", "Failed")
                and not pod.get("spec", {}).get("hostNetwork"))

    def on_event(self, kind, pod):
        uid = pod["metadata"]["uid"]
        with self.lock:
            run = self.runs.get(uid)
            if kind != "DELETED" and self.wanted(pod):
                if run is None:
                    run = PodRun(self, pod)
                    self.runs[uid] = run
                    run.thread.start()
                return
            if run is None:
                return
            del self.runs[uid]
        threading.Thread(target=run.stop, daemon=True).start()

    def on_list(self, pods):
        seen = {p["metadata"]["uid"] for p in pods}
        with self.lock:
            gone = [r for uid, r in self.runs.items() if uid not in seen]
        for r in gone:
            self.on_event("DELETED", r.pod)
        for p in pods:
            self.on_event("MODIFIED", p)

    def stop_all(self):
        with self.lock:
            runs = list(self.runs.values())
            self.runs.clear()
        threads = [threading.Thread(target=r.stop) for r in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


# --- load balancer -------------------------------------------------------------------------


class LoadBalancer:
    """Addresses from a loopback pool for Services of type LoadBalancer, and a TCP proxy on
    each to the Service's ready endpoints. Runs an asyncio loop in its own thread; the informer
    threads hand it the Services and EndpointSlices."""

    def __init__(self, api, pool):
        self.api = api
        net = ipaddress.ip_network(pool)
        self.pool = [str(a) for a in net.hosts()]
        self.loop = asyncio.new_event_loop()
        self.services = {}  # "ns/name" -> Service
        self.slices = {}  # slice uid -> EndpointSlice
        self.alloc = {}  # "ns/name" -> ip
        self.listeners = {}  # ("ns/name", port, ip) -> asyncio.Server
        self.rr = {}
        self.synced = set()
        self.lock = threading.Lock()

    def start(self):
        threading.Thread(target=self.loop.run_forever, name="lb", daemon=True).start()

    # Informer callbacks (other threads): hand over to the loop.
    def on_service_list(self, items):
        self.loop.call_soon_threadsafe(self._svc_list, items)

    def on_service(self, kind, obj):
        self.loop.call_soon_threadsafe(self._svc_event, kind, obj)

    def on_slice_list(self, items):
        self.loop.call_soon_threadsafe(self._slice_list, items)

    def on_slice(self, kind, obj):
        self.loop.call_soon_threadsafe(self._slice_event, kind, obj)

    @staticmethod
    def _key(obj):
        return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"

    @staticmethod
    def _ours(svc):
        spec = svc.get("spec") or {}
        return (spec.get("type") == "LoadBalancer" and not spec.get("loadBalancerClass")
                and not svc["metadata"].get("deletionTimestamp"))

    def _svc_list(self, items):
        keys = {self._key(s) for s in items}
        for k in list(self.services):
            if k not in keys:
                self._svc_event("DELETED", self.services[k])
        # Keep the addresses Services already hold first (a restarted runner), then the rest.
        items = sorted(items, key=lambda s: 0 if self._held(s) else 1)
        for s in items:
            self._svc_event("MODIFIED", s)

    def _held(self, svc):
        ing = (((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or [])
        ip = ing[0].get("ip") if ing else None
        return ip if ip in self.pool else None

    def _svc_event(self, kind, svc):
        key = self._key(svc)
        if kind == "DELETED" or not self._ours(svc):
            self.services.pop(key, None)
            ip = self.alloc.pop(key, None)
            self._sync_listeners(key, None, [])
            if ip:
                log(f"lb: {key} released {ip}")
            return
        self.services[key] = svc
        ip = self.alloc.get(key)
        if ip is None:
            held = self._held(svc)
            used = set(self.alloc.values())
            ip = held if held and held not in used else next((a for a in self.pool if a not in used), None)
            if ip is None:
                log(f"lb: pool exhausted; {key} gets no address")
                return
            self.alloc[key] = ip
            log(f"lb: {key} gets {ip}")
        ports = [p for p in svc["spec"].get("ports") or [] if p.get("protocol", "TCP") == "TCP"]
        self._sync_listeners(key, ip, ports)
        if self._held(svc) != ip:
            threading.Thread(target=self._write_status, args=(svc, ip), daemon=True).start()

    def _write_status(self, svc, ip):
        md = svc["metadata"]
        try:
            self.api.patch(f"/api/v1/namespaces/{md['namespace']}/services/{md['name']}/status",
                           {"status": {"loadBalancer": {"ingress": [{"ip": ip, "ipMode": "VIP"}]}}})
        except ApiError as e:
            if e.status != 404:
                log(f"lb: status of {self._key(svc)}: {e}")

    def _sync_listeners(self, key, ip, ports):
        want = {(key, p["port"], ip): p for p in ports} if ip else {}
        for lk in [lk for lk in self.listeners if lk[0] == key and lk not in want]:
            self.listeners.pop(lk).close()
        for lk, port in want.items():
            if lk in self.listeners:
                continue
            self.listeners[lk] = None
            self.loop.create_task(self._listen(lk, port.get("name", "")))

    async def _listen(self, lk, port_name):
        key, port, ip = lk
        try:
            server = await asyncio.start_server(
                lambda r, w: self._proxy(r, w, key, port_name), ip, port, reuse_address=True)
        except OSError as e:
            log(f"lb: {key}: cannot listen on {ip}:{port}: {e}")
            self.listeners.pop(lk, None)
            return
        if lk not in self.listeners:  # dropped while binding
            server.close()
            return
        self.listeners[lk] = server
        log(f"lb: {key} listens on {ip}:{port}")

    def _slice_list(self, items):
        self.slices = {s["metadata"]["uid"]: s for s in items}

    def _slice_event(self, kind, obj):
        if kind == "DELETED":
            self.slices.pop(obj["metadata"]["uid"], None)
        else:
            self.slices[obj["metadata"]["uid"]] = obj

    def endpoints(self, key, port_name):
        ns, name = key.split("/", 1)
        out = []
        for s in self.slices.values():
            md = s["metadata"]
            if md.get("namespace") != ns or (md.get("labels") or {}).get("kubernetes.io/service-name") != name:
                continue
            if s.get("addressType") not in ("IPv4", "IPv6"):
                continue
            port = next((p.get("port") for p in s.get("ports") or [] if (p.get("name") or "") == port_name), None)
            if port is None:
                continue
            for ep in s.get("endpoints") or []:
                if (ep.get("conditions") or {}).get("ready") is False:
                    continue
                out.extend((a, port) for a in ep.get("addresses") or [])
        return sorted(out)

    async def _proxy(self, reader, writer, key, port_name):
        eps = self.endpoints(key, port_name)
        if not eps:
            writer.close()
            return
        n = self.rr.get((key, port_name), 0)
        self.rr[(key, port_name)] = n + 1
        host, port = eps[n % len(eps)]
        try:
            ur, uw = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return

        async def pipe(r, w):
            try:
                while True:
                    data = await r.read(65536)
                    if not data:
                        break
                    w.write(data)
                    await w.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                try:
                    if w.can_write_eof():
                        w.write_eof()
                except OSError:
                    pass

        await asyncio.gather(pipe(reader, uw), pipe(ur, writer))
        uw.close()
        writer.close()


# --- main ----------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="https://127.0.0.1:PORT")
    ap.add_argument("--ca", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--bridge", required=True, help="host bridge the Pods' veths join")
    ap.add_argument("--gateway", required=True, help="the bridge's address, the Pods' default route")
    ap.add_argument("--prefix-len", type=int, default=16, help="prefix length of the Pod addresses")
    ap.add_argument("--run-dir", required=True, help="volumes and logs, one directory per Pod uid")
    ap.add_argument("--state-dir", default="", help="records the namespaces made, for reaping")
    ap.add_argument("--images", default=os.environ.get("SLUICE_E2E_IMAGES", ""),
                    help="PREFIX=BINARY[+args],... (default $SLUICE_E2E_IMAGES)")
    ap.add_argument("--lb-pool", default="", help="CIDR of LoadBalancer addresses (empty: no LB)")
    args = ap.parse_args()

    api = Api(args.server, args.ca, args.cert, args.key)
    pods = Pods(api, args)
    stop = threading.Event()

    def on_signal(*_):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log(f"podrunner: images {pods.images}, bridge {args.bridge}, lb pool {args.lb_pool or 'none'}")
    threading.Thread(target=informer, daemon=True, args=(
        api, "/api/v1/pods?fieldSelector=spec.nodeName%21%3D", "pods", pods.on_list, pods.on_event, stop)).start()
    if args.lb_pool:
        lb = LoadBalancer(api, args.lb_pool)
        lb.start()
        threading.Thread(target=informer, daemon=True, args=(
            api, "/api/v1/services", "services", lb.on_service_list, lb.on_service, stop)).start()
        threading.Thread(target=informer, daemon=True, args=(
            api, "/apis/discovery.k8s.io/v1/endpointslices", "endpointslices",
            lb.on_slice_list, lb.on_slice, stop)).start()
    while not stop.wait(1):
        pass
    log("podrunner: stopping every Pod")
    pods.stop_all()
    log("podrunner: done")


if __name__ == "__main__":
    main()
