#!/usr/bin/env python3
"""Our servers next to the original Go Doorman's binaries, for real.

  sudo python3 scripts/original-interop.py [--seconds 60] [--only interop|a|b]

Needs root (everything runs in a private network namespace: the original
server binds every interface) and the original's binaries in --original
(default target/original; scripts/original-build.sh builds them, with
doorman_insecure_parent for an original intermediate), our `doorman`
(--doorman, default target/debug/doorman) and the Rust library's client
of the fault harness (--client, default target/debug/doorman-faults).

1. interop: the original Go client library against our leaf (below our
   root): `goclient` without and with `-ratelimit`, and `doorman_client`.
   Each must get the capacity our leaf's status says it holds (and the
   algorithm gives: each wants less than its share), `-ratelimit` must
   let through about that rate, Release() and Close() must return (the
   program exits 0), and the lease must be gone from our leaf when it has.
2. mixed tree A: our intermediate under an original root; B: an original
   intermediate under our root (beside our leaf). In each, two Go clients
   (goclient) on the original side and two Rust clients on ours, all
   wanting 80 of `res` (FAIR_SHARE, capacity 100). Every 100 ms for
   --seconds: Σ of unexpired grants at the root ≤ 100, and at each
   intermediate ≤ the capacity it holds from the root (the original's
   /debug/resources page, our /api/v1/status). A root that ignores
   `outstanding` (the original) hands a lowered grant's difference to
   others at once, so below it Σ may stay above the new grant until the
   clients next ask: allowed for one client refresh interval (+1 s) after
   the drop, and only if no holder's lease grows meanwhile. In A, rust-a1
   comes first so that lowering happens on every run; Σ over the whole
   tree (Go clients at the root + our intermediate's clients) is held to
   100, above it in that window by no more than our intermediate holds
   above its grant. After a warm-up of 20 s, each side's mean share at
   the root must be within 10 % of 50, what FAIR_SHARE gives two clients
   of four.

Prints one line per check ("ok: ..." / "FAILED: ...") and "N passed, M
failed"; exits 1 if any failed. Every process is stopped by its pid.
"""

import argparse
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime

ROOT_TOML = """
[[resources]]
identifier_glob = "res"
capacity = 100
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 5
learning_mode_duration = 0
"""
# The original refuses a config without a "*" entry.
ALGO = "{kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}"
ROOT_YML = f"""resources:
  - identifier_glob: res
    capacity: 100
    algorithm: {ALGO}
  - identifier_glob: "*"
    capacity: 0
    algorithm: {ALGO}
"""
INTER_YML = f"""resources:
  - identifier_glob: "*"
    capacity: 0
    algorithm: {ALGO}
"""
WARM_UP_S = 20.0
TOLERANCE = 0.10
results = {"passed": 0, "failed": 0}


