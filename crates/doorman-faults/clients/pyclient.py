"""A Python client of the fault harness (doorman-faults): one rate
resource through the doorman_client package, reporting on standard output
one JSON line per change of the capacity it uses and one a second anyway,
{"t": monotonic seconds, "i": 0, "cap": capacity, "mode": mode,
"wall_ms": its wall clock (which libfaketime sets: the auditor checks the
offset took effect)}, and reading "wants N" lines on standard input; end
of input closes the client (its lease released).

    pyclient.py SERVERS CLIENT_ID RESOURCE WANTS

It never calls time.sleep: under libfaketime with
FAKETIME_DONT_FAKE_MONOTONIC=1, Python's sleep fails (libfaketime issue
426); select() waits instead, polling every 5 ms.
"""

import json
import select
import sys
import time

import doorman_client


def main() -> int:
    servers, client_id, resource, wants = sys.argv[1:5]
    client = doorman_client.Client(
        servers.split(","), client_id=client_id, fallback="pessimistic", rpc_timeout=2.0
    )
    res = client.rate_resource(resource, wants=float(wants))
    last, said = None, 0.0
    while True:
        now = (res.capacity, res.mode)
        mono = time.monotonic()
        if now != last or mono - said >= 1.0:
            line = {"t": mono, "i": 0, "cap": now[0], "mode": now[1],
                    "wall_ms": int(time.time() * 1000)}
            print(json.dumps(line), flush=True)
            last, said = now, mono
        ready, _, _ = select.select([sys.stdin], [], [], 0.005)
        if ready:
            text = sys.stdin.readline()
            if not text:
                break
            if text.startswith("wants "):
                res.set_wants(float(text.split()[1]))
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
