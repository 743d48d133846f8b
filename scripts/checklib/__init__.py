"""What the Python check scripts and the Python client's tests share:
finding a port and starting, waiting for and stopping processes.

Owns nothing but the package: the modules are
  ports  free 127.0.0.1 ports, claimed for the life of the process with the
         same lock files as the Rust test kit (crates/doorman-testkit/src/
         ports.rs), so Rust and Python tests never hand out the same port;
  procs  waiting for a condition, HTTP GET, and starting and stopping a
         process whose output goes to a log file.
Must not run anything on import, and must not decide what a check drives,
compares or reports: that stays in the scripts that use it.
"""
