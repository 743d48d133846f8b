"""The README's first loop runs as written against a real server: the
snippet is taken from clients/python/README.md, with only the server
address, the resource (one granted at once, no learning mode) and the loop
count replaced, so the documented API cannot drift from the package.
Must not: keep a copy of the snippet here.
"""
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_snippet():
    text = README.read_text()
    m = re.search(r"python3 -c '\n(.*?)\n'", text, re.S)
    assert m, "README.md has no `python3 -c '...'` snippet"
    return m.group(1)


def test_the_readme_loop_runs(server):
    code = readme_snippet()
    for old, new in [
        ("127.0.0.1:6000", server.addr),
        ("api/external", "rate20/readme"),
        ("range(100)", "range(5)"),
    ]:
        assert old in code, f"the README snippet no longer contains {old!r}"
        code = code.replace(old, new)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 5, out.stdout
    assert lines[-1] == "4 20.0 lease", out.stdout
