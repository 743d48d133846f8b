"""Processes a check or test starts, and waiting for them: wait_for (a
condition, polled), http_get and http_ok (an HTTP answer, never raising),
start (a process whose output goes to a log file), wait_up (wait_for while
that process runs), log_tail, and stop (by pid: SIGTERM, then SIGKILL).

Must not decide what passes (callers turn a TimeoutError or RuntimeError
into their own verdict), and must not stop a process it was not given.
"""

import subprocess
import time
import urllib.error
import urllib.request


def wait_for(what, probe, timeout=30.0, interval=0.1):
    """Calls probe() every `interval` s until it returns a true value that
    is not a string, and returns that value. A false value or a string
    means "not yet" (a string says why). After `timeout` s: TimeoutError
    naming `what` and the last answer. Exceptions of probe propagate."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got and not isinstance(got, str):
            return got
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not within {timeout:g} s (last: {got})")
        time.sleep(interval)


def http_get(url, timeout=5.0, ctx=None, headers=None, data=None):
    """(status, body text) of a GET of url (a POST of `data` if given). An
    HTTP error is returned as its status; any other failure (refused, timed
    out, TLS) as (None, "ErrorType: message")."""
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001 - any other failure is "no answer"
        return None, f"{type(e).__name__}: {e}"


def http_ok(url, ctx=None, timeout=1.0):
    """A probe for wait_for: True if url answers 200, else why not."""
    status, body = http_get(url, timeout=timeout, ctx=ctx)
    return status == 200 or (f"HTTP {status}: {body[:200]}" if status else body)


def start(argv, log_path, env=None, **kw):
    """subprocess.Popen(argv, env=env, **kw) with stdout and stderr written
    to log_path (stderr only, if kw redirects stdout); the process gets
    `log_path` as an attribute, for log_tail and wait_up."""
    with open(log_path, "w") as log:
        kw.setdefault("stdout", log)
        kw.setdefault("stderr", subprocess.STDOUT if kw["stdout"] is log else log)
        proc = subprocess.Popen(argv, env=env, **kw)
    proc.log_path = str(log_path)
    return proc


def log_tail(path, lines=30):
    """The last `lines` lines of a log file, or why it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return str(e)


def wait_up(proc, what, probe, timeout=30.0, interval=0.1):
    """wait_for(what, probe) while proc (from start) runs. RuntimeError with
    the end of its log if it exits first or probe does not succeed in time."""
    def running_and_probe():
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}):\n{log_tail(proc.log_path)}")
        return probe()

    try:
        return wait_for(what, running_and_probe, timeout, interval)
    except TimeoutError as e:
        raise RuntimeError(f"{e}:\n{log_tail(proc.log_path)}") from None


def stop(*procs, grace=5.0):
    """SIGTERM (by pid) to each of procs still running, then waits up to
    `grace` s for them all; SIGKILL to any still running after that."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
