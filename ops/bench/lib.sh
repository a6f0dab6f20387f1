# Shared helpers of the ops/bench scripts (sourced, not run). BENCH_NO_RECORD=1: print the section but do not
# append it to RESULTS.md (for experiments). Each script: bench_init NAME "$@"; bench_build;
# bench_db; start_gateway ...; runs; bench_append. Cleanup (gateways, the benchmark database, the work dir) is
# trapped on exit; the PostgreSQL cluster is stopped only if this script started it. BENCH_KEEP=1 keeps the work
# dir (the gateway's log, each run's JSON report) and prints its path.
set -euo pipefail
# bench_usage: the running script's header comment (its usage), without the comment marks.
bench_usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; }
# Every script that sources this file answers --help with its usage before it does anything.
case "${1:-}" in -h|--help) bench_usage; exit 0 ;; esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

bench_init() {
    bench_name="$1"; shift
    quick=0; repeats=3
    bench_args=("$@")
    # A benchmark takes --quick only: --help prints the script's header, anything else is refused before it runs.
    for a in "$@"; do
        case "$a" in
            --quick) quick=1 ;;
            -h|--help) bench_usage; exit 0 ;;
            *) echo "$(basename "$0"): unknown argument '$a' (--quick and --help only)" >&2; exit 64 ;;
        esac
    done
    work="$(mktemp -d "/tmp/$bench_name.XXXXXX")"
    gateway_pids=()
    pg_dir="${BENCH_PG_DIR:-/tmp/bench-pg}"
    pg_started=0
    bench_db_name=""
    export OFFERGATE_ADMIN_KEY="og_admin_bench_$(openssl rand -hex 16)"
    export OFFERGATE_MASTER_KEY="$(openssl rand -base64 32)"
    trap bench_cleanup EXIT
}

