"""Offline checks of deploy/kubernetes, run by scripts/k8s-check.py.

Owns nothing but the package: the modules are
  common     constants, the pass/fail tally and progress lines;
  tools      kustomize, the doorman and etcd binaries, the Python libraries;
  objects    helpers over rendered Kubernetes objects ($(VAR), selectors, ports);
  static     per-overlay checks: schemas, enums, workload rules, configs;
  crosscheck the optional directories, the external-etcd example, the Dockerfile;
  provision  certificates (as cert-manager) and volume files (as the kubelet);
  pods       running an overlay's pods on 127.0.0.1 and probing them;
  smoke      the smoke test and its end-to-end, reload and rotation checks;
  cli        the command line and the order of everything.
Must not run anything on import: scripts/k8s-check.py is the entry point
and its docstring the user documentation.
"""
