#!/usr/bin/env python3
"""Checks the Grafana dashboard and the Prometheus alert rules in deploy/.

    scripts/check-monitoring.py               # everything (needs target/debug/doorman)
    scripts/check-monitoring.py --static-only # no servers: structure, promtool, PromQL
    DOORMAN_BIN=target/release/doorman scripts/check-monitoring.py

1. deploy/grafana/doorman.json: schemaVersion >= 36, a `datasource` variable
   of type datasource (prometheus), job/instance/template variables, every
   panel (rows aside) has targets with an expr, panel and target datasources
   refer to ${datasource}, panel ids are unique. Every expr (variables
   replaced) is parsed by promtool.
2. promtool check rules deploy/prometheus/alerts.yml and
   promtool test rules deploy/prometheus/alerts_test.yml.
3. Every metric name used by the dashboard (panels and variable queries)
   and the alert rules is exported by a real server: a root (TLS, bearer
   tokens, [[access]] rules, one resource template), a leaf below it and a
   leaf whose parent does not answer are started on 127.0.0.1 (free ports),
   driven so that event-only series exist (a lease through the leaf, a
   refused token, a denied acquire and read, an invalid request, a bulk
   request with a repeated id, a plaintext connection to the TLS port, a
   certificate reload, parent RPCs that fail), and their /metrics scraped.
   Names used but exported by none are listed under MISSING.

Needs python3, promtool (PROMTOOL, target/tools/prometheus/usr/bin/promtool
or PATH; scripts/test.sh installs it), openssl and curl (HTTP/2) for step 3,
and PyYAML (if it is not importable, a venv with it is made under
target/monitoring-venv). Exits 1 on any failure.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASHBOARD = os.path.join(ROOT, "deploy/grafana/doorman.json")
ALERTS = os.path.join(ROOT, "deploy/prometheus/alerts.yml")
ALERTS_TEST = os.path.join(ROOT, "deploy/prometheus/alerts_test.yml")
VENV = os.path.join(ROOT, "target/monitoring-venv")


def ensure_yaml():
    """Imports PyYAML, or re-runs this script in a venv under target/ that has it."""
    try:
        import yaml  # noqa: F401

        return
    except ImportError:
        pass
    if os.environ.get("CHECK_MONITORING_IN_VENV"):
        sys.exit("PyYAML is missing even in " + VENV)
    py = os.path.join(VENV, "bin", "python3")
    if not os.path.exists(py):
        print(f"==> making {VENV} with PyYAML", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "pyyaml"], check=True)
    env = dict(os.environ, CHECK_MONITORING_IN_VENV="1")
    os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)


# ---------------------------------------------------------------------------
# PromQL: which metric names an expression selects

# Functions (as of Prometheus 2.x/3.x) and aggregation operators.
FUNCTIONS = set("""
abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes
clamp clamp_max clamp_min cos cosh count_over_time days_in_month day_of_month day_of_week
day_of_year deg delta deriv double_exponential_smoothing exp floor group histogram_avg
histogram_count histogram_fraction histogram_quantile histogram_stddev histogram_stdvar
histogram_sum holt_winters hour idelta increase info irate label_join label_replace last_over_time
ln log10 log2 mad_over_time max_over_time min_over_time minute month pi predict_linear
present_over_time quantile_over_time rad rate resets round scalar sgn sin sinh sort sort_by_label
sort_by_label_desc sort_desc sqrt stddev_over_time stdvar_over_time sum_over_time tan tanh time
timestamp vector year
sum min max avg stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
""".split())
# Words that are never metric names wherever they stand.
KEYWORDS = set("""
by without on ignoring group_left group_right bool and or unless offset atan2 start end
sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
""".split())

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
NAME_MATCHER = re.compile(r'__name__\s*=\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')')
GRAFANA_VAR = re.compile(r"\$\{[^}]*\}|\[\[[^\]]*\]\]|\$\w+")
LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
IDENT = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)")


def replace_grafana_vars(expr):
    """Grafana variables as PromQL can parse them: intervals become 5m, others 1."""

    def sub(m):
        v = m.group(0)
        return "5m" if ("interval" in v or "range" in v) else "1"

    # Inside strings (label matchers) a variable must stay a string.
    out, pos = [], 0
    for m in STRING.finditer(expr):
        out.append(GRAFANA_VAR.sub(sub, expr[pos:m.start()]))
        out.append(GRAFANA_VAR.sub(".*", m.group(0)))
        pos = m.end()
    out.append(GRAFANA_VAR.sub(sub, expr[pos:]))
    return "".join(out)


def metric_names(expr):
    """(names, problems): the metric names an expression selects."""
    names, problems = set(), []
    expr = replace_grafana_vars(expr)
    for m in NAME_MATCHER.finditer(expr):
        names.add(m.group(1)[1:-1])
    if re.search(r"__name__\s*(=~|!=|!~)", expr):
        problems.append("__name__ matched by regex or negation: cannot check it")
    s = STRING.sub('""', expr)
    s = re.sub(r"#[^\n]*", " ", s)  # comments
    s = re.sub(r"\{[^{}]*\}", " {} ", s)  # label matchers
    s = re.sub(r"\[[^\[\]]*\]", " ", s)  # ranges, subqueries
    s = LABEL_LIST.sub(r" \1 ", s)  # by (...), on (...), group_left (...)
    for m in IDENT.finditer(s):
        word = m.group(1)
        rest = s[m.end():].lstrip()
        if word in KEYWORDS or word.lower() in ("inf", "nan"):
            continue
        if rest.startswith("("):
            if word not in FUNCTIONS:
                problems.append(f"unknown function {word}()")
            continue
        names.add(word)
    return names, problems


def variable_query_names(query):
    """Names in a Grafana Prometheus variable query (label_values, query_result, metrics)."""
    q = query.strip()
    m = re.fullmatch(r"label_values\((.*),\s*([\w.]+)\s*\)", q, re.S)
    if m:
        return metric_names(m.group(1))
    if re.fullmatch(r"label_values\(\s*[\w.]+\s*\)", q) or q.startswith("label_names(") or q.startswith("metrics("):
        return set(), []
    m = re.fullmatch(r"query_result\((.*)\)", q, re.S)
    if m:
        return metric_names(m.group(1))
    return set(), [f"unrecognised variable query {q!r}"]


# ---------------------------------------------------------------------------
# The dashboard


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def is_ds_var(ds):
    return isinstance(ds, dict) and ds.get("uid") in ("${datasource}", "$datasource") and ds.get("type") in (
        "prometheus",
        None,
    )


def check_dashboard(d):
    """(problems, {expr: where}, {name: [where]}) of the dashboard."""
    problems, exprs, used = [], {}, {}
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        problems.append(f"schemaVersion {d.get('schemaVersion')!r}: want >= 36")
    for key in ("uid", "title"):
        if not d.get(key):
            problems.append(f"no dashboard {key}")
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("no `datasource` variable of type datasource with query prometheus")
    for name in ("job", "instance", "template"):
        if name not in variables:
            problems.append(f"no `{name}` variable")
    for name, v in variables.items():
        if v.get("type") != "query":
            continue
        if not is_ds_var(v.get("datasource")):
            problems.append(f"variable {name}: datasource {v.get('datasource')!r} is not ${{datasource}}")
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        if not q:
            problems.append(f"variable {name}: no query")
            continue
        found, bad = variable_query_names(q)
        problems += [f"variable {name}: {b}" for b in bad]
        for n in found:
            used.setdefault(n, []).append(f"variable ${name}")
        m = re.fullmatch(r"label_values\((.*),\s*[\w.]+\s*\)", q.strip(), re.S)
        if m:
            exprs[m.group(1)] = f"variable ${name}"
    ids = {}
    for p in all_panels(d.get("panels", [])):
        title = p.get("title") or "(untitled)"
        where = f"panel {p.get('id')} {title!r}"
        if "id" not in p:
            problems.append(f"{where}: no id")
        elif p["id"] in ids:
            problems.append(f"{where}: id also used by {ids[p['id']]!r}")
        else:
            ids[p["id"]] = title
        gp = p.get("gridPos", {})
        if not all(isinstance(gp.get(k), int) for k in ("x", "y", "w", "h")) or gp.get("x", 0) + gp.get("w", 0) > 24:
            problems.append(f"{where}: bad gridPos {gp!r}")
        if p.get("type") == "row":
            continue
        if not p.get("title"):
            problems.append(f"{where}: no title")
        if not is_ds_var(p.get("datasource")):
            problems.append(f"{where}: datasource {p.get('datasource')!r} is not ${{datasource}}")
        targets = p.get("targets") or []
        if not targets:
            problems.append(f"{where}: no targets")
        refids = set()
        for t in targets:
            ref = t.get("refId")
            if not ref or ref in refids:
                problems.append(f"{where}: target refId {ref!r} missing or repeated")
            refids.add(ref)
            if "datasource" in t and not is_ds_var(t["datasource"]):
                problems.append(f"{where} target {ref}: datasource {t['datasource']!r} is not ${{datasource}}")
            expr = (t.get("expr") or "").strip()
            if not expr:
                problems.append(f"{where} target {ref}: no expr")
                continue
            exprs[expr] = f"{where} target {ref}"
            found, bad = metric_names(expr)
            problems += [f"{where} target {ref}: {b}" for b in bad]
            if not found:
                problems.append(f"{where} target {ref}: selects no metric: {expr}")
            for n in found:
                used.setdefault(n, []).append(f"dashboard {title!r}")
    return problems, exprs, used


# ---------------------------------------------------------------------------
# promtool


def find_promtool():
    for c in (os.environ.get("PROMTOOL"), os.path.join(ROOT, "target/tools/prometheus/usr/bin/promtool")):
        if c and os.access(c, os.X_OK):
            return c
    return shutil.which("promtool")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def promtool_checks(promtool, dashboard_exprs, tmp):
    """Problems from promtool: the rules, their tests, and the dashboard's PromQL."""
    problems = []
    for args in (["check", "rules", ALERTS], ["test", "rules", ALERTS_TEST]):
        r = run([promtool] + args, cwd=ROOT)
        shown = " ".join(["promtool"] + [os.path.relpath(a, ROOT) if a.startswith("/") else a for a in args])
        print(f"$ {shown}\n" + (r.stdout + r.stderr).rstrip())
        if r.returncode != 0:
            problems.append(f"{shown} failed")
    # Every dashboard expression, variables replaced, must parse: promtool
    # parses recording rules.
    import yaml

    rules = [
        {"record": f"dashboard:expr_{i}", "expr": replace_grafana_vars(e)}
        for i, e in enumerate(sorted(dashboard_exprs))
    ]
    path = os.path.join(tmp, "dashboard-exprs.yml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, width=1000)
    r = run([promtool, "check", "rules", path])
    if r.returncode != 0:
        problems.append("dashboard PromQL does not parse:\n" + (r.stdout + r.stderr).rstrip())
    else:
        print(f"dashboard: {len(rules)} PromQL expressions parse (promtool check rules)")
    return problems


def alert_names(rules_doc):
    """{name: [where]} and problems for the alert rules."""
    used, problems = {}, []
    for g in rules_doc.get("groups", []):
        for rule in g.get("rules", []):
            who = rule.get("alert") or rule.get("record")
            if rule.get("alert"):
                labels, ann = rule.get("labels", {}), rule.get("annotations", {})
                if labels.get("severity") not in ("critical", "warning", "info"):
                    problems.append(f"alert {who}: severity label critical|warning|info")
                for a in ("summary", "description", "runbook_url"):
                    if not ann.get(a):
                        problems.append(f"alert {who}: no {a} annotation")
            found, bad = metric_names(rule.get("expr", ""))
            problems += [f"alert {who}: {b}" for b in bad]
            for n in found:
                used.setdefault(n, []).append(f"alert {who}")
    return used, problems


# ---------------------------------------------------------------------------
# Real servers

# Series Prometheus itself makes for every target or alert: no server exports them.
PROMETHEUS_GENERATED = {
    "up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
    "scrape_series_added", "ALERTS", "ALERTS_FOR_STATE",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ROOT_CONFIG = """\
[[resources]]
identifier_glob = "check/*"
capacity = 100.0
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 60
refresh_interval = 5

[[access]]
identities = ["leaf"]
actions = ["serve"]

[[access]]
identities = ["client"]
actions = ["acquire"]
"""


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_tls(tmp):
    """A CA and a server certificate for 127.0.0.1, signed by it."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=check-ca", cwd=tmp)
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=root", cwd=tmp)
    with open(os.path.join(tmp, "ext.cnf"), "w") as f:
        f.write(
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
            "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
        )
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=tmp,
    )


def grpc_frame_duplicate_ids():
    """A GetCapacity request (gRPC frame) asking twice for check/dup: one entry is left out."""

    def field(num, payload):
        return bytes([num << 3 | 2, len(payload)]) + payload

    def entry(rid, wants):
        return field(1, rid) + bytes([2 << 3, 0]) + bytes([4 << 3 | 1]) + struct.pack("<d", wants)

    msg = field(1, b"check-monitoring") + field(2, entry(b"check/dup", 1.0)) + field(2, entry(b"check/dup", 2.0))
    return b"\x00" + struct.pack(">I", len(msg)) + msg


class Servers:
    def __init__(self, binary, tmp):
        self.bin, self.tmp, self.procs = binary, tmp, {}

    def start(self, name, args):
        log = open(os.path.join(self.tmp, f"{name}.log"), "w")
        p = subprocess.Popen([self.bin, "server"] + args, stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp)
        self.procs[name] = p

    def log_tail(self, name, n=20):
        with open(os.path.join(self.tmp, f"{name}.log"), errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.time() + 5
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def http_get(url, ctx=None, token=None, timeout=5):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def wait_healthy(servers, name, url, ctx=None, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if servers.procs[name].poll() is not None:
            raise RuntimeError(f"{name} exited:\n{servers.log_tail(name)}")
        try:
            if http_get(url + "/healthz", ctx, timeout=1)[0] == 200:
                return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{name} not healthy after {seconds} s:\n{servers.log_tail(name)}")


def exported_names(text):
    """(sample names, {declared name: type}) of a Prometheus text exposition."""
    samples, types = set(), {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
        elif line.startswith("# HELP "):
            types.setdefault(line.split()[2], "untyped")
        elif line and not line.startswith("#"):
            samples.add(re.match(r"[A-Za-z_:][\w:]*", line).group(0))
    return samples, types


def scrape_real_servers(binary, tmp):
    """{server: /metrics text} from a root, a leaf and a leaf without a parent, driven a little."""
    for tool in ("openssl", "curl"):
        if not shutil.which(tool):
            raise RuntimeError(f"{tool} not found")
    make_tls(tmp)
    tokens = {"leaf": "leaf-token-check-monitoring", "client": "client-token-check-monitoring"}
    for who, tok in tokens.items():
        with open(os.path.join(tmp, f"{who}.token"), "w") as f:
            f.write(tok + "\n")
    with open(os.path.join(tmp, "tokens.toml"), "w") as f:
        for who, tok in tokens.items():
            f.write(f'[[token]]\nidentity = "{who}"\ntoken = "{tok}"\n\n')
    with open(os.path.join(tmp, "root.toml"), "w") as f:
        f.write(ROOT_CONFIG)
    port = {k: free_port() for k in ("root", "root_http", "leaf", "leaf_http", "orphan", "orphan_http", "dead")}
    addr = {k: f"127.0.0.1:{v}" for k, v in port.items()}
    ctx = ssl.create_default_context(cafile=os.path.join(tmp, "ca.pem"))
    url = {
        "root": f"https://{addr['root_http']}",
        "leaf": f"http://{addr['leaf_http']}",
        "orphan": f"http://{addr['orphan_http']}",
    }
    ctxs = {"root": ctx, "leaf": None, "orphan": None}

    servers = Servers(binary, tmp)
    try:
        servers.start("root", [
            "--config", "root.toml", "--listen", addr["root"], "--http", addr["root_http"],
            "--tls-cert", "server.pem", "--tls-key", "server.key", "--auth-tokens", "tokens.toml",
        ])
        servers.start("leaf", [
            "--parent", addr["root"], "--parent-tls-ca", "ca.pem", "--parent-token-file", "leaf.token",
            "--listen", addr["leaf"], "--http", addr["leaf_http"],
        ])
        servers.start("orphan", ["--parent", addr["dead"], "--listen", addr["orphan"], "--http", addr["orphan_http"]])
        for name in ("root", "leaf", "orphan"):
            wait_healthy(servers, name, url[name], ctxs[name])

        def get(what, server, *extra, expect_ok=True):
            cmd = [binary, "get", "--server", server, "--timeout", "3"] + list(extra)
            r = run(cmd, cwd=tmp)
            ok = r.returncode == 0
            note = "ok" if ok else (r.stderr.strip().splitlines() or ["failed"])[-1]
            flag = "" if expect_ok is None or ok == expect_ok else "   <-- unexpected"
            print(f"  {what}: {note}{flag}")

        root_tls = ["--tls-ca", "ca.pem"]
        print("driving the servers:")
        get("lease through the leaf", addr["leaf"], "--resource", "check/a", "--wants", "5")
        get("lease at the root", addr["root"], *root_tls, "--token-file", "client.token",
            "--resource", "check/b", "--wants", "3")
        get("acquire without an access rule (PermissionDenied)", addr["root"], *root_tls, "--token-file",
            "leaf.token", "--resource", "check/a", "--wants", "1", expect_ok=False)
        get("empty resource id (InvalidArgument)", addr["root"], *root_tls, "--token-file", "client.token",
            "--resource", "", "--wants", "1", expect_ok=False)
        get("lease at a leaf whose parent is down", addr["orphan"], "--resource", "check/a", "--wants", "1",
            expect_ok=None)
        body = os.path.join(tmp, "duplicate.bin")
        with open(body, "wb") as f:
            f.write(grpc_frame_duplicate_ids())
        r = run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "-m", "5",
                 "-H", "content-type: application/grpc", "-H", "te: trailers", "--data-binary", "@" + body,
                 f"http://{addr['leaf']}/doorman.Capacity/GetCapacity"])
        print(f"  bulk request with a repeated id (curl, HTTP/2): HTTP {r.stdout or r.stderr.strip()}")
        with socket.create_connection(("127.0.0.1", port["root"]), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                s.recv(1024)
            except OSError:
                pass
        print("  plaintext connection to the TLS gRPC port: sent")
        status, _ = http_get(url["root"] + "/metrics", ctx, token="not-a-known-token")
        print(f"  unknown bearer token on /metrics: HTTP {status}")
        status, _ = http_get(url["root"] + "/debug/status", ctx, token=tokens["client"])
        print(f"  status page without a read rule: HTTP {status}")
        later = time.time() + 5
        os.utime(os.path.join(tmp, "server.pem"), (later, later))
        print("  certificate file touched (re-read within --config-poll-interval, 1 s)")
        time.sleep(2.5)  # the certificate poll, the leaves' parent RPCs
        texts = {}
        for name in ("root", "leaf", "orphan"):
            status, text = http_get(url[name] + "/metrics", ctxs[name])
            if status != 200:
                raise RuntimeError(f"{name} /metrics: HTTP {status}: {text[:200]}")
            texts[name] = text
        return texts
    finally:
        servers.stop()


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--static-only", action="store_true", help="skip starting servers")
    ap.add_argument("--bin", default=os.environ.get("DOORMAN_BIN", os.path.join(ROOT, "target/debug/doorman")))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, certificates)")
    args = ap.parse_args()
    ensure_yaml()
    import yaml

    failures = []
    tmp = tempfile.mkdtemp(prefix="check-monitoring-")
    try:
        print("== dashboard structure:", os.path.relpath(DASHBOARD, ROOT))
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        problems, exprs, used = check_dashboard(dashboard)
        n_panels = sum(1 for p in all_panels(dashboard.get("panels", [])) if p.get("type") != "row")
        for p in problems:
            print("  PROBLEM:", p)
        if not problems:
            print(f"  ok: {n_panels} panels, {len(exprs)} expressions, schemaVersion {dashboard['schemaVersion']}")
        failures += problems

        print("== alert rules:", os.path.relpath(ALERTS, ROOT))
        with open(ALERTS) as f:
            rules_doc = yaml.safe_load(f)
        alert_used, problems = alert_names(rules_doc)
        for p in problems:
            print("  PROBLEM:", p)
        failures += problems
        for n, w in alert_used.items():
            used.setdefault(n, []).extend(w)

        print("== promtool")
        promtool = find_promtool()
        if not promtool:
            failures.append("promtool not found (apt-get install prometheus, or run scripts/test.sh)")
            print("  PROBLEM: promtool not found")
        else:
            failures += promtool_checks(promtool, exprs, tmp)

        print(f"== metric names used by the dashboard and the alerts: {len(used)}")
        if args.static_only:
            for n in sorted(used):
                print("  ", n)
        else:
            if not os.access(args.bin, os.X_OK):
                raise SystemExit(f"{args.bin} not found: cargo build --bin doorman (or set DOORMAN_BIN)")
            print(f"== servers: {os.path.relpath(args.bin, ROOT)} (root with TLS and tokens, leaf, leaf without parent)")
            texts = scrape_real_servers(args.bin, tmp)
            samples, declared = set(), {}
            for name, text in texts.items():
                s, t = exported_names(text)
                print(f"  {name}: {len(s)} sample names, {len(t)} declared")
                samples |= s
                declared.update(t)
            exported = samples | set(declared) | PROMETHEUS_GENERATED
            for base, typ in declared.items():
                if typ in ("histogram", "summary"):
                    exported |= {base + "_sum", base + "_count"} | ({base + "_bucket"} if typ == "histogram" else set())
            missing, misused = [], []
            for n in sorted(used):
                if declared.get(n) in ("histogram", "summary"):
                    misused.append(n)  # a histogram's own name selects no series
                elif n not in exported:
                    missing.append(n)
            for n in misused:
                where = sorted(set(used[n]))
                print(f"  HISTOGRAM NAME: {n} selects nothing; use {n}_bucket, _sum or _count ({', '.join(where)})")
                failures.append(f"{n} used as a series")
            if missing:
                width = max(len(n) for n in missing)
                print(f"MISSING: {len(missing)} metric names used but exported by no server:")
                for n in missing:
                    where = sorted(set(used[n]))
                    print(f"  {n:<{width}}  {', '.join(where[:3])}{' …' if len(where) > 3 else ''}")
                failures.append(f"{len(missing)} metric names missing")
                print("MISSING NAMES (one line): " + " ".join(missing))
            else:
                print(f"  ok: all {len(used)} names are exported")
            unused = sorted(
                n for n in samples
                if n not in used
                and not any(n == b + suf and b + "_bucket" in used for b in declared for suf in ("_sum", "_count"))
            )
            if unused:
                print("  (exported but on neither the dashboard nor the alerts: " + ", ".join(unused) + ")")
    finally:
        if args.keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    if failures:
        print(f"FAILED: {len(failures)} problem(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
