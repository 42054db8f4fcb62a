#!/usr/bin/env bash
# run_all.sh — on a GPU machine without network (the H200): installs the carried wheels, then runs
# every external-subject adapter over a copy of one exported directory each, so that `lcecheck judge`
# can judge each copy. Prints every command it runs. See scripts/subjects/EXCHANGE.md.
set -u -o pipefail

usage() {
  cat <<'EOF'
usage: bash scripts/subjects/run_all.sh [options] EXPORT_DIR

Copies EXPORT_DIR (written by `lcecheck export`) to OUT/<subject>/ per subject and setting, and runs
that subject's adapter on the copy. Then judge each: lcecheck judge --dir OUT/<subject> ...

options:
  --out DIR          where the per-subject copies go (default: EXPORT_DIR.results)
  --subjects LIST    comma-separated, from: reference, reference-bug, torch-eager, torch-compile,
                     torch-compile-dynamic (torch.compile's own dynamic=None),
                     liger, liger-fp32-accum, cce, cce-exact, megatron-vocab-parallel,
                     megatron-fused-lce, te-parallel-ce (default: all whose library is importable)
  --megatron PATH    Megatron-LM tree for megatron-vocab-parallel (default .subjects/megatron)
  --megatron-fused PATH  tree for megatron-fused-lce (default .subjects/megatron-fusions, else .subjects/megatron)
  --te PATH          TransformerEngine files for te-parallel-ce (default .subjects/transformer-engine)
  --jobs J           J processes per subject, each with --shard i/J of the cases (default 1; the
                     reference runners always run as one)
  --time-limit S     each adapter process starts no case after S seconds; the cases it did not reach
                     get a skip.txt saying so (default: none)
  --unit-test small|all  also re-run PR 3345's test_correctness standalone (megatron_fused_lce.py unit-test)
  --site DIR         where the wheels under .whl/ are installed (default /tmp/site); --no-install skips
  -h, --help         this text

Wheels: every .whl under .whl/ (any depth) is installed with pip --no-index --no-deps --target; the
.pth files they bring (nvidia-cutlass-dsl puts its packages under python_packages/) are honoured by
adding their paths to PYTHONPATH. Exit status: 0 when every runner exited 0, 1 otherwise, 2 on bad usage.
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
out="" subjects="" site=/tmp/site install=1 unit_test="" jobs=1 time_limit=""
te="$ROOT/.subjects/transformer-engine"
megatron="$ROOT/.subjects/megatron"
megatron_fused="$ROOT/.subjects/megatron-fusions"
[ -d "$megatron_fused" ] || megatron_fused="$megatron"
export_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --subjects) subjects=$2; shift 2 ;;
    --megatron) megatron=$2; shift 2 ;;
    --megatron-fused) megatron_fused=$2; shift 2 ;;
    --te) te=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --time-limit) time_limit=$2; shift 2 ;;
    --unit-test) unit_test=$2; shift 2 ;;
    --site) site=$2; shift 2 ;;
    --no-install) install=0; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "run_all.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [ -z "$export_dir" ] || { echo "run_all.sh: one EXPORT_DIR only" >&2; exit 2; }; export_dir=$1; shift ;;
  esac
done
if [ -z "$export_dir" ] && [ -z "$unit_test" ]; then usage >&2; exit 2; fi
case "$jobs" in ''|*[!0-9]*|0) echo "run_all.sh: --jobs wants a positive integer, not '$jobs'" >&2; exit 2 ;; esac
if [ -n "$export_dir" ] && [ ! -f "$export_dir/manifest.json" ]; then
  echo "run_all.sh: $export_dir/manifest.json not found" >&2; exit 2
fi
if [ -n "$export_dir" ]; then out=${out:-${export_dir%/}.results}; else out=${out:-megatron-unit-test}; fi

run() { echo "+ $*"; "$@"; }

# Wheels: install, then honour their .pth files (site_wheels.sh).
# shellcheck source=scripts/subjects/site_wheels.sh
. "$here/site_wheels.sh"
site_wheels "$site" "$install" || exit 1

importable() { python3 -c "import $1" >/dev/null 2>&1; }

