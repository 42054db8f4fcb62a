#!/bin/bash -eu
# .clusterfuzzlite/build.sh — builds lcecheck's CUDA-free fuzz targets as OSS-Fuzz and ClusterFuzzLite
# expect, one language per run, as the engine's $FUZZING_LANGUAGE says (its workflow's `language:`):
# - c (or c++, or unset): the libFuzzer targets, compiled with $CC and $CFLAGS (the engine's
#   sanitizers and coverage flags), linked with $LIB_FUZZING_ENGINE; MPFR and GMP linked statically,
#   so that the runner image, which has neither, can run the binaries;
# - python: the atheris targets (fuzz/parsers/fuzz_parse_<name>.py), frozen by the engine's
#   compile_python_fuzzer (PyInstaller) with the modules they import from scripts/ and the
#   golden/policy.txt they read, each started by the wrapper that compile_python_fuzzer writes.
# Each target lands in $OUT with its .options, .dict and a seed corpus zip (<target>_seed_corpus.zip).
# The C run runs unchanged outside a container with those variables set:
#   CC=clang-14 CFLAGS="-fsanitize=address,fuzzer-no-link" LIB_FUZZING_ENGINE=-fsanitize=fuzzer \
#     SRC=<parent of the checkout> WORK=/tmp/cfl-work OUT=/tmp/cfl-out bash .clusterfuzzlite/build.sh
# (the checkout is $SRC/lcecheck, or LCE_SRC). The python run needs the image's compile_python_fuzzer.
src=${LCE_SRC:-$SRC/lcecheck}
build=$WORK/lcecheck-build
arch_lib=/usr/lib/$(uname -m)-linux-gnu
static=()
for lib in mpfr gmp; do
  upper=$(echo "$lib" | tr a-z A-Z)
  [ -f "$arch_lib/lib$lib.a" ] && static+=("-D${upper}_LIBRARY=$arch_lib/lib$lib.a")
done

zip_corpus() { # <target> <corpus dir>
  (cd "$2" && zip -q -r "$OUT/$1_seed_corpus.zip" .)
}
extras() { # <target> <directory of its .options and .dict> <corpus dir>
  cp "$2/$1.options" "$OUT/"
  [ -f "$2/$1.dict" ] && cp "$2/$1.dict" "$OUT/"
  zip_corpus "$1" "$3"
}

# The parser targets are the fuzz/parsers/fuzz_parse_<name>.options files (as fuzz_campaign.py finds
# them), a C harness fuzz_parse_<name>.c or a Python one fuzz_parse_<name>.py.
parser_targets() { # <extension of the harness>
  (cd "$src/fuzz/parsers" && for o in fuzz_parse_*.options; do [ -f "${o%.options}.$1" ] && echo "${o%.options}"; done)
}
if [ "${FUZZING_LANGUAGE:-c}" = python ]; then
  for t in $(parser_targets py); do
    compile_python_fuzzer "$src/fuzz/parsers/$t.py" --paths "$src/scripts" --add-data "$src/golden/policy.txt:golden"
    extras "$t" "$src/fuzz/parsers" "$src/fuzz/corpus/parse_${t#fuzz_parse_}"
  done
  exit 0
fi
mapfile -t parsers < <(parser_targets c)
targets=(fuzz_subject fuzz_tiers "${parsers[@]}")

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="$CFLAGS" \
  -DLCE_FUZZING_ENGINE="$LIB_FUZZING_ENGINE" -DLCE_BUILD_TESTS=OFF -DLCE_BUILD_MUTANTS=OFF "${static[@]}"
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

for t in "${targets[@]}"; do
  cp "$build/$t" "$OUT/"
done
cp "$build"/libfuzz_plugin_scripted.so "$OUT/" # fuzz_parse_plugin loads it from beside itself
# The runner has $OUT but no source tree: the goldens go beside the binaries, where the harnesses that
# judge look for them (lce_fuzz_use_bundled_goldens).
rm -rf "$OUT/lcecheck-golden" && cp -r "$src/golden" "$OUT/lcecheck-golden"
for t in "${parsers[@]}"; do
  extras "$t" "$src/fuzz/parsers" "$src/fuzz/corpus/parse_${t#fuzz_parse_}"
done
for t in fuzz_subject fuzz_tiers; do
  extras "$t" "$src/fuzz" "$src/fuzz/corpus/subject"
done
