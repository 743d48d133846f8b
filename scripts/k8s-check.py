#!/usr/bin/env python3
"""Offline checks of deploy/kubernetes (no cluster needed).

  target/venv-k8s/bin/python scripts/k8s-check.py            # everything
  target/venv-k8s/bin/python scripts/k8s-check.py --no-smoke # render + static checks only
  ... --overlay small                                        # one overlay's smoke test

1. Render every overlay and optional directory with the real kustomize
   (`kubectl kustomize`, or $KUSTOMIZE: a standalone kustomize binary).
2. Validate every rendered object against the Kubernetes schemas of
   K8S_VERSION (default 1.30.0) with kubernetes-validate (strict: unknown
   fields are errors). It does not check enum values, so the enums we use
   (imagePullPolicy, restartPolicy, protocol, probe scheme, ...) are
   checked here, as are the deployment rules of docs/operations.md:
   non-root uid 10001, read-only root file system, no privilege
   escalation, all capabilities dropped, requests and limits, probes on
   /healthz and /readyz, scrape annotations, a PodDisruptionBudget per
   workload, Services that select pods and name existing ports, $(VAR)
   references to variables defined above them, every flag of a Doorman
   container known to `doorman server --help` (and every ETCD_* variable
   to `etcd --help`), the root config passing `doorman config check`, and
   the optional cert-manager and Prometheus objects matching the Secrets
   and Services the overlays use.
3. Smoke test, per overlay: every pod of every Deployment and StatefulSet
   is run on this machine as its container is written: command (or the
   image's entrypoint) + args + env, with $(VAR) expanded as the kubelet
   does (POD_IP=127.0.0.1, the pod's name and namespace from the downward
   API). With --image IMAGE (or DOORMAN_IMAGE; scripts/test.sh passes the
   image scripts/image.sh built), every Doorman container runs as a
   podman container of that image: `podman run --network host` with the
   pod's runAsUser/runAsGroup, fsGroup as a supplementary group (volume
   files belong to it, as the kubelet makes them), --read-only for
   readOnlyRootFilesystem, no-new-privileges, the dropped capabilities,
   and every volume mounted at its mountPath; PID 1 gets SIGTERM on stop.
   etcd pods run as host processes (no etcd image can be pulled here).
   Without an image, every container is a host process (the fallback where
   podman cannot run); the first line of each smoke test says which ran.
   Only addresses and (host processes only) paths are rewritten, and the
   rewrites are printed:
     * every host:port is mapped to a free 127.0.0.1 port: 0.0.0.0 and the
       pod IP to the pod's own port, a Service name to the ports of the
       pods it selects (comma-separated), a StatefulSet pod's DNS name to
       that pod's port;
     * every volume is a directory of the test, filled as the kubelet
       does: a ConfigMap's keys and a Secret's files behind a `..data`
       symlink, an empty directory for a volume claim; a host process gets
       its mountPaths rewritten to these directories, a container gets
       them mounted;
     * a host process's image binary to DOORMAN_BIN (default
       target/debug/doorman) or ETCD_BIN (default `etcd` on PATH, e.g.
       Debian's etcd-server).
   Secrets get certificates made here with openssl: one CA, and per
   Secret one with exactly the names, key type and common name of the
   matching Certificate in optional/cert-manager, usages server and client
   auth. Like pod IPs in a cluster, 127.0.0.1 is in a certificate only if
   the Certificate lists it (etcd's does, for its own loopback dial), so
   TLS name checks are as strict as in a cluster.
   The test waits (SMOKE_TIMEOUT, default 60 s) until every pod's
   readinessProbe (its httpGet path, port and scheme) answers 200 and
   checks the liveness probes and that nothing listens outside 127.0.0.1;
   then a client with a certificate asks a leaf (through its Service) for
   capacity, the root master must see that lease (mutual TLS and the
   root's serve rule), every pod must be ready with the lease in use, the
   root's ConfigMap files are swapped as the kubelet does and every root
   replica must apply the new config, the root's Secret is renewed (new
   key) and every root replica must re-read it. Every process is stopped
   by pid. A process that exits, or a pod never ready, fails the test with
   its log (--keep, or any failure, keeps the files under target/tmp/).

The last line is "N passed, M failed"; the exit status is 1 if any check failed.

This file is only the entry point: the checks live in scripts/k8scheck/
(one module per responsibility, listed in its __init__.py). It must not
hold checks or helpers itself.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from k8scheck.cli import main  # noqa: E402  (needs the scripts directory on sys.path)

if __name__ == "__main__":
    sys.exit(main(__doc__))
