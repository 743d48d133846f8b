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
or PATH; scripts/test.sh installs it), curl (HTTP/2) and the doorman-pki
binary beside the server (its certificates) for step 3,
and PyYAML (if it is not importable, a venv with it is made under
target/monitoring-venv). Exits 1 on any failure.

This file is only the entry point: the checks live in
scripts/monitoringcheck/ (one module per responsibility, listed in its
__init__.py). It must not hold checks or helpers itself.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from monitoringcheck.cli import main  # noqa: E402  (needs the scripts directory on sys.path)

if __name__ == "__main__":
    sys.exit(main(__doc__, __file__))