def check(what, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(f"{'ok' if ok else 'FAILED'}: {what}{'' if ok or not detail else ': ' + detail}",
          flush=True)
    return ok


class Procs:
    """Processes this script started; stop() ends each by its pid."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.all = []

    def start(self, name, argv, stdout=None, stdin=subprocess.DEVNULL):
        log = open(os.path.join(self.tmp, f"{name}.log"), "w")
        p = subprocess.Popen(argv, stdout=stdout or log, stderr=log, stdin=stdin, text=True)
        p.name, p.logpath = name, log.name
        self.all.append(p)
        return p

    def log(self, p, lines=15):
        try:
            return "\n".join(open(p.logpath, errors="replace").read().splitlines()[-lines:])
        except OSError as e:
            return str(e)

    def stop(self):
        for p in self.all:
            if p.poll() is None:
                p.terminate()
        for p in self.all:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.all = []


def get(url, timeout=1.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read().decode(errors="replace")
    except Exception:  # noqa: BLE001 - not answering yet
        return None


def wait_for(probe, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = probe()
        if v:
            return v
        time.sleep(0.1)
    return None


# ---- what each server says it granted


def ours(http_port, resource="res"):
    """(capacity, {holder: has}) of unexpired leases at one of our servers."""
    text = get(f"http://127.0.0.1:{http_port}/api/v1/status?resource={resource}")
    if text is None:
        return None
    for r in json.loads(text).get("resources", []):
        if r["id"] == resource:
            return r["capacity"], {l["id"]: l["has"] for l in r["leases"]
                                   if l["expires_in"] > 0}
    return 0.0, {}


EXPIRY = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) ([+-]\d{4})")
ROW = re.compile(r"<tr>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*<td>[^<]*</td>"
                 r"\s*<td>([^<]*)</td>\s*<td>[^<]*</td>\s*</tr>")
CAPACITY = re.compile(r'<td><a href="\?resource=([^"]+)">[^<]*</a></td>\s*<td>([^<]*)</td>')


def original(debug_port, resource="res"):
    """(capacity, {holder: has}) of unexpired leases at an original server,
    read from its /debug/resources page (Go's time.Time as printed)."""
    text = get(f"http://127.0.0.1:{debug_port}/debug/resources?resource={resource}")
    if text is None:
        return None
    text = html.unescape(text)  # "+0000" comes as "&#43;0000"
    now = time.time()
    leases = {}
    for client, expiry, has in ROW.findall(text):
        m = EXPIRY.search(expiry)
        if not m:
            continue
        frac = m.group(1) + ("" if "." in m.group(1) else ".0")
        t = datetime.strptime(f"{frac[:26]} {m.group(2)}", "%Y-%m-%d %H:%M:%S.%f %z")
        if t.timestamp() > now:
            leases[client.strip()] = float(has)
    caps = {r: float(c) for r, c in CAPACITY.findall(text)}
    return caps.get(resource, 0.0), leases


# ---- the trees


class Tree:
    def __init__(self, args, procs, tmp):
        self.a, self.p, self.tmp = args, procs, tmp
        self.port = 16000

    def next_port(self):
        self.port += 1
        return self.port

    def file(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def our_server(self, name, parent=None):
        grpc, http = self.next_port(), self.next_port()
        argv = [self.a.doorman, "server", "--listen", f"127.0.0.1:{grpc}",
                "--http", f"127.0.0.1:{http}"]
        argv += (["--parent", parent] if parent
                 else ["--config", self.file("root.toml", ROOT_TOML)])
        self.p.start(name, argv)
        wait_for(lambda: get(f"http://127.0.0.1:{http}/healthz"))
        return f"127.0.0.1:{grpc}", http

    def original_server(self, name, parent=None):
        grpc, debug = self.next_port(), self.next_port()
        binary = "doorman_insecure_parent" if parent else "doorman"
        config = self.file(f"{name}.yml", INTER_YML if parent else ROOT_YML)
        argv = [os.path.join(self.a.original, binary), f"-config=file:{config}",
                f"-port={grpc}", f"-debug_port={debug}", "-hostname=127.0.0.1", "-logtostderr"]
        if parent:
            argv.append(f"-parent={parent}")
        self.p.start(name, argv)
        wait_for(lambda: get(f"http://127.0.0.1:{debug}/debug/resources"))
        return f"127.0.0.1:{grpc}", debug

    def goclient(self, name, server, wants, seconds, *extra):
        return self.p.start(name, [os.path.join(self.a.original, "goclient"), "-server", server,
                                   "-resource", "res", "-wants", str(wants), "-client_id", name,
                                   "-duration", str(seconds), *extra],
                            stdout=subprocess.PIPE)

    def rust_client(self, name, server, wants):
        # It runs until its standard input ends (then closes, releasing).
        return self.p.start(name, [self.a.client, "client", "--server", server, "--id", name,
                                   "--resource", "res", "--wants", str(wants)],
                            stdin=subprocess.PIPE)


# ---- 1. the original client library against our leaf


def finish(p, within):
    """(exit code, stdout) of a client expected to exit within `within` s."""
    try:
        out, _ = p.communicate(timeout=within)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return None, out


def held_by(http, name):
    got = ours(http)
    return got[1].get(name) if got else None


def released(http, name):
    return wait_for(lambda: held_by(http, name) is None, timeout=2.0)


def go_client_checks(t, leaf, leaf_http, name, wants, seconds, *extra):
    p = t.goclient(name, leaf, wants, seconds, *extra)
    held = wait_for(lambda: held_by(leaf_http, name), timeout=seconds)
    code, out = finish(p, seconds + 10)
    caps = [float(v) for v in re.findall(r"(?m)^capacity (\S+)$", out or "")]
    check(f"{name}: the Go client's capacity ({caps[-1] if caps else None}) is what our leaf "
          f"holds for it ({held}) and what the algorithm gives ({wants})",
          bool(caps) and held == caps[-1] == wants, (out or "") + t.p.log(p))
    check(f"{name}: Release() and Close() return (exit {code} within {seconds + 10} s)",
          code == 0, t.p.log(p))
    check(f"{name}: its lease is released on our leaf", released(leaf_http, name))
    return out or ""


def interop(t):
    root, _ = t.our_server("ours-root")
    leaf, leaf_http = t.our_server("ours-leaf", parent=root)
    go_client_checks(t, leaf, leaf_http, "go-plain", 30, 6)
    out = go_client_checks(t, leaf, leaf_http, "go-ratelimit", 20, 6, "-ratelimit", "-workers", "2")
    m = re.search(r"(?m)^ops (\d+)$", out)
    ops = int(m.group(1)) if m else None
    # 20 per second for at most 6 s (the limiter starts at the first
    # capacity), plus one second of burst.
    check(f"go-ratelimit: ratelimiter.NewQPS let through {ops} in 6 s at 20/s (40..140)",
          ops is not None and 40 <= ops <= 140, out)
    p = t.p.start("doorman-client", [os.path.join(t.a.original, "doorman_client"),
                                     f"-server={leaf}", "-resource=res", "-wants=15",
                                     "-client_id=orig-cli", "-logtostderr"],
                  stdout=subprocess.PIPE)
    code, out = finish(p, 15)
    check(f"doorman_client: exit {code}, printed {out.strip()!r}, the 15 our leaf grants",
          code == 0 and out.strip() == "15", t.p.log(p))
    check("doorman_client: its lease is released on our leaf (Close())",
          released(leaf_http, "orig-cli"))


# ---- 2. mixed trees


# How long a server below a parent that lowered its grant may hold more
# than its new grant: its clients learn the lower amount at their next
# refresh, at most the refresh interval it hands out (the root's 5 s ×
# the decay factor 0.5, rounded down: 2 s), plus 1 s for the request and
# the sampling.
CLIENT_REFRESH_S = 2.0
GRACE_S = CLIENT_REFRESH_S + 1.0


class Lowering:
    """Whether a view's Σ above its capacity is a parent's lowering still
    reaching the clients: the capacity dropped at most GRACE_S ago, what
    was held when the drop was seen was within the capacity before it, and
    no holder has more than it had then (nothing was handed out since
    beyond the new capacity). The original root ignores `outstanding` and
    hands the difference to others at once; the clients below keep their
    larger leases until they next ask (docs/operations.md, "Mixed
    trees")."""

    def __init__(self):
        self.capacity = None
        self.until = -1.0
        self.held = {}  # each holder's has when the last drop was seen
        self.within = False  # Σ then ≤ the capacity before the drop
        self.drops = []
        self.excused = 0
        self.whole = []  # Σ over the whole tree above its capacity, excused

    def see(self, t, capacity, leases):
        total = sum(leases.values())
        if self.capacity is not None and capacity < self.capacity - 1e-6:
            self.until = t + GRACE_S
            self.held = dict(leases)
            self.within = total <= self.capacity + 1e-6
            self.drops.append((round(t, 1), self.capacity, capacity, total))
        self.capacity = capacity

    def excuses(self, t, leases):
        return (t <= self.until and self.within
                and all(v <= self.held.get(k, 0.0) + 1e-6 for k, v in leases.items()))


def sample(seconds, views, sides, at=None, whole=None):
    """Every 100 ms: each view's Σ ≤ its capacity (a view without a fixed
    one may exceed it only within a Lowering); each side's has at the
    root after the warm-up. views: name -> (read(), fixed capacity or
    None); sides: name -> f(root leases) -> has; at: (seconds, action) run
    once that far into the sampling; whole: (the view below the root,
    f(root leases) -> what the root's other clients hold): Σ held by every
    client of the tree ≤ the root's capacity, above it only within that
    view's Lowering and by no more than the view holds above its own
    capacity."""
    over, samples, shares = [], 0, {s: [] for s in sides}
    lowering = {name: Lowering() for name in views}
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        t0 = time.monotonic()
        t = t0 - start
        if at and t >= at[0]:
            at[1]()
            at = None
        readings = {name: read() for name, (read, _) in views.items()}
        for name, got in readings.items():
            if got is None:
                continue
            capacity, leases = got
            total, fixed = sum(leases.values()), views[name][1]
            low = lowering[name]
            low.see(t, capacity, leases)
            limit = fixed if fixed is not None else capacity
            if total > limit + 1e-6 and fixed is None and low.excuses(t, leases):
                low.excused += 1
            elif total > limit + 1e-6:
                over.append(f"{name} at +{t:.1f} s: Σ {total:g} > {limit:g} {leases}")
            if name == "root" and t >= WARM_UP_S:
                for s, f in sides.items():
                    shares[s].append(f(leases))
        if whole and None not in readings.values():
            below, others = whole
            excuser, capacity = lowering[below], views["root"][1]
            below_cap, below_leases = readings[below]
            below_held = sum(below_leases.values())
            held = others(readings["root"][1]) + below_held
            # A root true to its own books leaves the tree over by no more
            # than the lowered view holds above its grant.
            slack = max(0.0, below_held - below_cap)
            if held > capacity + 1e-6 and t <= excuser.until and held <= capacity + slack + 1e-6:
                excuser.whole.append(held)
            elif held > capacity + 1e-6:
                over.append(f"the whole tree at +{t:.1f} s: Σ held {held:g} > {capacity:g}")
        samples += 1
        time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))
    return over, samples, shares, lowering


def judge(label, over, samples, shares, lowering):
    check(f"{label}: Σ of unexpired grants within capacity at every one of {samples} samples "
          f"(100 ms; below a parent that lowered a grant, within {GRACE_S:g} s and no lease "
          "growing)", not over and samples > 0, "; ".join(over[:5]))
    for name, low in lowering.items():
        if low.drops:
            print(f"   {name}: capacity lowered (at +s, from, to, Σ held): {low.drops}; "
                  f"Σ above it at {low.excused} samples after that")
        if low.whole:
            print(f"   the whole tree: above its capacity at {len(low.whole)} samples "
                  f"(100 ms) after that, at most {max(low.whole):g}")
    for side, values in shares.items():
        mean = sum(values) / len(values) if values else 0.0
        check(f"{label}: {side} holds {mean:.1f} of 100 at the root on average after "
              f"{WARM_UP_S:.0f} s (FAIR_SHARE: 50 ± {TOLERANCE:.0%})",
              abs(mean - 50) <= 50 * TOLERANCE, f"{len(values)} samples")


def holders(leases, names):
    return sum(v for k, v in leases.items() if k in names)


def mixed_a(t, seconds):
    """Our intermediate under an original root. rust-a1 comes first and
    holds 80 before the Go clients and rust-a2 arrive, so the original root
    lowers our intermediate's grant while a client holds more: the window
    the checks allow is exercised on every run, not only when timing
    happens to produce it."""
    root, root_debug = t.original_server("orig-root")
    inter, inter_http = t.our_server("ours-inter", parent=root)
    go = ["go-a1", "go-a2"]
    t.rust_client("rust-a1", inter, 80)
    first = wait_for(lambda: (held_by(inter_http, "rust-a1") or 0) >= 80)
    check("A: rust-a1, first, holds 80 from our intermediate", bool(first))

    def the_rest():
        for n in go:
            t.goclient(n, root, 80, seconds + 30)
        t.rust_client("rust-a2", inter, 80)

    views = {"root": (lambda: original(root_debug), 100.0),
             "our intermediate": (lambda: ours(inter_http), None)}
    sides = {"the Go clients": lambda l: holders(l, go),
             "our intermediate": lambda l: sum(v for k, v in l.items() if k not in go)}
    whole = ("our intermediate", lambda l: holders(l, go))
    over, samples, shares, lowering = sample(seconds, views, sides, at=(1.0, the_rest),
                                             whole=whole)
    label = "A (our intermediate under an original root)"
    check(f"{label}: the root lowered our intermediate below what its clients held "
          "(the case the window is for happened)",
          any(d[2] < d[3] for d in lowering["our intermediate"].drops),
          str(lowering["our intermediate"].drops))
    judge(label, over, samples, shares, lowering)


def mixed_b(t, seconds):
    """An original intermediate under our root, beside our leaf."""
    root, root_http = t.our_server("ours-root-b")
    inter, inter_debug = t.original_server("orig-inter", parent=root)
    leaf, _ = t.our_server("ours-leaf-b", parent=root)
    for n in ("go-b1", "go-b2"):
        t.goclient(n, inter, 80, seconds + 30)
    for n in ("rust-b1", "rust-b2"):
        t.rust_client(n, leaf, 80)
    leaf_id = leaf  # our leaf's server id towards its parent: its listen address
    views = {"root": (lambda: ours(root_http), 100.0),
             "the original intermediate": (lambda: original(inter_debug), None)}
    sides = {"the original intermediate": lambda l: sum(v for k, v in l.items() if k != leaf_id),
             "our leaf": lambda l: l.get(leaf_id, 0.0)}
    judge("B (an original intermediate under our root)", *sample(seconds, views, sides))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--original", default="target/original")
    ap.add_argument("--doorman", default="target/debug/doorman")
    ap.add_argument("--client", default="target/debug/doorman-faults")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--only", choices=["interop", "a", "b"])
    a = ap.parse_args()
    for attr in ("original", "doorman", "client"):
        setattr(a, attr, os.path.abspath(getattr(a, attr)))
    if os.environ.get("ORIGINAL_INTEROP_IN_NS") != "1":
        # A private network namespace: the original binds every interface.
        os.execvp("unshare", ["unshare", "-n", "env", "ORIGINAL_INTEROP_IN_NS=1", sys.executable,
                              os.path.abspath(__file__)] + sys.argv[1:])
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    tmp = tempfile.mkdtemp(prefix="original-interop-")
    steps = {"interop": interop, "a": lambda t: mixed_a(t, a.seconds),
             "b": lambda t: mixed_b(t, a.seconds)}
    for name, step in steps.items():
        if a.only and a.only != name:
            continue
        procs = Procs(tmp)
        try:
            step(Tree(a, procs, tmp))
        except Exception as e:  # noqa: BLE001 - a step that breaks is a failure
            check(f"{name}: {type(e).__name__}: {e}", False)
        finally:
            procs.stop()
    print(f"{results['passed']} passed, {results['failed']} failed (logs in {tmp})")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
