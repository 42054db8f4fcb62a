"""lcecheck_run.py — how scripts/lcecheck_golden.py runs lcecheck: one command (printed first), its
JSON, and a matrix split into `--shard i/N` processes run at once whose JSON is pooled back into the
unsharded run's. Matrix specs (NAME[@ORACLE], case=ID[@ORACLE]) become lcecheck arguments here."""
import concurrent.futures
import json
import math
import os
import re
import shlex
import subprocess
import sys
import threading
import time

from lcecheck_golden_files import Refusal, ToolError


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Progress:
    """Cases done and time left over the lcecheck processes of one sweep (a matrix, perhaps in shards),
    from their per-case progress lines on stderr ("[   k/n] status id ..."). Prints one line at most
    every `every` seconds, and the last one when every process has reported its last case."""
    LINE = re.compile(r"^\[\s*(\d+)/(\d+)\]")

    def __init__(self, what, processes=1, every=10.0):
        self.what, self.processes, self.every = what, processes, every
        self.start = self.last = time.monotonic()
        self.lock = threading.Lock()
        self.seen = {}  # process key -> (done, total)

    def line(self, key, text):
        m = self.LINE.match(text)
        if not m:
            return
        with self.lock:
            self.seen[key] = (int(m.group(1)), int(m.group(2)))
            done, total = (sum(v[i] for v in self.seen.values()) for i in (0, 1))
            now = time.monotonic()
            if now - self.last < self.every and done < total:
                return
            self.last = now
            elapsed = now - self.start
            left = elapsed * (total - done) / done if done else math.inf
            shards = f" ({len(self.seen)} of {self.processes} shards counted)" if len(self.seen) < self.processes else ""
            log(f"  progress {self.what}: {done}/{total} cases{shards}, {elapsed:.0f} s elapsed, "
                + (f"~{left:.0f} s left" if math.isfinite(left) else "time left unknown"))


def run_command(argv, check=True, env=None, progress=None):
    """Runs argv, printing it first (with OMP_NUM_THREADS when env sets it, so that the line reruns
    what ran); returns (exit code, stdout, stderr). With a Progress, stderr is read as it comes and its
    per-case lines feed it (a sweep of minutes says how far it is)."""
    threads = (env or {}).get("OMP_NUM_THREADS")
    log("+ " + (f"OMP_NUM_THREADS={threads} " if threads else "") + shlex.join(argv))
    try:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    except OSError as e:
        raise ToolError(f"cannot run {argv[0]}: {e}")
    err_lines = []

    def read_stderr():
        for text in p.stderr:
            err_lines.append(text)
            if progress is not None:
                progress.line(id(p), text)
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    out = p.stdout.read()
    p.wait()
    reader.join()
    err = "".join(err_lines)
    if check and p.returncode != 0:
        raise ToolError(f"{shlex.join(argv)} exited with {p.returncode}:\n{err.strip()}")
    return p.returncode, out, err


def run_verb(prog, verb, args):
    """Runs verb(args) as a script's main does: a Refusal is exit 1 (and {"refused": ...} with --json),
    a ToolError exit 2, each said on stderr under the script's name."""
    try:
        return verb(args)
    except Refusal as e:
        log(f"{prog}: REFUSED: {e}")
        if getattr(args, "json", False):
            print(json.dumps({"refused": str(e)}, indent=2))
        return 1
    except ToolError as e:
        log(f"{prog}: error: {e}")
        return 2


def usable_cores():
    """The cores this process may run on (its affinity mask, as nproc counts them), not the host's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def omp_threads(jobs, cores=None):
    """OpenMP threads per shard when jobs shards run at once: the usable cores shared out, at least 1."""
    return max(1, (cores if cores is not None else usable_cores()) // jobs)


def run_sharded(argv, jobs):
    """Runs argv (an lcecheck check or measure) as `jobs` processes at once, the i-th with --shard
    i/jobs, and returns [(name, exit code, stdout, stderr)] in shard order; jobs 1, or one --case
    (nothing to split), runs argv unsharded. The MPFR oracle is single-threaded, so one process per core fills a machine; the
    host subjects and case generation run OpenMP threads, which get the cores left per shard
    (omp_threads) lest jobs x cores threads compete."""
    sharded = jobs > 1 and "--case" not in argv
    progress = Progress(" ".join(argv[1:argv.index("--json")] if "--json" in argv else argv[1:]),
                        processes=jobs if sharded else 1)
    if not sharded:
        return [("",) + run_command(argv, check=False, progress=progress)]
    env = dict(os.environ, OMP_NUM_THREADS=str(omp_threads(jobs)))

    def run_shard(i):
        start = time.monotonic()
        result = run_command(argv + ["--shard", f"{i}/{jobs}"], check=False, env=env, progress=progress)
        log(f"  shard {i}/{jobs} finished: exit {result[0]} after {time.monotonic() - start:.1f} s")
        return (f"shard {i}/{jobs}",) + result

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(run_shard, range(jobs)))


def pool_shards(parts):
    """The JSON of shards 0..N-1 of a matrix as the unsharded run prints it: shard i holds the cases
    i, i+N, ... of the matrix, so interleaving them restores its order. Summary counts are summed, and
    "ok" is lcecheck's rule on the sums: nothing failed or errored and some case ran."""
    pooled = {k: v for k, v in parts[0].items() if k != "shard"}
    cases = [p.get("cases") or [] for p in parts]
    pooled["cases"] = [c[k] for k in range(max(map(len, cases))) for c in cases if k < len(c)]
    if len(parts) > 1:
        sums = [p.get("summary") or {} for p in parts]
        t = pooled["summary"] = {k: sum(s.get(k, 0) for s in sums) for k in sums[0] if k != "ok"}
        t["ok"] = t.get("fail", 0) + t.get("error", 0) == 0 and t.get("pass", 0) + t.get("fail", 0) > 0
    return pooled


def run_json(argv, ok_codes=(0,), jobs=1):
    """Runs argv and parses its stdout; exit codes outside ok_codes are tool errors. jobs > 1 runs
    argv in that many shards (run_sharded), each held to ok_codes, and pools their JSON."""
    parts = []
    for name, rc, out, err in run_sharded(argv, jobs):
        where = shlex.join(argv) + (f" ({name})" if name else "")
        if rc not in ok_codes:
            raise ToolError(f"{where} exited with {rc}:\n{err.strip()[-2000:]}")
        try:
            parts.append(json.loads(out))
        except json.JSONDecodeError as e:
            raise ToolError(f"{where} did not print JSON ({e})")
    return pool_shards(parts)


def matrix_args(spec):
    """'medium@fp64-gpu' -> ['--matrix', 'medium', '--oracle', 'fp64-gpu']; 'case=ID' -> ['--case', ID]
    (one case a matrix lacks, e.g. a medium shape tier 0 judges in minutes)."""
    name, _, oracle = spec.partition("@")
    sel = ["--case", name[5:]] if name.startswith("case=") else ["--matrix", name]
    return sel + (["--oracle", oracle] if oracle else [])

