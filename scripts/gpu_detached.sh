#!/usr/bin/env bash
# scripts/gpu_detached.sh — work longer than one device call (600 s) on a GPU machine that stays held
# between back-to-back calls (the device tool's; it goes back after ~30 s idle): the work runs detached
# from the call that starts it, on a copy of the tree that later calls do not replace, and each call
# waits for it a while and brings its results back as one file.
#   start [--name N] [--limit S] -- CMD [ARG...]
#       copies the working tree (with the folders the call carried; not gpu-out/ and the build*/ folders:
#       CMD builds its own) to $LCE_DETACHED_ROOT/N/tree and
#       runs CMD there in a session of its own (setsid), with OUT=$LCE_DETACHED_ROOT/N/out; its output
#       goes to N/log, its exit status to N/rc; then waits as `wait` does. Refused while N runs.
#   take [--name N] PATH...
#       copies PATHs of this call's tree (e.g. a second part of a wheel carried now: split_wheel in
#       scripts/subjects/site_wheels.sh) into N's tree, each complete before it appears there.
#   wait [--name N] [--limit S]
#       waits until CMD has exited or S seconds (default 560) have passed, prints its elapsed time and
#       the log's last lines, and packs N/out and N/log into $OUT/N.tar (the device tool brings back
#       few files). Exit status: CMD's when it has exited, 124 while it still runs (call again).
#   status [--name N]
#       the same report without waiting or packing.
# N defaults to "run"; LCE_DETACHED_ROOT to /tmp/lce-detached (which outlives a call while the machine is
# held, and nothing longer: what a released machine was running is gone, and `wait` says so);
# LCE_DETACHED_SOURCE (default: this script's tree) is the tree start copies and take takes from.
#
#   bash scripts/gpu_detached.sh start -- bash scripts/subjects/gpu_external.sh     # call 1
#   bash scripts/gpu_detached.sh wait                                               # calls 2, 3, ...
# Exit status 2: bad usage (an unknown verb or option, no CMD, start while N runs, take of a path that
# does not exist, wait or status of N never started).
set -u
ROOT=${LCE_DETACHED_SOURCE:-$(cd "$(dirname "$0")/.." && pwd)}
BASE=${LCE_DETACHED_ROOT:-/tmp/lce-detached}

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu_detached.sh: $*" >&2; exit 2; }

verb=${1:-}
[ $# -gt 0 ] && shift
case "$verb" in
  -h | --help) usage; exit 0 ;;
  start | take | wait | status) ;;
  "") usage >&2; exit 2 ;;
  *) die "unknown verb '$verb' (start, take, wait, status; --help)" ;;
esac
name=run limit=560
while [ $# -gt 0 ]; do
  case "$1" in
    --name) [ $# -ge 2 ] || die "--name needs a value"; name=$2; shift 2 ;;
    --limit) [ $# -ge 2 ] || die "--limit needs a value"; limit=$2; shift 2 ;;
    --) shift; break ;;
    -*) die "unknown option $1" ;;
    *) break ;;
  esac
done
case "$name" in '' | *[!A-Za-z0-9._-]* | .*) die "--name '$name': letters, digits, '.', '_' and '-' only" ;; esac
case "$limit" in '' | *[!0-9]*) die "--limit '$limit' is not a number of seconds" ;; esac
D=$BASE/$name

running() { [ -f "$D/pid" ] && [ ! -f "$D/rc" ] && kill -0 "$(cat "$D/pid")" 2>/dev/null; }

report() {
  local now started
  now=$(date +%s) started=$(cat "$D/started")
  if [ -f "$D/rc" ]; then
    echo "gpu_detached.sh: $name exited with status $(cat "$D/rc") after $(($(cat "$D/ended") - started)) s"
  elif running; then
    echo "gpu_detached.sh: $name running for $((now - started)) s"
  else
    echo "gpu_detached.sh: $name ended without an exit status (killed, or the machine was not the same)"
  fi
  echo "--- last lines of $D/log"
  tail -n 25 "$D/log" 2>/dev/null
}

# Packs out/ and the log into $OUT/<name>.tar; the exit status of wait.
pack() {
  local out=${OUT:-$ROOT/gpu-out}
  mkdir -p "$out"
  tar -cf "$out/$name.tar" -C "$D" out log && echo "gpu_detached.sh: $out/$name.tar ($(tar -tf "$out/$name.tar" | wc -l) entries)"
  if [ -f "$D/rc" ]; then return "$(cat "$D/rc")"; fi
  running && return 124
  return 1
}

wait_for() {
  local t0
  t0=$(date +%s)
  while running && [ $(($(date +%s) - t0)) -lt "$limit" ]; do sleep 1; done
  report
  pack
}

case "$verb" in
  start)
    [ $# -gt 0 ] || die "start: no command (start [--name N] -- CMD [ARG...])"
    running && die "start: $name is running since $(date -u -d @"$(cat "$D/started")" +%H:%M:%S) (wait, or another --name)"
    rm -rf "$D"
    mkdir -p "$D/tree" "$D/out" || die "start: cannot create $D"
    (cd "$ROOT" && tar -cf - --warning=no-file-changed --exclude=./gpu-out --exclude='./build*' .) |
      tar -xf - -C "$D/tree" || die "start: cannot copy the tree to $D/tree"
    date +%s > "$D/started"
    printf '%q ' "$@" > "$D/command"
    # The command's own session: the call that starts it may end, the work goes on.
    # shellcheck disable=SC2016 # expanded by the inner bash
    setsid bash -c 'echo $$ > "$0/pid"; cd "$0/tree" && OUT="$0/out" "$@" > "$0/log" 2>&1; echo $? > "$0/rc.tmp"
      date +%s > "$0/ended"; mv "$0/rc.tmp" "$0/rc"' "$D" "$@" < /dev/null > /dev/null 2>&1 &
    for _ in $(seq 50); do [ -s "$D/pid" ] && break; sleep 0.1; done
    echo "gpu_detached.sh: started $name: $(cat "$D/command")in $D/tree"
    wait_for
    ;;
  take)
    [ $# -gt 0 ] || die "take: no path"
    [ -d "$D/tree" ] || die "take: $name was never started here ($D)"
    for p in "$@"; do
      [ -e "$ROOT/$p" ] || die "take: $p does not exist in this call's tree"
      # Copied beside its place, then moved there: CMD never sees half a file.
      if ! { mkdir -p "$D/tree/$(dirname "$p")" && rm -rf "$D/tree/$p.taking" && cp -a "$ROOT/$p" "$D/tree/$p.taking" &&
        rm -rf "${D:?}/tree/$p" && mv "$D/tree/$p.taking" "$D/tree/$p"; }; then
        die "take: cannot copy $p into $D/tree"
      fi
      echo "gpu_detached.sh: took $p into $name's tree"
    done
    ;;
  wait | status)
    [ -f "$D/started" ] || die "$verb: $name was never started here ($D): a machine given back loses it"
    if [ "$verb" = status ]; then report; else wait_for; fi
    ;;
esac
