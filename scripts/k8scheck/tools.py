"""The external tools and libraries k8s-check runs: kustomize, the doorman
and etcd binaries, PyYAML and kubernetes-validate.

Owns finding them, rendering a kustomization, and running a binary while a
concurrent build may be replacing it. Must not judge what they return:
the checks are in static, crosscheck and smoke.
"""

import os
import re
import shutil
import subprocess
import sys
import time

import yaml

try:
    import kubernetes_validate
    from kubernetes_validate import utils as kv_utils
except ImportError:  # pragma: no cover
    sys.exit("kubernetes-validate is missing: run this with target/venv-k8s/bin/python "
             "(scripts/test.sh creates it)")

from .common import K8S, REPO

# kubernetes_validate and kv_utils are imported by static and cli from here.


def kustomize_cmd():
    k = os.environ.get("KUSTOMIZE")
    if k:
        return [k, "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    sys.exit("no kustomize: install kubectl (it embeds kustomize) or set KUSTOMIZE to a "
             "kustomize binary")


def kustomize_version(cmd):
    if cmd[0].endswith("kubectl"):
        out = subprocess.run(["kubectl", "version", "--client"], capture_output=True, text=True).stdout
        m = re.search(r"Kustomize Version: (\S+)", out)
        return f"kubectl kustomize ({m.group(1) if m else 'unknown version'})"
    out = subprocess.run([cmd[0], "version"], capture_output=True, text=True).stdout.strip()
    return f"{cmd[0]} ({out})"


def render(cmd, rel):
    p = subprocess.run(cmd + [os.path.join(K8S, rel)], capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return [d for d in yaml.safe_load_all(p.stdout) if d], None


def doorman_bin():
    # Absolute: the pods run with their own working directories.
    return os.path.abspath(os.environ.get("DOORMAN_BIN")
                           or os.path.join(REPO, "target", "debug", "doorman"))


def etcd_bin():
    return os.path.abspath(os.environ.get("ETCD_BIN") or shutil.which("etcd") or "/usr/bin/etcd")


def retrying(start):
    """Runs start(), retrying for a while if the binary is missing (a
    concurrent cargo build may be replacing it)."""
    for attempt in range(20):
        try:
            return start()
        except FileNotFoundError:
            if attempt == 19:
                raise
            time.sleep(1)


def run_bin(path, args, **kw):
    return retrying(lambda: subprocess.run([path] + args, capture_output=True, text=True, **kw))


def known_flags(text):
    return set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z0-9][a-z0-9-]*)", text))

