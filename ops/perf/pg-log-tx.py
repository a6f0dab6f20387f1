#!/usr/bin/env python3
"""Read PostgreSQL's statement log (every statement logged with its duration) and say where a workload's
transactions spend their time: per statement, and per transaction between BEGIN and COMMIT (how long it took, how
much of it PostgreSQL was executing, and the gaps before each statement, when the backend waited for the client).

    ops/perf/pg-log-tx.py LOG [--match TEXT] [--top N]

Record the log around one run (the bench cluster of ops/bench/lib.sh; reset the settings afterwards, logging every
statement slows the run itself):

    psql "$URL" -c "ALTER SYSTEM SET log_min_duration_statement = 0" \\
        -c "ALTER SYSTEM SET log_line_prefix = '%m [%p] '" -c "SELECT pg_reload_conf()"
    n=$(wc -l < /tmp/bench-pg/data/server.log); ops/bench/b11 --quick ...; tail -n +$n /tmp/bench-pg/data/server.log >/tmp/run.log
    psql "$URL" -c "ALTER SYSTEM RESET log_min_duration_statement" -c "ALTER SYSTEM RESET log_line_prefix" \\
        -c "SELECT pg_reload_conf()"

--match keeps the transactions with a statement containing TEXT (e.g. `apple_notifications` for B11's groups).
The log's timestamps have millisecond resolution: the gaps are sound as averages over many transactions only.
Prepared statements are named per connection (og_1, og_2, ...): their text is taken from the same backend's parse.
"""
import argparse
import collections
import datetime
import re
import statistics

LINE = re.compile(r"(\S+ \S+) \S+ \[(\d+)\] (\w+):\s+(.*)")  # %m: date, time, zone
DURATION = re.compile(r"duration: ([\d.]+) ms\s+(parse|bind|execute) (<unnamed>|[^:]+): (.*)")


def records(path):
    """(time, pid, duration ms, kind, statement text) per logged step; continuation lines joined."""
    current = None
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                if current:
                    yield current
                current = [m.group(1), m.group(2), m.group(3), m.group(4).strip()]
            elif current:
                current[3] += " " + line.strip()
    if current:
        yield current


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--match", default=None)
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()

    names = {}
    per_statement = collections.defaultdict(lambda: [0, 0.0])
    open_tx = {}
    transactions = []
    for stamp, pid, level, message in records(args.log):
        m = DURATION.match(message)
        if level != "LOG" or not m:
            continue
        at = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()
        ms, kind, name, text = float(m.group(1)), m.group(2), m.group(3), re.sub(r"\s+", " ", m.group(4))
        if name != "<unnamed>":
            if kind == "parse":
                names[(pid, name)] = text
            text = names.get((pid, name), text)
        key = (kind, text[:80])
        per_statement[key][0] += 1
        per_statement[key][1] += ms
        if kind == "execute" and text.startswith("BEGIN"):
            open_tx[pid] = {"start": at, "last": at, "busy": 0.0, "gaps": collections.defaultdict(float),
                            "texts": []}
            continue
        tx = open_tx.get(pid)
        if tx is None:
            continue
        began = at - ms / 1000
        tx["gaps"][key] += max(0.0, 1000 * (began - tx["last"]))
        tx["last"] = at
        tx["busy"] += ms
        tx["texts"].append(text)
        if kind == "execute" and text.startswith("COMMIT"):
            tx["end"], tx["pid"] = at, pid
            transactions.append(tx)
            del open_tx[pid]

    print(f"per statement step (top {args.top} by total time):")
    print(f"{'calls':>7} {'total ms':>10} {'ms each':>8}  step")
    for (kind, text), (calls, total) in sorted(per_statement.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(f"{calls:7d} {total:10.1f} {total / calls:8.3f}  {kind} {text}")

    chosen = [t for t in transactions if args.match is None or any(args.match in s for s in t["texts"])]
    if not chosen:
        print("\nno transaction (BEGIN ... COMMIT) matched")
        return
    backends = collections.Counter(t["pid"] for t in chosen)
    print(f"\n{len(chosen)} transactions{' with ' + repr(args.match) if args.match else ''}, per backend: "
          + ", ".join(f"{pid}: {n}" for pid, n in backends.most_common()))
    wall = [1000 * (t["end"] - t["start"]) for t in chosen]
    busy = [t["busy"] for t in chosen]
    print(f"median BEGIN to COMMIT {statistics.median(wall):.1f} ms, PostgreSQL executing "
          f"{statistics.median(busy):.1f} ms of it")
    gaps = collections.defaultdict(float)
    for t in chosen:
        for key, ms in t["gaps"].items():
            gaps[key] += ms
    print(f"waiting for the client, per transaction: {sum(gaps.values()) / len(chosen):.2f} ms; largest, before:")
    for (kind, text), ms in sorted(gaps.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {ms / len(chosen):6.2f} ms  {kind} {text}")


if __name__ == "__main__":
    main()
