#!/usr/bin/env python3
"""CPU of each thread of the running `offergate serve`, over a window of a running open-loop `offer-load`.

    ops/perf/threads.py [--delay S] [--window S]

Waits for an `offer-load … --rate …` process, lets it run `--delay` seconds (3), then reads every gateway thread's
user + system time from /proc/<pid>/task/*/stat at the start and end of `--window` seconds (4) and prints, by
thread name, busiest first: the share of one core, how many threads, the busiest one's share. Names are Linux's
15 bytes: an event loop is `rpc-server-loop` (as many as `--event-loops`), a Dispatch worker (a pool connection's queue) `-qos.overcommit`, a
cooperative-pool thread `oot.default-qos`.
"""
import argparse
import os
import time


def find(pred):
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if pred(cmd):
            return int(p)
    return None


def threads(pid):
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            s = open(f"/proc/{pid}/task/{t}/stat").read()
        except OSError:
            continue
        name = s[s.index("(") + 1 : s.rindex(")")]
        fields = s[s.rindex(")") + 2 :].split()
        out[t] = (name, int(fields[11]) + int(fields[12]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=3)
    ap.add_argument("--window", type=float, default=4)
    a = ap.parse_args()
    while not find(lambda c: len(c) > 1 and c[0].endswith(b"offer-load") and b"--rate" in c):
        time.sleep(0.05)
    time.sleep(a.delay)
    gw = find(lambda c: len(c) > 1 and c[0].endswith(b"offergate") and b"serve" in c)
    if gw is None:
        raise SystemExit("threads.py: no offergate serve running")
    before = threads(gw)
    time.sleep(a.window)
    after = threads(gw)
    tick = os.sysconf("SC_CLK_TCK")
    busy = {}
    for t, (name, ticks) in after.items():
        pct = (ticks - before.get(t, (name, 0))[1]) / tick / a.window * 100
        total, count, top = busy.get(name, (0.0, 0, 0.0))
        busy[name] = (total + pct, count + 1, max(top, pct))
    print(f"{'% of a core':>11}  {'threads':>7}  {'busiest':>7}  name")
    for name, (total, count, top) in sorted(busy.items(), key=lambda kv: -kv[1][0]):
        print(f"{total:11.1f}  {count:7d}  {top:7.1f}  {name}")
    print(f"{sum(v[0] for v in busy.values()):11.1f}  {sum(v[1] for v in busy.values()):7d}           (all)")

if __name__ == "__main__":
    main()