bench_cleanup() {
    local pid
    for pid in "${gateway_pids[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
    for pid in "${gateway_pids[@]:-}"; do [ -n "$pid" ] && wait "$pid" 2>/dev/null || true; done
    if [ -n "$bench_db_name" ]; then
        psql "$pg_url" -qAt -c "DROP DATABASE IF EXISTS $bench_db_name" >/dev/null 2>&1 || true
    fi
    [ "$pg_started" = 1 ] && "$root/ops/pg" stop "$pg_dir" || true
    [ -n "${BENCH_KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}

bench_build() {
    # BENCH_BIN=DIR: binaries built already (e.g. an older commit's, to compare side by side); no build.
    if [ -n "${BENCH_BIN:-}" ]; then
        offergate="$BENCH_BIN/offergate"; offer_load="$BENCH_BIN/offer-load"
        return 0
    fi
    swift build -c release --product offergate >&2
    swift build -c release --product offer-load >&2
    bin="$(swift build -c release --show-bin-path)"
    offergate="$bin/offergate"; offer_load="$bin/offer-load"
}

# Starts (or reuses) the cluster (synchronous_commit on: the default, asserted) and creates a fresh database.
bench_db() {
    if ! "$root/ops/pg" url "$pg_dir" >/dev/null 2>&1 || ! psql "$("$root/ops/pg" url "$pg_dir")" -qAt -c 'select 1' >/dev/null 2>&1; then
        pg_started=1
    fi
    pg_url="$("$root/ops/pg" start "$pg_dir")"
    [ "$(psql "$pg_url" -qAt -c 'show synchronous_commit')" = "on" ] || { echo "synchronous_commit is not on" >&2; exit 1; }
    bench_db_name="bench_${bench_name//-/_}_$$"
    psql "$pg_url" -qAt -c "CREATE DATABASE $bench_db_name" >/dev/null
    db_url="host=$pg_dir/sock user=postgres dbname=$bench_db_name"
}

# start_gateway SOCKET [extra serve args…]: starts a release gateway on a Unix socket and waits for it.
start_gateway() {
    local sock="$1"; shift
    "$offergate" serve --listen "unix:$sock" --database-url "$db_url" --log-level warning --quiet-requests "$@" \
        >>"$work/gateway.log" 2>&1 &
    gateway_pids+=($!)
    gateway_pid=$!
    for _ in $(seq 1 100); do [ -S "$sock" ] && return 0; sleep 0.1; done
    echo "gateway did not start:" >&2; tail -20 "$work/gateway.log" >&2; exit 1
}

# around_gateway PERF_ARGS… -- CMD…: runs CMD with `perf PERF_ARGS… -p $gateway_pid` attached to the gateway for
# exactly CMD's run (started half a second before it, stopped with SIGINT after it); returns CMD's status.
around_gateway() {
    local perf_args=()
    while [ "$1" != "--" ]; do perf_args+=("$1"); shift; done
    shift
    perf "${perf_args[@]}" -p "$gateway_pid" 2>/dev/null &
    local perf_pid=$! status=0
    sleep 0.5
    "$@" || status=$?
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    return "$status"
}

# profiled NAME CMD…: runs CMD; with BENCH_PERF=DIR set, under `perf record -g` attached to the gateway
# ($gateway_pid) for exactly CMD's run, into DIR/<bench>-NAME.perf.data (the last run of a name wins). Read it with
# ops/perf/fold.py (layers, top symbols, flame graph). Without BENCH_PERF it only runs CMD.
# BENCH_PERF_EVENT=EVENT records that event instead of CPU samples, every occurrence, e.g. `probe_libc:malloc`
# (after `perf probe -x <libc> malloc`, as ops/perf/malloc-sites does) to count a benchmark's allocations per request
# by call site (`ops/perf/malloc-sites --read FILE REQUESTS`). BENCH_PERF_CALLS=dwarf records DWARF call chains
# (`--call-graph dwarf,16384`: whole Swift chains, also through libcrypto, where frame pointers break; larger files).
perf_calls() { [ "${BENCH_PERF_CALLS:-fp}" = dwarf ] && echo "--call-graph=dwarf,16384" || echo "-g"; }
profiled() {
    local name="$1"; shift
    [ -n "${BENCH_PERF:-}" ] || { "$@"; return; }
    mkdir -p "$BENCH_PERF"
    local what=(-F 999)
    [ -n "${BENCH_PERF_EVENT:-}" ] && what=(-e "$BENCH_PERF_EVENT")
    around_gateway record -q "${what[@]}" "$(perf_calls)" -o "$BENCH_PERF/$bench_name-$name.perf.data" -- "$@"
}

# pgbench_tps ARGS…: runs pgbench, prints its tps; an aborted or failing run stops the benchmark.
pgbench_tps() {
    local out
    out="$(pgbench "$@" 2>&1)" || { echo "$out" >&2; echo "pgbench failed" >&2; exit 1; }
    if grep -qE "aborted|error:" <<<"$out"; then echo "$out" | tail -5 >&2; echo "pgbench run aborted" >&2; exit 1; fi
    awk '/^tps = / {print $3; exit}' <<<"$out"
}

# CPU time, for costs that hold up on a busy machine where rates do not. cpu_ticks PID: user+system clock ticks of
# one process (0 once it is gone); pg_ticks: of the benchmark's PostgreSQL cluster (postmaster and its children);
# per_thousand TICKS REQUESTS: CPU milliseconds per 1,000 requests.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
pg_ticks() {
    local total=0 pm p
    pm=$(head -1 "$pg_dir/data/postmaster.pid")
    # The postmaster's own time plus what its exited children used (cutime, cstime), plus its live children.
    total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat")
    for p in $(pgrep -P "$pm"); do total=$((total + $(cpu_ticks "$p"))); done
    echo "$total"
}
# ctx_switches PID: context switches (voluntary + involuntary) of a process's live threads so far: each one that
# wakes a sleeping thread is a hand-off between threads, which on this VM costs ~10-25 µs of kernel time.
ctx_switches() {
    cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches/ {n += $2} END {print n + 0}'
}
per_thousand() { awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f\n", 1e6 * t / hz / n}'; }

# openssl_signs SECONDS [ARGS…]: `openssl speed ecdsap256`'s signatures per second (with -multi N: of all N
# processes together).
openssl_signs() {
    local seconds="$1"; shift
    openssl speed -seconds "$seconds" "$@" ecdsap256 2>/dev/null | tail -1 | awk '{print $7}'
}

# gateway_stats SOCKET EXPR: a field of the gateway's `system.stats` (a python expression over `r`), asked as admin.
gateway_stats() {
    python3 - "$1" "$2" <<'PY'
import json, os, socket, sys
conn = socket.socket(socket.AF_UNIX)
conn.connect(sys.argv[1])
stream = conn.makefile("rwb")
def call(id, method, params):
    stream.write(json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).encode() + b"\n")
    stream.flush()
    return json.loads(stream.readline())["result"]
call(1, "session.authenticate", {"apiKey": os.environ["OFFERGATE_ADMIN_KEY"]})
r = call(2, "system.stats", {})
print(eval(sys.argv[2]))
PY
}

# jget FILE EXPR: a field of an offer-load --json report (python expression over `r`).
jget() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
median() { sort -g "$1" | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b == 0) print "n/a"; else printf "%.2f", a / b}'; }
fmt() { awk -v a="$1" 'BEGIN {printf "%.0f", a}'; }

# bench_append TITLE REPORT_FILE: prints the report and appends a dated section to RESULTS.md.
bench_append() {
    local title="$1" body="$2"
    local section="$work/section"
    {
        echo
        echo "## $title — $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo
        echo "- commit: \`$(git rev-parse --short HEAD)\`$(git diff --quiet HEAD -- Sources Tests ops ':!ops/bench/RESULTS.md' 2>/dev/null || echo ' (with uncommitted changes)')"
        echo "- command: \`ops/bench/$bench_name${bench_args[*]:+ ${bench_args[*]}}\`"
        echo "- machine: $(nproc) cores, shared with other builds/benchmarks at the time (read the ratios);" \
            "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo
        cat "$body"
    } >"$section"
    cat "$section"
    if [ -n "${BENCH_NO_RECORD:-}" ]; then
        echo "(BENCH_NO_RECORD is set: not appended to ops/bench/RESULTS.md)" >&2
    else
        cat "$section" >>"$root/ops/bench/RESULTS.md"
    fi
}

# copy_histories TENANT COPIES: copies every subscription transaction of TENANT COPIES times under new ids (customer
# C becomes C-x1 … C-xCOPIES), then vacuums and analyses the table: customers the gateway has never seen, each with
# a history (B4c and ops/perf/cache-growth).
copy_histories() {
    psql "$db_url" -qAt -v ON_ERROR_STOP=1 <<SQL >/dev/null
INSERT INTO subscription_transactions
    (tenant_id, transaction_id, original_transaction_id, customer_id, product_id, purchase_date, expires_date,
     offer_type, offer_id, auto_renew, in_billing_retry, grace_period_expires_date, revocation_date)
SELECT tenant_id, transaction_id || '-x' || k, original_transaction_id || '-x' || k, customer_id || '-x' || k,
       product_id, purchase_date, expires_date, offer_type, offer_id, auto_renew, in_billing_retry,
       grace_period_expires_date, revocation_date
FROM subscription_transactions, generate_series(1, $2) AS k
WHERE tenant_id = '$1';
VACUUM ANALYZE subscription_transactions;
SQL
}

# fixture_copies FIXTURE FIRST COUNT OUT: the saved FIXTURE asking about copies FIRST..FIRST+COUNT-1 of every seeded
# customer (see copy_histories), written to OUT (mode 600: it holds the tenant's API key).
fixture_copies() {
    python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
saved = json.load(open(sys.argv[1])); first, count = int(sys.argv[2]), int(sys.argv[3])
seeded = saved["fixture"]["customers"]
saved["fixture"]["customers"] = [f"{c}-x{k}" for k in range(first, first + count) for c in seeded]
json.dump(saved, open(sys.argv[4], "w"))
PY
    chmod 600 "$4"
}
