"""Paths, running a command, and PyYAML for check-monitoring.

Owns where the dashboard, the rules and the venv are, run(), and
ensure_yaml(), which re-runs the entry script in a venv with PyYAML if it
is missing. Must not import PyYAML at module level (the other modules
import it inside functions, after ensure_yaml) and must not import the
other monitoringcheck modules.
"""

import os
import subprocess
import sys

# scripts/monitoringcheck/common.py -> the repository.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "deploy/grafana/doorman.json")
ALERTS = os.path.join(ROOT, "deploy/prometheus/alerts.yml")
ALERTS_TEST = os.path.join(ROOT, "deploy/prometheus/alerts_test.yml")
VENV = os.path.join(ROOT, "target/monitoring-venv")


def ensure_yaml(script):
    """Imports PyYAML, or re-runs `script` (the entry point) in a venv under target/ that has it."""
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
    os.execve(py, [py, os.path.abspath(script)] + sys.argv[1:], env)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)
