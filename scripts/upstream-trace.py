#!/usr/bin/env python3
"""A real run's upstream.csv, the simulator's format: every answer a node's
master got from its parent, from the servers' logs.

    scripts/upstream-trace.py REAL_SEED_DIR [--out FILE] [--asks FILE]

REAL_SEED_DIR is one seed of `doorman-faults scenario` (e.g.
target/sim-vs-real/short/real/seed-1): its `<node>-<replica>.log` files
(the servers log "the parent answered" at debug level, which the harness
turns on for `doorman_server::upstream`), each replica's `.clock` offset
(libfaketime's, for the lines after a replica's restart: see answers()),
and `real.json`'s `t0_unix_s`.
Writes `t,node,resource,capacity,lasts_s` (seconds since t0) to FILE or
stdout, in time order: set it beside the simulated run's upstream.csv to
see when each node renewed on either side. With --asks, also writes
`t,who`: when each answered ask of a node (its servers' logs) or a client
(`<leaf>-c<k>.log`, whose lines the harness's replays log at debug, placed
by `real.json`'s `t0_mono_s`) was sent (the answer's time less its
`asked_s_ago`), one line per ask, which `doorman-sim run --replay-asks`
replays (docs/sim-vs-real.md, "Each process's renewal phase").
"""

import argparse
import datetime
import json
import pathlib
import re
import sys

LOG = re.compile(r"^(?P<node>.+)-(?P<replica>\d+)\.log$")
# A client process's log (`doorman-faults client`, stamped with monotonic
# seconds): `<leaf>-c<k>.log`, the plan's client `<leaf>/c<k>`.
CLIENT_LOG = re.compile(r"^(?P<leaf>.+)-c(?P<k>\d+)\.log$")
CLIENT_ANSWER = re.compile(
    r"^\s*(?P<t>\d+(?:\.\d+)?)\s+DEBUG doorman_client::task: the server answered "
    r"asked_s_ago=(?P<ago>[0-9.e+-]+)")


def offset(clock_file: pathlib.Path) -> float:
    """libfaketime's offset in the replica's .clock file ("+0s", "-3600s")."""
    if not clock_file.exists():
        return 0.0
    text = clock_file.read_text().strip()
    m = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)s?", text)
    if not m:
        sys.exit(f"upstream-trace: {clock_file}: not an offset in seconds: {text!r}")
    return float(m.group(1))


# The harness starts the servers this long before t0 (scenario/mod.rs).
SERVERS_LEAD = 1.0


def first_server_line(d: pathlib.Path) -> float:
    """The earliest timestamp of any server's log (its first start)."""
    first = None
    for log in d.glob("*.log"):
        if log.name.startswith("etcd") or "-c" in log.stem:
            continue
        for line in log.read_text().splitlines()[:1]:
            ts = datetime.datetime.fromisoformat(json.loads(line)["timestamp"].replace("Z", "+00:00"))
            t = ts.timestamp()  # a first start's clock: unskewed (answers())
            first = t if first is None else min(first, t)
    if first is None:
        sys.exit(f"upstream-trace: no server logs in {d}")
    return first


def answers(path: pathlib.Path, node: str, t0: float, skew: float, grantless: list):
    """The log's answers; those with no grant (servers after 7ffbfed log
    them) go to `grantless` as `(asked, node)`: an ask all the same. A replica started again (a lost master comes
    back as a standby) appends to its log with the wall clock of its
    `.clock` file, which then says only the last start's offset: the
    lines before the last start are taken as unskewed (every replica of
    the scenario layouts starts at +0 s)."""
    lines = path.read_text().splitlines()
    starts = [i for i, l in enumerate(lines) if '"doorman server started"' in l]
    last_start = starts[-1] if len(starts) > 1 else 0
    for i, line in enumerate(lines):
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        message = e.get("message")
        if message not in ("the parent answered", "the parent answered with no grant"):
            continue
        ts = datetime.datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00"))
        t = ts.timestamp() - (skew if i >= last_start else 0.0) - t0
        if message != "the parent answered":
            grantless.append((t - float(e["asked_s_ago"]), node))
            continue
        ago = e.get("asked_s_ago")
        asked = None if ago is None else t - float(ago)
        yield (t, node, e["resource"], float(e["capacity"]), float(e["lasts_s"]), asked)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path)
    ap.add_argument("--asks", type=pathlib.Path)
    a = ap.parse_args()
    real = json.loads((a.dir / "real.json").read_text())
    t0 = real.get("t0_unix_s")
    if t0 is None:
        t0 = first_server_line(a.dir) + SERVERS_LEAD
        print(f"upstream-trace: no t0_unix_s in real.json (an older run): t0 taken as the first "
              f"server log line + {SERVERS_LEAD} s, to about 20 ms", file=sys.stderr)
    rows, grantless = [], []
    for log in sorted(a.dir.glob("*.log")):
        m = LOG.match(log.name)
        if not m:
            continue
        skew = offset(log.with_suffix(".clock"))
        rows.extend(answers(log, m.group("node"), t0, skew, grantless))
    rows.sort(key=lambda r: r[:5])
    out = ["t,node,resource,capacity,lasts_s"]
    out += [f"{t:.3f},{n},{r},{c:.3f},{l:.3f}" for t, n, r, c, l, _ in rows]
    text = "\n".join(out) + "\n"
    if a.out:
        a.out.write_text(text)
    else:
        sys.stdout.write(text)
    if a.asks:
        a.asks.write_text(asks_csv(rows, grantless, client_asks(a.dir, real)))


def client_asks(d: pathlib.Path, real: dict):
    """`(t, client)` for every answered request in the client logs."""
    t0 = real.get("t0_mono_s")
    if t0 is None:
        sys.exit("upstream-trace: --asks: no t0_mono_s in real.json (a run older than the field)")
    out = []
    for log in sorted(d.glob("*.log")):
        m = CLIENT_LOG.match(log.name)
        if not m:
            continue
        who = f"{m.group('leaf')}/c{m.group('k')}"
        for line in log.read_text().splitlines():
            a = CLIENT_ANSWER.match(line)
            if a:
                out.append((float(a.group("t")) - float(a.group("ago")) - t0, who))
    if not out:
        sys.exit(f"upstream-trace: --asks: no client log in {d} says when it asked "
                 "(clients older than the debug line, or not a replayed scenario)")
    return out


def asks_csv(rows, grantless, clients) -> str:
    """One `t,who` line per ask (the nodes' answered with grants, `rows`,
    and with none, `grantless`; the clients'): an ask answered for several
    resources logs a line for each, with the same send time (to the
    millisecond)."""
    missing = [r for r in rows if r[5] is None]
    if missing:
        sys.exit(f"upstream-trace: --asks: {len(missing)} answers have no asked_s_ago "
                 f"(servers older than the field), e.g. {missing[0][1]} at {missing[0][0]:.3f} s")
    asks = {(round(r[5], 3), r[1]) for r in rows}
    asks |= {(round(t, 3), who) for t, who in grantless + clients}
    return "t,who\n" + "".join(f"{t:.3f},{n}\n" for t, n in sorted(asks))


if __name__ == "__main__":
    main()
