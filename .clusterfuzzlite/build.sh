#!/bin/bash -eu
# .clusterfuzzlite/build.sh — builds lcecheck's CUDA-free libFuzzer targets as OSS-Fuzz and
# ClusterFuzzLite expect: compiled with $CC and $CFLAGS (the engine's sanitizers and coverage flags),
# linked with $LIB_FUZZING_ENGINE, each binary in $OUT with its .options, .dict and a seed corpus zip
# (<target>_seed_corpus.zip). MPFR and GMP are linked statically, so that the runner image, which has
# neither, can run the binaries. Runs unchanged outside a container with those variables set:
#   CC=clang-14 CFLAGS="-fsanitize=address,fuzzer-no-link" LIB_FUZZING_ENGINE=-fsanitize=fuzzer \
#     SRC=<parent of the checkout> WORK=/tmp/cfl-work OUT=/tmp/cfl-out bash .clusterfuzzlite/build.sh
# (the checkout is $SRC/lcecheck, or LCE_SRC).
src=${LCE_SRC:-$SRC/lcecheck}
build=$WORK/lcecheck-build
arch_lib=/usr/lib/$(uname -m)-linux-gnu
static=()
for lib in mpfr gmp; do
  upper=$(echo "$lib" | tr a-z A-Z)
  [ -f "$arch_lib/lib$lib.a" ] && static+=("-D${upper}_LIBRARY=$arch_lib/lib$lib.a")
done
# The parser targets are the fuzz/parsers/fuzz_parse_<name>.options files (as fuzz_campaign.py finds them).
mapfile -t parsers < <(cd "$src/fuzz/parsers" && ls fuzz_parse_*.options | sed 's/\.options$//')
targets=(fuzz_subject fuzz_tiers "${parsers[@]}")

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="$CFLAGS" \
  -DLCE_FUZZING_ENGINE="$LIB_FUZZING_ENGINE" -DLCE_BUILD_TESTS=OFF -DLCE_BUILD_MUTANTS=OFF "${static[@]}"
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

zip_corpus() { # <target> <corpus dir>
  (cd "$2" && zip -q -r "$OUT/$1_seed_corpus.zip" .)
}
for t in "${targets[@]}"; do
  cp "$build/$t" "$OUT/"
done
cp "$build"/libfuzz_plugin_scripted.so "$OUT/" # fuzz_parse_plugin loads it from beside itself
# The runner has $OUT but no source tree: the goldens go beside the binaries, where the harnesses that
# judge look for them (lce_fuzz_use_bundled_goldens).
rm -rf "$OUT/lcecheck-golden" && cp -r "$src/golden" "$OUT/lcecheck-golden"
for t in "${parsers[@]}"; do
  cp "$src/fuzz/parsers/$t.options" "$OUT/"
  [ -f "$src/fuzz/parsers/$t.dict" ] && cp "$src/fuzz/parsers/$t.dict" "$OUT/"
  zip_corpus "$t" "$src/fuzz/corpus/parse_${t#fuzz_parse_}"
done
for t in fuzz_subject fuzz_tiers; do
  cp "$src/fuzz/$t.options" "$OUT/"
  [ -f "$src/fuzz/$t.dict" ] && cp "$src/fuzz/$t.dict" "$OUT/"
  zip_corpus "$t" "$src/fuzz/corpus/subject"
done
