"""The command line of scripts/k8s-check.py: its options, the order of the
checks, and the last line "k8s-check: N passed, M failed".

Must not hold checks itself (static, crosscheck, smoke do), and must not
be run on import: scripts/k8s-check.py calls main() with its docstring.
"""

import argparse
import os
import sys
import time

from .common import EXAMPLES, K8S_VERSION, OPTIONAL, OVERLAYS, R, log
from .crosscheck import check_cert_manager, check_dockerfile, check_external_etcd, check_service_monitors
from .objects import name_of
from .smoke import smoke
from .static import check_configs, check_enums, check_workloads, validate_schemas
from .tools import (doorman_bin, etcd_bin, known_flags, kubernetes_validate, kustomize_cmd,
                    kustomize_version, render, run_bin)


def main(doc):
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--overlay", action="append", choices=OVERLAYS,
                    help="smoke-test only these overlays (default: all)")
    ap.add_argument("--no-smoke", action="store_true", help="render and static checks only")
    ap.add_argument("--keep", action="store_true", help="keep the smoke test's files and logs")
    ap.add_argument("--image", default=os.environ.get("DOORMAN_IMAGE"),
                    help="run the doorman containers from this image with podman (default: "
                         "$DOORMAN_IMAGE; without it, as host processes of DOORMAN_BIN)")
    args = ap.parse_args()
    timeout = float(os.environ.get("SMOKE_TIMEOUT", "60"))

    cmd = kustomize_cmd()
    if not os.path.exists(doorman_bin()):
        time.sleep(10)  # a concurrent build may be replacing it
        if not os.path.exists(doorman_bin()):
            sys.exit(f"{doorman_bin()} not found: build it (cargo build --bin doorman) or set "
                     "DOORMAN_BIN")
    if not os.path.exists(etcd_bin()):
        sys.exit(f"{etcd_bin()} not found: apt-get install etcd-server, or set ETCD_BIN")
    log(f"rendering with {kustomize_version(cmd)}; schemas: kubernetes-validate "
        f"{kubernetes_validate.__version__ if hasattr(kubernetes_validate, '__version__') else ''}"
        f" for Kubernetes {K8S_VERSION}; doorman: {doorman_bin()}; etcd: {etcd_bin()}")
    help_text = run_bin(doorman_bin(), ["server", "--help"]).stdout
    doorman_flags = known_flags(help_text)
    if "--listen" not in doorman_flags:
        sys.exit(f"cannot read the flags of {doorman_bin()} server --help")
    etcd_help = run_bin(etcd_bin(), ["--help"])
    etcd_flags = known_flags(etcd_help.stdout + etcd_help.stderr)

    rendered = {}
    for o in OVERLAYS:
        objs, err = render(cmd, f"overlays/{o}")
        if err:
            R.fail(f"render overlays/{o}", err)
            continue
        R.ok(f"render overlays/{o}: " + ", ".join(sorted(name_of(x) for x in objs)))
        rendered[o] = objs
    optional = {}
    for rel in OPTIONAL:
        objs, err = render(cmd, rel)
        if err:
            R.fail(f"render {rel}", err)
            continue
        R.ok(f"render {rel}: {len(objs)} objects ({', '.join(sorted({x['kind'] for x in objs}))}; "
             "CRDs, not schema-checked)")
        optional[rel] = objs

    for rel in EXAMPLES:
        objs, err = render(cmd, rel)
        if err:
            R.fail(f"render {rel}", err)
            continue
        R.ok(f"render {rel}: " + ", ".join(sorted(name_of(x) for x in objs)))
        rendered[rel] = objs
        check_external_etcd(rel, objs)

    for o, objs in rendered.items():
        label = o if "/" in o else f"overlays/{o}"
        validate_schemas(label, objs)
        check_enums(label, objs)
        check_workloads(label, objs, doorman_flags, etcd_flags)
        check_configs(label, objs)
    certs = optional.get("optional/cert-manager", [])
    if certs:
        check_cert_manager(rendered, certs)
    if "optional/prometheus" in optional:
        check_service_monitors(rendered, optional["optional/prometheus"], certs)
    check_dockerfile()

    if not args.no_smoke:
        for o in args.overlay or OVERLAYS:
            if o in rendered:
                smoke(o, rendered[o], certs, args.keep, timeout, args.image)

    print(f"k8s-check: {R.passed} passed, {R.failed} failed")
    return 1 if R.failed else 0

