"""Checks of the Grafana dashboard and the Prometheus alert rules in
deploy/, run by scripts/check-monitoring.py.

Owns nothing but the package: the modules are
  common     paths, running a command, PyYAML (or a venv that has it);
  promql     which metric names a PromQL expression selects;
  dashboard  the dashboard's structure and the expressions it uses;
  rules      promtool (rules, their tests, the dashboard's PromQL) and the
             alert rules' labels, annotations and metric names;
  servers    a root, a leaf and an orphan leaf started on 127.0.0.1;
  scrape     driving those servers and reading the names they export;
  cli        the command line, the order of the steps and the verdict.
Must not run anything on import: scripts/check-monitoring.py is the entry
point and its docstring the user documentation.
"""
