"""Constants, the pass/fail tally and progress lines of k8s-check.

Owns where the manifests are, which overlays and directories are checked,
the Kubernetes version and uid the rules require, the enum tables, and R,
the one Results every check reports to. Must not render, validate or start
anything, and must not import the other k8scheck modules.
"""

import os
import sys

# scripts/k8scheck/common.py -> the repository.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.environ.get("K8S_DIR") or os.path.join(REPO, "deploy", "kubernetes")
OVERLAYS = ["small", "production"]
EXAMPLES = ["examples/external-etcd"]   # rendered and checked, not smoke-tested
OPTIONAL = ["optional/cert-manager", "optional/prometheus"]
K8S_VERSION = os.environ.get("K8S_VERSION", "1.30.0")
UID = 10001

# Enum values kubernetes-validate does not check (its schemas have none).
ENUMS = {
    "imagePullPolicy": {"Always", "IfNotPresent", "Never"},
    "restartPolicy": {"Always", "OnFailure", "Never"},
    "protocol": {"TCP", "UDP", "SCTP"},
    "scheme": {"HTTP", "HTTPS"},
    "podManagementPolicy": {"OrderedReady", "Parallel"},
    "dnsPolicy": {"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"},
    "operator": {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Equal"},
    "unhealthyPodEvictionPolicy": {"IfHealthyBudget", "AlwaysAllow"},
}
ENUMS_AT = {  # enums that depend on where the key is
    ("Service", "type"): {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"},
    ("strategy", "type"): {"RollingUpdate", "Recreate"},
    ("updateStrategy", "type"): {"RollingUpdate", "OnDelete"},
    ("seccompProfile", "type"): {"RuntimeDefault", "Localhost", "Unconfined"},
}
ACCESS_MODES = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}


# ---------------------------------------------------------------- results

class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, what):
        self.passed += 1
        print(f"ok    {what}", flush=True)

    def fail(self, what, detail=""):
        self.failed += 1
        print(f"FAIL  {what}", flush=True)
        if detail:
            for line in str(detail).rstrip().splitlines():
                print(f"      {line}")
        sys.stdout.flush()

    def check(self, what, problems):
        if problems:
            self.fail(what, "\n".join(problems))
        else:
            self.ok(what)


R = Results()


def log(msg):
    print(f"==> {msg}", flush=True)
