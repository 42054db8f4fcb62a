#!/usr/bin/env bash
# scripts/setup.sh — everything a fresh Debian 12 machine needs to build and test lcecheck, then the
# build itself. Idempotent: packages already installed are not touched (no apt-get at all when
# nothing is missing), and a second run only rebuilds what changed.
#
#   bash scripts/setup.sh              apt packages, Python requirements, build into build/
#   bash scripts/setup.sh --no-build   dependencies only
#   bash scripts/setup.sh --fuzzers    also a clang libFuzzer build into build-fuzz/
#
# Runs as root or through sudo (only when something must be installed). Every command it runs is
# printed, with a [setup] progress line before each step.
set -euo pipefail

APT_PACKAGES=(build-essential cmake libmpfr-dev libgmp-dev clang-14 libclang-rt-14-dev python3 python3-pip)
BUILD_TYPE=RelWithDebInfo

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }

build=1
fuzzers=0
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --fuzzers) fuzzers=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
start=$SECONDS
step() { echo "[setup +$((SECONDS - start))s] $*"; }
run() { echo "+ $*"; "$@"; }

# ---- apt --------------------------------------------------------------------------------------
step "checking apt packages: ${APT_PACKAGES[*]}"
missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  step "all apt packages present; apt-get skipped"
else
  step "installing missing apt packages: ${missing[*]}"
  sudo=()
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null; then
      echo "setup.sh: not root and no sudo; install these as root: ${missing[*]}" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ---- Python -----------------------------------------------------------------------------------
requirements=scripts/requirements.txt
if ! grep -Eq '^[[:space:]]*[^#[:space:]]' "$requirements"; then
  step "$requirements pins no package (standard library only); pip skipped"
else
  step "installing Python requirements from $requirements"
  pip_args=(install --disable-pip-version-check --requirement "$requirements")
  # Debian's system Python is "externally managed" (PEP 668) and refuses pip without this flag;
  # the requirements are pinned (matplotlib and its dependencies, for scripts/plot_errors.py).
  if python3 -c 'import sys, sysconfig, os; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
    pip_args+=(--break-system-packages)
  fi
  run python3 -m pip "${pip_args[@]}"
fi

# ---- CUTLASS headers (fused-sm90) --------------------------------------------------------------
# Header-only, never in the tree: the include directory of the PyPI package nvidia-cutlass (its
# cutlass_library/source/include: cute/ and cutlass/), extracted into the ignored .deps/ where
# cmake/FindCUTLASS.cmake looks. Without it the build still works; fused-sm90 is then not built.
CUTLASS_VERSION=4.2.0.0
cutlass_dir=.deps/cutlass-$CUTLASS_VERSION/include
if [ -f "$cutlass_dir/cute/tensor.hpp" ]; then
  step "CUTLASS $CUTLASS_VERSION headers present in $cutlass_dir; pip skipped"
else
  step "fetching the CUTLASS $CUTLASS_VERSION headers (PyPI nvidia-cutlass) into $cutlass_dir"
  wheel_dir=$(mktemp -d)
  run python3 -m pip download --disable-pip-version-check --no-deps --dest "$wheel_dir" "nvidia-cutlass==$CUTLASS_VERSION"
  run python3 -c 'import sys, zipfile, glob, os
wheel, dest = glob.glob(os.path.join(sys.argv[1], "nvidia_cutlass-*.whl"))[0], sys.argv[2]
prefix = "cutlass_library/source/include/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            path = os.path.join(dest, name[len(prefix):])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(z.read(name))' "$wheel_dir" "$cutlass_dir"
  rm -rf "$wheel_dir"
fi

# ---- build ------------------------------------------------------------------------------------
if ((build)); then
  step "configuring build/ ($BUILD_TYPE)"
  run cmake -S . -B build -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
  step "building build/ with $(nproc) jobs"
  run cmake --build build -j"$(nproc)"
  step "built: build/lcecheck; tests: ctest --test-dir build --output-on-failure"
fi
if ((fuzzers)); then
  step "configuring build-fuzz/ (clang-14, libFuzzer, ASan+UBSan)"
  # Tests stay in build/: this tree holds only the instrumented fuzzers (scripts/fuzz_campaign.py).
  run cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DCMAKE_C_COMPILER=clang-14 -DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF
  step "building build-fuzz/ with $(nproc) jobs"
  run cmake --build build-fuzz -j"$(nproc)"
fi
step "done"
