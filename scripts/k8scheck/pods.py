"""The pods of one overlay run on 127.0.0.1: Pod and Smoke plan them (free
ports, the names they may dial), build each container's command line as
the kubelet does (rewriting only addresses and mount paths), start, probe,
scrape and stop them; plus the HTTP and metric helpers the checks use.

Two ways to run a container of the doorman image: with `image` (the
built image, DOORMAN_IMAGE) as a podman container with the pod's user,
groups, read-only root, capabilities and its volumes mounted at their
mountPaths (only addresses are rewritten: --network host); without it,
as a host process of DOORMAN_BIN (mount paths rewritten too). Containers
of other images (etcd) run as host processes either way: no etcd image
can be pulled here.

Must not report results (smoke decides what passes) and must not stop any
process it did not start.
"""

import os
import re
import shutil
import signal
import ssl
import subprocess

from checklib import procs as checklib_procs
from checklib.ports import free_port

from .grpcprobe import grpc_health
from .objects import by_kind, container_port, expand, find, selects, workloads
from .provision import atomic_write
from .tools import doorman_bin, etcd_bin, retrying


class Pod:
    def __init__(self, workload, index):
        self.w = workload
        self.kind = workload["kind"]
        self.name = f"{workload['metadata']['name']}-{index}"
        self.ns = workload["metadata"].get("namespace", "default")
        self.tpl = workload["spec"]["template"]
        self.spec = self.tpl["spec"]
        self.labels = self.tpl["metadata"].get("labels", {})
        self.ports = {}      # containerPort -> local port
        self.dirs = {}       # volume name -> local directory
        self.procs = []      # (container name, Popen, log path)
        self.containers = []  # podman container names (image mode)
        self.dir = None

    def security(self, c):
        """The pod's and the container's securityContext, merged."""
        merged = dict(self.spec.get("securityContext", {}))
        merged.update(c.get("securityContext", {}))
        return merged

    def container_port(self, ref):
        for c in self.spec["containers"]:
            p = container_port(c, ref)
            if p is not None:
                return p
        return None


