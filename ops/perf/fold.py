#!/usr/bin/env python3
"""Summarise a `perf record -g` profile of the gateway: where the CPU goes, per layer and per symbol, and a flame
graph (SVG, self-contained, no external script).

    ops/perf/fold.py PERF_DATA [--svg OUT.svg] [--folded OUT.folded] [--top N] [--requests N]
                     [--skip-comm NAME] [--only-comm NAME] [--time START,STOP]

Layers are named from each sample's leaf frame: the kernel, libcrypto, libpq, libc (malloc and friends apart),
the Swift runtime (retain/release, allocation, generics), Swift Concurrency (the cooperative pool, tasks,
continuations), Dispatch, Foundation, and each of our own Swift modules (from the mangled symbol's module name).
With --requests, every share is also printed as CPU microseconds per request (the samples' total CPU time divided
by the requests the run answered), so profiles of different runs compare per request and not per sample.
With --skip-comm (repeatable), samples of threads with that name are left out: e.g. `python3` when the profile was
recorded over a driver that spawns the gateway (`perf record -g -- python3 ops/bench/stdio-feed.py ...`; B8's
timed part is the driver's `stdio-pump`, left out the same way). With
--only-comm (repeatable), only those threads count: e.g. `postgres` in a system-wide profile (`perf record -a -g`).
"""
import argparse
import collections
import html
import re
import subprocess
import sys

OUR_MODULES = {
    "OfferGateway", "OfferStore", "OfferDomain", "OfferCrypto", "JSONRPC", "Postgres", "HTTPServer", "Metrics",
    "ByteCoding", "CivilTime", "CLIKit", "OfferLoadKit", "HTTPClient", "offergate", "offer_load",
}


def swift_module(symbol):
    """The module of a mangled Swift symbol ($s<len><Module>...), or None."""
    m = re.match(r"\$s(\d+)([A-Za-z_][A-Za-z0-9_]*)", symbol)
    if not m:
        return None
    n = int(m.group(1))
    return m.group(2)[:n]


def layer(symbol, dso):
    if "kernel.kallsyms" in dso or symbol.startswith("entry_SYSCALL"):
        return "kernel"
    if "libcrypto" in dso:
        return "libcrypto (OpenSSL)"
    if "libpq" in dso:
        return "libpq"
    if "libmicrohttpd" in dso:
        return "libmicrohttpd"
    if "libdispatch" in dso:
        return "Dispatch"
    if "libswift_Concurrency" in dso:
        return "Swift Concurrency"
    if "libFoundation" in dso or "libswiftFoundation" in dso or "FoundationEssentials" in dso \
            or "_FoundationICU" in dso or "FoundationInternationalization" in dso:
        return "Foundation"
    if "libswiftCore" in dso or "libswiftSynchronization" in dso:
        if re.search(r"retain|release|alloc|dealloc|Refcount", symbol, re.I):
            return "Swift runtime: retain/release/alloc"
        return "Swift runtime: other"
    if "libc.so" in dso or "libc-" in dso or "libm.so" in dso:
        if re.search(r"malloc|free|calloc|realloc|_int_|tcache|memalign", symbol):
            return "libc: malloc/free"
        if re.search(r"pthread|futex|lll_|sem_", symbol):
            return "libc: locks/threads"
        return "libc: other"
    module = swift_module(symbol)
    if module in OUR_MODULES:
        return "ours: " + module
    if module:
        return "Swift: " + module
    if dso.endswith(("offergate", "offer-load")) or "/release/" in dso or "/debug/" in dso:
        return "ours: (unnamed)"
    return "other: " + dso.rsplit("/", 1)[-1]


def samples(path, skip_comms=(), only_comms=(), time=None):
    """Yields (stack leaf-first [(symbol, dso)], weight) per sample of `perf script`, except those of threads
    named in skip_comms, and (when only_comms is given) of threads not named in it; with time, only the samples
    inside that window (perf script's --time: "START,STOP" in seconds, or percentages such as "40%-60%")."""
    proc = subprocess.Popen(["perf", "script", "-i", path, "-F", "comm,tid,period,ip,sym,dso"]
                            + (["--time", time] if time else []),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace")
    stack, weight, skip = [], 1, False
    frame = re.compile(r"^\s+[0-9a-f]+\s+(.*?)(?:\+0x[0-9a-f]+)?\s+\((.*)\)$")
    for line in proc.stdout:
        if not line.strip():
            if stack and not skip:
                yield stack, weight
            stack = []
            continue
        if not line.startswith((" ", "\t")):
            parts = line.split()
            weight = int(parts[-1]) if len(parts) > 2 and parts[-1].isdigit() else 1
            comm = " ".join(parts[:-2])
            skip = comm in skip_comms or (bool(only_comms) and comm not in only_comms)
            continue
        m = frame.match(line)
        if m:
            stack.append((m.group(1), m.group(2)))
    if stack and not skip:
        yield stack, weight
    proc.wait()


def demangle(symbols):
    try:
        out = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(symbols),
                             capture_output=True, text=True, timeout=60).stdout.splitlines()
        if len(out) == len(symbols):
            return dict(zip(symbols, out))
    except (OSError, subprocess.SubprocessError):
        pass
    return {s: s for s in symbols}


