#!/usr/bin/env bash
# Overhead of recording a call-heavy native program: `trace run` (slicetrace native shim)
# against `uftrace record`, on the SAME binary (examples/c/build/fib, built with
# -finstrument-functions, which uftrace's libmcount also implements).
#
#   bench/native_vs_uftrace.sh [N] [ROUNDS] [REPEATS]     (defaults: 27 1 5)
#
# Prints, for each recorder: median wall time, events recorded, ns per event
# ((traced - untraced) / events) and bytes per event (trace directory size / events).
# Needs: make, cc, uftrace (Debian: apt-get install uftrace). Builds `trace` and the
# shim in release mode unless TRACE=/path/to/trace is given.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-27}
ROUNDS=${2:-1}
REPEATS=${3:-5}

command -v uftrace >/dev/null || { echo "uftrace is not installed (Debian: apt-get install uftrace)" >&2; exit 2; }
make -s -C examples/c build/fib >/dev/null
BIN=$PWD/examples/c/build/fib
if [ -z "${TRACE:-}" ]; then
  cargo build -q --release -p slice-trace -p slicetrace-native
  TD=${CARGO_TARGET_DIR:-$PWD/target}
  TRACE=$TD/release/trace
fi
[ -x "$TRACE" ] || { echo "no trace binary at $TRACE" >&2; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

# time_cmd NAME CMD...: runs CMD REPEATS times (after one warm-up), prints the median ns.
time_cmd() {
  local name=$1; shift
  "$@" >/dev/null 2>&1 || true
  for _ in $(seq "$REPEATS"); do
    rm -rf "$WORK/out"
    local t0; t0=$(now)
    "$@" >/dev/null 2>&1
    echo $(( $(now) - t0 ))
  done | median
}

base=$(time_cmd plain "$BIN" "$N" "$ROUNDS")
slice=$(time_cmd trace "$TRACE" run -o "$WORK/out" -- "$BIN" "$N" "$ROUNDS")
slice_events=$("$TRACE" info "$WORK/out" | awk '/^events:/ {print $2; exit}')
slice_bytes=$(du -sb --apparent-size "$WORK/out" | cut -f1)
slice_stream=$(find "$WORK/out" -name '*.ev' -printf '%s\n' | awk '{s+=$1} END {print s+0}')

# --no-libcall: do not also hook PLT calls (printf, atoi), so both record the same calls.
uf=$(time_cmd uftrace uftrace record --no-libcall -d "$WORK/out" "$BIN" "$N" "$ROUNDS")
uf_stream=$(find "$WORK/out" -name '*.dat' ! -name 'perf-*' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
# Each uftrace record is 16 bytes (timestamp + type/depth/address) when no arguments are recorded.
uf_events=$(( uf_stream / 16 ))
uf_bytes=$(du -sb --apparent-size "$WORK/out" | cut -f1)

row() { # name time events bytes stream
  awk -v n="$1" -v t="$2" -v b="$base" -v e="$3" -v by="$4" -v s="$5" 'BEGIN {
    printf "%-16s %10.1f %12d %12.1f %12.2f %12.2f\n", n, t/1e6, e, (e>0)?(t-b)/e:0, (e>0)?by/e:0, (e>0)?s/e:0 }'
}
echo "fib $N x $ROUNDS, median of $REPEATS runs, untraced: $(awk -v b="$base" 'BEGIN{printf "%.1f", b/1e6}') ms"
printf "%-16s %10s %12s %12s %12s %12s\n" recorder "time ms" events "ns/event" "bytes/event" "stream B/ev"
row "trace run" "$slice" "$slice_events" "$slice_bytes" "$slice_stream"
row "uftrace record" "$uf" "$uf_events" "$uf_bytes" "$uf_stream"