class Smoke:
    def __init__(self, overlay, objs, certs, tmp, timeout, image=None):
        self.overlay = overlay
        self.image = image
        self.objs = objs
        self.certs = certs
        self.tmp = tmp
        self.timeout = timeout
        self.pods = []
        self.rewrites = []
        self.hosts = {}

    # ---- set-up

    def plan(self):
        for w in workloads(self.objs):
            for i in range(w["spec"].get("replicas", 1)):
                pod = Pod(w, i)
                pod.dir = os.path.join(self.tmp, pod.name)
                os.makedirs(pod.dir)
                for c in pod.spec["containers"]:
                    for p in c.get("ports", []):
                        pod.ports[p["containerPort"]] = free_port()
                self.pods.append(pod)
        # Names a pod may dial: Services (short and qualified) and
        # StatefulSet pods behind their governing Service.
        for s in by_kind(self.objs, "Service"):
            n, ns = s["metadata"]["name"], s["metadata"].get("namespace", "default")
            for h in (n, f"{n}.{ns}", f"{n}.{ns}.svc", f"{n}.{ns}.svc.cluster.local"):
                self.hosts[h] = ("service", s)
        for pod in self.pods:
            if pod.kind == "StatefulSet":
                gov = pod.w["spec"]["serviceName"]
                for h in (f"{pod.name}.{gov}", f"{pod.name}.{gov}.{pod.ns}",
                          f"{pod.name}.{gov}.{pod.ns}.svc",
                          f"{pod.name}.{gov}.{pod.ns}.svc.cluster.local"):
                    self.hosts[h] = ("pod", pod)

    def endpoints(self, host, port, pod):
        own = ("0.0.0.0", "[::]", "127.0.0.1", "localhost")
        if host in own:
            if port not in pod.ports:
                raise ValueError(f"{host}:{port} is no containerPort of {pod.name}")
            return [pod.ports[port]]
        kind, target = self.hosts.get(host, (None, None))
        if kind == "pod":
            if port not in target.ports:
                raise ValueError(f"{host}:{port} is no containerPort of {target.name}")
            return [target.ports[port]]
        if kind == "service":
            sp = [p for p in target["spec"]["ports"] if p["port"] == port]
            if not sp:
                raise ValueError(f"Service {target['metadata']['name']} has no port {port}")
            tp = sp[0].get("targetPort", port)
            pods = [p for p in self.pods if selects(target["spec"].get("selector"), p.labels)]
            if not pods:
                raise ValueError(f"Service {target['metadata']['name']} selects no pod")
            return [p.ports[p.container_port(tp)] for p in pods]
        raise ValueError(f"unknown address {host}:{port} (no Service, pod or own address)")

    ADDR = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)?"
                      r"(?P<host>\[[0-9a-fA-F:.]*\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
                      r":(?P<port>\d{1,5})(?![\d])")

    def rewrite(self, value, pod, mounts, where):
        def sub(m):
            scheme = m.group("scheme") or ""
            ports = self.endpoints(m.group("host"), int(m.group("port")), pod)
            return ",".join(f"{scheme}127.0.0.1:{p}" for p in ports)
        new = self.ADDR.sub(sub, value)
        for mount, local in mounts:
            new = re.sub(re.escape(mount) + r"(?=/|$|,)", local, new)
        if new != value:
            self.rewrites.append(f"{pod.name} {where}: {value}  ->  {new.replace(self.tmp, '$TMP')}")
        return new

    def fs_group(self, pod):
        """The group a container of the image reads its volumes as."""
        if not self.image:
            return None
        return pod.spec.get("securityContext", {}).get("fsGroup")

    def write_volume(self, pod, d, files, mode):
        atomic_write(d, files, mode, self.fs_group(pod))

    def empty_dir(self, pod, d, mode):
        os.makedirs(d, mode=mode)
        group = self.fs_group(pod)
        if group is not None:
            os.chown(d, -1, group)
            os.chmod(d, 0o2770)

    def materialise(self, pod, pki):
        for v in pod.spec.get("volumes", []):
            d = os.path.join(pod.dir, "volumes", v["name"])
            if "configMap" in v:
                cm = find(self.objs, "ConfigMap", v["configMap"]["name"])
                data = dict(cm.get("data") or {})
                if v["configMap"].get("items"):
                    data = {i["path"]: data[i["key"]] for i in v["configMap"]["items"]}
                self.write_volume(pod, d, data, v["configMap"].get("defaultMode", 0o644))
            elif "secret" in v:
                self.write_volume(pod, d, pki.files[v["secret"]["secretName"]],
                                  v["secret"].get("defaultMode", 0o644))
            elif "emptyDir" in v:
                self.empty_dir(pod, d, 0o755)
            else:
                raise ValueError(f"{pod.name}: volume {v['name']}: kind not supported by the test")
            pod.dirs[v["name"]] = d
        for t in pod.w["spec"].get("volumeClaimTemplates", []):
            d = os.path.join(pod.dir, "volumes", t["metadata"]["name"])
            self.empty_dir(pod, d, 0o700)
            pod.dirs[t["metadata"]["name"]] = d

    def in_image(self, c):
        """Whether container c runs from the built doorman image."""
        return bool(self.image) and image_name(c) == "doorman"

    def command_line(self, pod, c):
        """command + args + env as the kubelet builds them, then rewritten."""
        fields = {"metadata.name": pod.name, "metadata.namespace": pod.ns,
                  "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1",
                  "spec.nodeName": "k8s-check-node"}
        env = {}
        for e in c.get("env", []):
            if "value" in e:
                missing = []
                env[e["name"]] = expand(e["value"], env, missing)
                if missing:
                    raise ValueError(f"{pod.name}: env {e['name']}: $({missing[0]}) is not defined "
                                     "above it")
            elif "fieldRef" in e.get("valueFrom", {}):
                env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                raise ValueError(f"{pod.name}: env {e['name']}: valueFrom not supported by the test")
        image = image_name(c)
        binaries = {"/usr/local/bin/doorman": doorman_bin(), "/usr/local/bin/etcd": etcd_bin()}
        entrypoints = {"doorman": ["/usr/local/bin/doorman"]}  # deploy/Dockerfile
        command = c.get("command") or entrypoints.get(image)
        if not command:
            raise ValueError(f"{pod.name}: image {c['image']}: entrypoint unknown to the test")
        missing = []
        argv = [expand(a, env, missing) for a in command + c.get("args", [])]
        if missing:
            raise ValueError(f"{pod.name}: command/args use undefined $({missing[0]})")
        if argv[0] not in binaries:
            raise ValueError(f"{pod.name}: {argv[0]}: no local binary for it")
        mounts = sorted(((m["mountPath"], pod.dirs[m["name"]]) for m in c.get("volumeMounts", [])),
                        key=lambda x: -len(x[0]))
        if self.in_image(c):
            mounts = []  # mounted where the manifest says
        else:
            argv[0] = binaries[argv[0]]
        argv = argv[:1] + [self.rewrite(a, pod, mounts, "arg") for a in argv[1:]]
        env = {k: self.rewrite(v, pod, mounts, f"env {k}") for k, v in env.items()}
        for k, v in list(env.items()) + [("argv", " ".join(argv))]:
            if re.search(r"0\.0\.0\.0|\[::\]", v):
                raise ValueError(f"{pod.name}: {k} still binds a wildcard address: {v}")
        return argv, env

    def podman_run(self, pod, c, argv, env):
        """`podman run` of container c from the image, as the kubelet would
        run it (user, groups, read-only root, capabilities, volumes, env)."""
        sc = pod.security(c)
        name = f"k8s-check-{self.overlay}-{pod.name}-{c['name']}"
        run = ["podman", "run", "--rm", "--pull=never", "--name", name, "--network", "host",
               "--hostname", pod.name, "--entrypoint", argv[0]]
        if "runAsUser" in sc:
            run += ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}"]
        if "fsGroup" in pod.spec.get("securityContext", {}):
            run += ["--group-add", str(pod.spec["securityContext"]["fsGroup"])]
        if sc.get("readOnlyRootFilesystem"):
            run.append("--read-only")
        if sc.get("allowPrivilegeEscalation") is False:
            run += ["--security-opt", "no-new-privileges"]
        for cap in sc.get("capabilities", {}).get("drop", []):
            run += ["--cap-drop", cap.lower()]
        for m in c.get("volumeMounts", []):
            ro = ":ro" if m.get("readOnly") else ""
            run += ["-v", f"{pod.dirs[m['name']]}:{m['mountPath']}{ro}"]
        for k, v in env.items():
            run += ["-e", f"{k}={v}"]
        subprocess.run(["podman", "rm", "-f", "--ignore", name], capture_output=True)
        pod.containers.append(name)
        return run + [self.image] + argv[1:]

    def start(self, pod, pki):
        self.materialise(pod, pki)
        for c in pod.spec["containers"]:
            argv, env = self.command_line(pod, c)
            if self.in_image(c):
                argv, env = self.podman_run(pod, c, argv, env), {}
            full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": pod.dir,
                        "HOSTNAME": pod.name}
            for k in ("CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "TMPDIR"):
                if k in os.environ:
                    full_env[k] = os.environ[k]
            full_env.update(env)
            logpath = os.path.join(pod.dir, f"{c['name']}.log")
            logf = open(logpath, "w")
            p = retrying(lambda: subprocess.Popen(
                argv, env=full_env, cwd=pod.dir, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True))
            logf.close()
            pod.procs.append((c["name"], p, logpath))

    # ---- probes

    def probe(self, pod, which="readinessProbe"):
        """(status, body) of the pod's first container probe as the kubelet
        runs it: an httpGet's HTTP status, or for a grpc probe a real gRPC
        health check (grpcprobe.py: 200 when SERVING); or an error string."""
        for c in pod.spec["containers"]:
            probe = c.get(which) or {}
            grpc = probe.get("grpc")
            if grpc:
                port = pod.ports[container_port(c, grpc["port"])]
                return grpc_health(port, grpc.get("service", ""))
            get = probe.get("httpGet")
            if not get:
                continue
            port = pod.ports[container_port(c, get["port"])]
            scheme = get.get("scheme", "HTTP").lower()
            url = f"{scheme}://127.0.0.1:{port}{get['path']}"
            return http_get(url)
        return (None, "no httpGet or grpc probe")

    def metrics(self, pod):
        """/metrics of the pod's first container with a liveness httpGet
        (the readiness probe may be grpc), on that probe's port and scheme."""
        for c in pod.spec["containers"]:
            get = (c.get("livenessProbe") or {}).get("httpGet")
            if get:
                port = pod.ports[container_port(c, get["port"])]
                return http_get(f"{get.get('scheme', 'HTTP').lower()}://127.0.0.1:{port}/metrics")
        return (None, "")

    def exited(self):
        return [(pod, cn, p, lp) for pod in self.pods for cn, p, lp in pod.procs
                if p.poll() is not None]

    def logs(self, pod, lines=40):
        out = []
        for cn, p, lp in pod.procs:
            code = p.poll()
            state = "running" if code is None else f"exited with {code}"
            out.append(f"--- {pod.name}/{cn} (pid {p.pid}, {state}), last {lines} lines of {lp}:")
            try:
                text = re.sub(r"\x1b\[[0-9;]*m", "", open(lp, errors="replace").read())
                out += text.splitlines()[-lines:]
            except OSError as e:
                out.append(str(e))
        return "\n".join(out)

    def stop(self):
        procs = [(pod, cn, p) for pod in self.pods for cn, p, _ in pod.procs]
        for _, _, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        slow = []
        for pod, cn, p in procs:
            grace = pod.spec.get("terminationGracePeriodSeconds", 30)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                slow.append(f"{pod.name}/{cn} (pid {p.pid}) still running {grace} s after SIGTERM")
                p.kill()
                p.wait()
        for pod in self.pods:
            for name in pod.containers:
                subprocess.run(["podman", "rm", "-f", "--ignore", name], capture_output=True)
        return slow

    def container_pids(self):
        """Host pids of the image's containers (their PID 1)."""
        pids = set()
        for pod in self.pods:
            for name in pod.containers:
                out = subprocess.run(["podman", "inspect", "--format", "{{.State.Pid}}", name],
                                     capture_output=True, text=True).stdout.strip()
                if out.isdigit() and out != "0":
                    pids.add(out)
        return pids

    def listening_outside_loopback(self):
        """Sockets our processes listen on that are not on 127.0.0.1."""
        pids = {str(p.pid) for pod in self.pods for _, p, _ in pod.procs}
        pids |= self.container_pids()
        if not shutil.which("ss"):
            return None
        out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
        bad = []
        for line in out.splitlines():
            found = set(re.findall(r"pid=(\d+)", line)) & pids
            if found and not line.split()[3].startswith("127.0.0.1:"):
                bad.append(line)
        return bad


def image_name(c):
    """A container's image without registry, tag or digest: `doorman`, `etcd`."""
    return c["image"].split("@")[0].split(":")[0].rsplit("/", 1)[-1]


def http_get(url, timeout=2.0, ctx=None):
    if ctx is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE   # as the kubelet's HTTPS probes
    return checklib_procs.http_get(url, timeout=timeout, ctx=ctx)


def metric_value(text, name, **labels):
    total = None
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = re.match(r"([a-z_:]+)(\{[^}]*\})?\s+(\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total = (total or 0) + float(m.group(3))
    return total