def flame_svg(folded, out, title):
    """A flame graph of the folded stacks (root at the bottom), as one self-contained SVG."""
    root = {"n": 0, "c": {}}
    for stack, count in folded.items():
        node = root
        node["n"] += count
        for name in stack:
            node = node["c"].setdefault(name, {"n": 0, "c": {}})
            node["n"] += count
    total = root["n"] or 1
    width, row = 1200, 16
    rects = []

    def depth_of(node):
        return 1 + max((depth_of(c) for c in node["c"].values()), default=0)

    height = (depth_of(root) + 2) * row

    def walk(node, x, depth):
        for name, child in sorted(node["c"].items()):
            w = child["n"] / total * width
            if w >= 0.3:
                y = height - (depth + 2) * row
                hue = 10 + (hash(name) % 40)
                label = html.escape(name if len(name) * 7 < w else name[: max(int(w / 7) - 2, 0)] + "..")
                pct = 100 * child["n"] / total
                rects.append(
                    f'<g><title>{html.escape(name)} ({pct:.2f} %)</title>'
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" fill="hsl({hue},80%,60%)"/>'
                    + (f'<text x="{x + 2:.1f}" y="{y + row - 4}" font-size="11">{label}</text>' if w > 20 else "")
                    + "</g>")
                walk(child, x, depth + 1)
            x += w

    walk(root, 0.0, 0)
    with open(out, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                f'font-family="monospace"><rect width="100%" height="100%" fill="#fff"/>'
                f'<text x="4" y="14" font-size="13">{html.escape(title)}</text>')
        f.write("\n".join(rects))
        f.write("</svg>\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("--svg")
    p.add_argument("--folded")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--requests", type=int, help="requests answered during the profile: shares as µs per request")
    p.add_argument("--skip-comm", action="append", default=[], help="leave out the samples of threads of this name")
    p.add_argument("--only-comm", action="append", default=[], help="count only the samples of threads of this name")
    p.add_argument("--time", help="only samples in this window, as perf script --time takes it (e.g. 12.3,12.6)")
    a = p.parse_args()

    layers, symbols, inclusive = collections.Counter(), collections.Counter(), collections.Counter()
    folded = collections.Counter()
    total = 0
    for stack, weight in samples(a.data, set(a.skip_comm), set(a.only_comm), a.time):
        total += weight
        leaf_sym, leaf_dso = stack[0]
        layers[layer(leaf_sym, leaf_dso)] += weight
        symbols[(leaf_sym, leaf_dso.rsplit("/", 1)[-1])] += weight
        for sym in {s for s, _ in stack}:
            inclusive[sym] += weight
        folded[tuple(s for s, _ in reversed(stack))] += weight
    if not total:
        sys.exit(f"{a.data}: no samples")
    names = demangle(sorted({s for s, _ in symbols} | set(inclusive)))
    if a.folded or a.svg:
        folded = collections.Counter({tuple(names.get(s, s) for s in k): v for k, v in folded.items()})
    if a.folded:
        with open(a.folded, "w") as f:
            for k, v in folded.most_common():
                f.write(";".join(k) + f" {v}\n")
    if a.svg:
        flame_svg(folded, a.svg, a.data)

    seconds = total / 1e9  # cpu-clock periods are nanoseconds

    def cost(w):
        share = f"{100 * w / total:5.1f} %"
        if a.requests:
            return share + f"  {1e6 * seconds * w / total / a.requests:8.2f} µs/request"
        return share

    print(f"{a.data}: {seconds:.2f} CPU s sampled" + (f", {a.requests} requests" if a.requests else ""))
    print("\nby layer (leaf frame):")
    for name, w in layers.most_common():
        print(f"  {cost(w)}  {name}")
    print(f"\ntop {a.top} symbols by self time:")
    for (sym, dso), w in symbols.most_common(a.top):
        print(f"  {cost(w)}  {names.get(sym, sym)[:110]}  [{dso}]")
    print(f"\ntop {a.top} of our symbols by inclusive time:")
    ours = [(s, w) for s, w in inclusive.most_common() if swift_module(s) in OUR_MODULES]
    for sym, w in ours[: a.top]:
        print(f"  {cost(w)}  {names.get(sym, sym)[:110]}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # piped into head: fine
        sys.stderr.close()
