# shellcheck shell=bash
# scripts/subjects/site_wheels.sh — sourced by run_all.sh and gpu_external.sh (ROOT set): the external
# kernels' wheels carried under $ROOT/.whl/ (a GPU machine without network) made importable.
#   site_wheels <site dir> <install 1|0>
# With install 1, every .whl under .whl/ (any depth) is installed with pip --no-index --no-deps --target
# <site dir>; then <site dir> and the paths its .pth files name (nvidia-cutlass-dsl puts its packages
# under python_packages/) are prepended to PYTHONPATH, which is exported and printed: PYTHONPATH
# directories are not site directories, so their .pth files are not read by Python itself.
# Returns 1 when pip fails.
site_wheels() {
  local site=$1 install=$2 wheels=() extra pth line
  if [ "$install" = 1 ] && [ -d "$ROOT/.whl" ]; then
    mapfile -t wheels < <(find -L "$ROOT/.whl" -type f -name '*.whl' | sort)
    if [ "${#wheels[@]}" -gt 0 ]; then
      echo "+ python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $site ${wheels[*]}"
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
        "${wheels[@]}" || return 1
    fi
  fi
  [ -d "$site" ] || return 0
  extra="$site"
  for pth in "$site"/*.pth; do
    [ -f "$pth" ] || continue
    while IFS= read -r line; do
      case "$line" in ''|'#'*|import*) continue ;; esac
      case "$line" in /*) extra="$extra:$line" ;; *) extra="$extra:$site/$line" ;; esac
    done < <(cat "$pth"; echo)
  done
  export PYTHONPATH="$extra${PYTHONPATH:+:$PYTHONPATH}"
  echo "+ export PYTHONPATH=$PYTHONPATH"
}
