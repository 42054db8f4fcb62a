# scripts/gpu_env.sh — sourced by gpu_run.sh and gpu_fuzz.sh (ROOT set): MPFR and GMP for a GPU
# machine that has neither, from the carried .deps/root (apt-get download + dpkg -x on the
# workstation; conformance/GPU_RUNS.md says how). Sets CMAKE_DEPS (arguments for cmake) and extends
# LD_LIBRARY_PATH; without .deps, the system's libraries are used.
DEPS=$ROOT/.deps/root/usr
CMAKE_DEPS=()
if [ -d "$DEPS" ]; then
  CMAKE_DEPS=(-DGMP_ROOT="$DEPS" -DMPFR_ROOT="$DEPS")
  export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