# run_adapter <subject> <dest> <command...>: the adapter over dest, as --jobs processes each with its
# --shard (their logs printed after all have ended, in shard order), under --time-limit; fails when
# any process does.
run_adapter() {
  local s=$1 dest=$2 n=$jobs i rc=0 pids=()
  shift 2
  local cmd=("$@")
  [ -n "$time_limit" ] && case "$s" in reference*) ;; *) cmd+=(--time-limit "$time_limit") ;; esac
  case "$s" in reference*) n=1 ;; esac
  if [ "$n" = 1 ]; then PYTHONUNBUFFERED=1 run "${cmd[@]}" "$dest"; return; fi
  for ((i = 0; i < n; i++)); do
    echo "+ ${cmd[*]} --shard $i/$n $dest > $dest.shard$i.log"
    PYTHONUNBUFFERED=1 "${cmd[@]}" --shard "$i/$n" "$dest" > "$dest.shard$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < n; i++)); do
    wait "${pids[$i]}" || { echo "run_all.sh: $s shard $i/$n exited $?"; rc=1; }
    cat "$dest.shard$i.log"
  done
  return $rc
}

if [ -z "$subjects" ]; then
  subjects="reference,reference-bug"
  importable torch && subjects="$subjects,torch-eager,torch-compile"
  importable liger_kernel && subjects="$subjects,liger,liger-fp32-accum"
  importable cut_cross_entropy && subjects="$subjects,cce,cce-exact"
  importable torch && [ -d "$megatron/megatron/core" ] && subjects="$subjects,megatron-vocab-parallel"
  importable cutlass && [ -d "$megatron_fused/megatron/core/fusions" ] && subjects="$subjects,megatron-fused-lce"
  importable triton && [ -d "$te/transformer_engine" ] && subjects="$subjects,te-parallel-ce"
fi
echo "run_all.sh: subjects $subjects"

status=0
if [ -n "$export_dir" ]; then
  mkdir -p "$out"
  IFS=, read -r -a list <<< "$subjects"
  for s in "${list[@]}"; do
    case "$s" in
      reference) cmd=(python3 "$here/reference_runner.py") ;;
      reference-bug) cmd=(python3 "$here/reference_runner.py" --bug bf16-dhidden-accum) ;;
      torch-eager) cmd=(python3 "$here/torch_eager.py") ;;
      torch-compile) cmd=(python3 "$here/torch_compile.py") ;;
      torch-compile-dynamic) cmd=(python3 "$here/torch_compile.py" --dynamic auto) ;;
      liger) cmd=(python3 "$here/liger.py" --setting default) ;;
      liger-fp32-accum) cmd=(python3 "$here/liger.py" --setting fp32-accum) ;;
      cce) cmd=(python3 "$here/cce.py" --setting default) ;;
      cce-exact) cmd=(python3 "$here/cce.py" --setting exact) ;;
      megatron-vocab-parallel) cmd=(python3 "$here/megatron_vocab_parallel.py" --megatron "$megatron") ;;
      megatron-fused-lce) cmd=(python3 "$here/megatron_fused_lce.py" run --megatron "$megatron_fused") ;;
      te-parallel-ce) cmd=(python3 "$here/te_parallel_ce.py" --te "$te") ;;
      *) echo "run_all.sh: unknown subject $s" >&2; exit 2 ;;
    esac
    dest="$out/$s"
    run rm -rf "$dest"
    run cp -rl "$export_dir" "$dest" # hard links: the inputs are read, never written
    start=$(date +%s)
    if run_adapter "$s" "$dest" "${cmd[@]}"; then
      echo "run_all.sh: $s done in $(( $(date +%s) - start )) s -> $dest"
    else
      echo "run_all.sh: $s FAILED -> $dest"; status=1
    fi
  done
fi
if [ -n "$unit_test" ]; then
  PYTHONUNBUFFERED=1 run python3 "$here/megatron_fused_lce.py" unit-test --megatron "$megatron_fused" \
    --problems "$unit_test" --json "$out.megatron-unit-test.json" || status=1
fi
exit $status
