# shellcheck shell=bash
# scripts/subjects/site_wheels.sh — sourced by run_all.sh and gpu_external.sh (ROOT set): the external
# kernels' wheels carried under $ROOT/.whl/ (a GPU machine without network) made importable.
#   site_wheels <site dir> <install 1|0>
# With install 1, every .whl under .whl/ (any depth) is installed with pip --no-index --no-deps --target
# <site dir>; then <site dir> and the paths its .pth files name (nvidia-cutlass-dsl puts its packages
# under python_packages/) are prepended to PYTHONPATH, which is exported and printed: PYTHONPATH
# directories are not site directories, so their .pth files are not read by Python itself.
# A wheel larger than one call can carry beside the tree travels in parts (split_wheel below, on the
# workstation): X.whl.sha256 and X.whl.part-aa, -ab, ... in one folder of .whl/, carried over several
# calls (scripts/gpu_detached.sh take brings a later part to a detached run). It is installed from
# the join of its parts (<site dir>.joined/X.whl) when that has the recorded sha256; until then it is left
# out with a line saying so, after waiting up to $LCE_WHEEL_WAIT_S seconds (default 0) for its parts.
# Returns 1 when pip fails.

# split_wheel <wheel> [<part size, split -b's: default 14M>]: the parts and sha256 beside the wheel; the
# wheel itself is then moved out of the way by the caller (a folder holding X.whl installs it whole).
split_wheel() {
  local whl=$1 size=${2:-14M}
  [ -f "$whl" ] || { echo "split_wheel: $whl: no such file" >&2; return 2; }
  (cd "$(dirname "$whl")" && sha256sum "$(basename "$whl")" > "$(basename "$whl").sha256" &&
    split -b "$size" "$(basename "$whl")" "$(basename "$whl").part-") && ls -l "$whl".part-* "$whl".sha256
}

# joined_wheel <sum file> <dir>: the join of X.whl.part-aa, -ab, ... into <dir>/X.whl when it has the sha256 the
# sum file records (its path on stdout); else 1, the reason on stderr.
joined_wheel() {
  local sum=$1 dir=$2 whl name want have parts
  whl=${sum%.sha256} name=$(basename "${sum%.sha256}")
  parts=("$whl".part-[a-z][a-z]) # split's suffixes: aa, ab, ... (676 parts at most)
  [ -e "${parts[0]}" ] || { echo "site_wheels: $name: no parts beside $sum" >&2; return 1; }
  mkdir -p "$dir" && cat "${parts[@]}" > "$dir/$name.tmp" || return 1
  want=$(cut -d' ' -f1 < "$sum") have=$(sha256sum < "$dir/$name.tmp" | cut -d' ' -f1)
  if [ "$want" != "$have" ]; then
    echo "site_wheels: $name: its ${#parts[@]} part(s) join to sha256 $have, not $want (a part missing or cut short)" >&2
    rm -f "$dir/$name.tmp"
    return 1
  fi
  mv "$dir/$name.tmp" "$dir/$name" && echo "$dir/$name"
}
site_wheels() {
  local site=$1 install=$2 wheels=() sums=() extra pth line sum joined t0
  if [ "$install" = 1 ] && [ -d "$ROOT/.whl" ]; then
    mapfile -t wheels < <(find -L "$ROOT/.whl" -type f -name '*.whl' | sort)
    mapfile -t sums < <(find -L "$ROOT/.whl" -type f -name '*.whl.sha256' | sort)
    for sum in "${sums[@]}"; do
      [ -f "${sum%.sha256}" ] && continue # the whole wheel is here
      t0=$(date +%s) joined=""
      until joined=$(joined_wheel "$sum" "$site.joined" 2>/dev/null); do
        if [ $(($(date +%s) - t0)) -ge "${LCE_WHEEL_WAIT_S:-0}" ]; then
          joined_wheel "$sum" "$site.joined" > /dev/null
          echo "site_wheels: $(basename "${sum%.sha256}") left out"
          break
        fi
        sleep 2
      done
      [ -n "$joined" ] && wheels+=("$joined") && echo "site_wheels: $(basename "$joined") joined from its parts"
    done
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
