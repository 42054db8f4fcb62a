"""fuzz_targets.py — `fuzz_campaign.py targets` and `run --target`: the fuzz targets (one binary each,
or a Python harness under atheris), their .options and seed corpora, a time-boxed campaign per target
over many cores with progress lines, then merge, triage and the report (glue only, no entry point)."""
import configparser
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import NamedTuple, Optional

from fuzz_common import (ARTIFACT_PREFIXES, FUZZ_DIR, REPO, build_description, build_has_cuda, finding_cases,
                         finding_line, findings_dir_for, is_gpu_subject, md_cell, print_command, source_commit,
                         start_error)



class Target(NamedTuple):
    options: Path           # its .options file ([libfuzzer] flags)
    corpus: Path            # its seed corpus
    script: Optional[Path]  # a Python harness (atheris); None for a C target (a binary)


# The fuzz targets by binary name. fuzz_subject fuzzes the subject named by --subject
# (LCE_FUZZ_SUBJECT); fuzz_tiers the oracle tiers against each other; the parser targets are every
# fuzz/parsers/fuzz_parse_<name>.options, with the corpus fuzz/corpus/parse_<name> and, where
# fuzz_parse_<name>.py exists, that Python harness instead of a C binary.
TARGETS = {
    "fuzz_subject": Target(FUZZ_DIR / "fuzz_subject.options", FUZZ_DIR / "corpus" / "subject", None),
    "fuzz_tiers": Target(FUZZ_DIR / "fuzz_tiers.options", FUZZ_DIR / "corpus" / "subject", None),
    **{opt.stem: Target(opt, FUZZ_DIR / "corpus" / ("parse_" + opt.stem[len("fuzz_parse_"):]),
                        opt.with_suffix(".py") if opt.with_suffix(".py").is_file() else None)
       for opt in sorted((FUZZ_DIR / "parsers").glob("fuzz_parse_*.options"))},
}
# Where a bundle (fuzz_campaign.py bundle) keeps atheris for one Python version: its Python targets
# import it from there, the interpreter running them may have none.
BUNDLED_PYTHON = REPO / "python" / f"cp{sys.version_info.major}{sys.version_info.minor}"
OPTION_KEYS = ("max_len", "dict", "timeout", "rss_limit_mb")


def target_options(entry):
    """A target's .options file ([libfuzzer] key = value) → {key: value}; dict becomes an absolute path."""
    path = entry.options
    parser = configparser.ConfigParser()
    parser.read(path)
    opts = dict(parser["libfuzzer"]) if parser.has_section("libfuzzer") else {}
    if "dict" in opts:
        opts["dict"] = str((path.parent / opts["dict"]).resolve())
    return opts


def option_flags(args, opts):
    """libFuzzer flags from the target's options, each overridden by its command-line option when given."""
    merged = dict(opts)
    for key, value in (("max_len", args.max_len), ("timeout", args.unit_timeout)):
        if value is not None:
            merged[key] = str(value)
    return [f"-{key}={merged[key]}" for key in OPTION_KEYS if key in merged]


def target_env(target, args, d):
    """The harness's environment: subject and findings directory (fuzz_subject, fuzz_tiers); this tree's
    goldens unless LCE_GOLDEN_DIR names others (a binary built elsewhere knows only its own tree's);
    a bundle's atheris on the path of a Python target."""
    env = {"LCE_FUZZ_FINDINGS": str(d)} if target in ("fuzz_subject", "fuzz_tiers") else {}
    if target == "fuzz_subject":
        env["LCE_FUZZ_SUBJECT"] = args.subject
    if not TARGETS[target].script and "LCE_GOLDEN_DIR" not in os.environ:
        env["LCE_GOLDEN_DIR"] = str(REPO / "golden")
    if TARGETS[target].script and BUNDLED_PYTHON.is_dir():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BUNDLED_PYTHON), os.environ.get("PYTHONPATH")]))
    return env


def target_command(args, target):
    """How a target starts: the binary <build>/<target> where there is one (a C target; a Python one
    that a build froze or wrapped, as .clusterfuzzlite/build.sh does), else a Python target's harness
    under this interpreter, which takes libFuzzer's argv as the binaries do; None when neither exists."""
    binary = Path(args.build) / target
    if binary.is_file() and os.access(binary, os.X_OK):
        return [binary.resolve()]
    script = TARGETS[target].script
    return [Path(sys.executable), script] if script else None


def repro_command(target, command, regression):
    """One input again: the binary on it, or a Python harness's replay (no atheris needed)."""
    if command[-1] == TARGETS[target].script:
        return [*command, "replay", regression]
    return [*command, regression]


def cmd_targets(args):
    rows = []
    for name, entry in TARGETS.items():
        command = target_command(args, name)
        built = command is not None and (len(command) == 1 or importable("atheris", target_env(name, args, None)))
        rows.append({"target": name, "built": built,
                     "runner": "missing" if command is None else "binary" if len(command) == 1 else
                     "python harness" + ("" if built else " (atheris missing)"),
                     "command": shlex.join(str(c) for c in command) if command else None,
                     "options": str(entry.options.relative_to(REPO)),
                     "seed_corpus": str(entry.corpus.relative_to(REPO)),
                     "seeds": sum(1 for f in entry.corpus.iterdir() if f.is_file()) if entry.corpus.is_dir() else 0,
                     "libfuzzer": target_options(entry)})
    if args.json:
        print(json.dumps({"build": str(args.build), "targets": rows}, indent=2))
        return 0
    width = max(len(r["target"]) for r in rows)
    cwidth = max(len(r["seed_corpus"]) for r in rows)
    print(f"{'target':<{width}}  built  seeds  {'seed corpus':<{cwidth}}  options")
    for r in rows:
        flags = " ".join(f"{k}={Path(v).name if k == 'dict' else v}" for k, v in r["libfuzzer"].items())
        runner = f"  ({r['runner']})" if r["runner"] != "binary" else ""
        print(f"{r['target']:<{width}}  {'yes' if r['built'] else 'no':<5}  {r['seeds']:>5}  "
              f"{r['seed_corpus']:<{cwidth}}  {flags}{runner}")
    return 0


def importable(module, env):
    """Whether this interpreter imports module with env's additions (a bundle's PYTHONPATH)."""
    return subprocess.run([sys.executable, "-c", f"import {module}"], env=dict(os.environ, **env),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


STATUS_LINE = re.compile(r"^#(\d+)[:\s].*?\bcov: (\d+).*?\bcorp: (\d+)", re.M)


def progress_of(d):
    """Executions, coverage and corpus size so far, from the logs in d: with -jobs, one fuzz-<i>.log
    per job (executions summed over them; fuzzer.log then repeats a finished job's log), else
    fuzzer.log (the single or the fork-mode process)."""
    logs = sorted(d.glob("fuzz-*.log")) or [d / "fuzzer.log"]
    execs, cov, corp, final_execs = 0, 0, 0, 0
    for log in logs:
        text = log.read_text(errors="replace") if log.is_file() else ""
        lines = STATUS_LINE.findall(text)
        if lines:
            execs += int(lines[-1][0])
            cov = max(cov, int(lines[-1][1]))
            corp = max(corp, int(lines[-1][2]))
        final = re.search(r"stat::number_of_executed_units:\s*(\d+)", text)
        final_execs += int(final.group(1)) if final else int(lines[-1][0]) if lines else 0
    return {"executions": max(execs, final_execs), "coverage": cov, "corpus": corp}


def artifacts_in(d):
    return sorted(p for p in d.iterdir() if p.is_file() and p.name.startswith(ARTIFACT_PREFIXES))


def progress_line(target, seconds, t0, d):
    p = progress_of(d)
    left = max(0, seconds - (time.monotonic() - t0))
    return (f"{target}: {p['executions']} execs, cov {p['coverage']}, corpus {p['corpus']}, "
            f"findings {len(artifacts_in(d))}, {left:.0f} s left")


def run_group(cmd, env, log, cwd, stop_at, every=None, tick=None):
    """Runs cmd in a process group of its own (libFuzzer's -fork/-jobs children with it), calling tick
    every `every` seconds; at stop_at (time.monotonic()) the whole group is killed. → (exit code, killed)."""
    proc = subprocess.Popen([str(c) for c in cmd], env=dict(os.environ, **env), stdout=log,
                            stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
    killed = False
    while proc.poll() is None:
        try:
            proc.wait(timeout=max(0.05, min(every or 1.0, stop_at - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= stop_at:
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                proc.wait()
            elif tick:
                tick()
    try:  # children a finished parent left behind (a -jobs worker still writing) go with it
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.returncode, killed


def merge_corpus(args, target, command, env, opts, d, seeds, stop_at):
    """-merge=1 of the working corpus and the seeds into a fresh directory (the minimized corpus), or,
    with --update-seeds, of the working corpus into the seed corpus itself (only new coverage is added);
    killed at stop_at (the --deadline), when the directory holds what was merged by then."""
    out = seeds if args.update_seeds else d / "merged"
    out.mkdir(exist_ok=True)
    inputs = [d / "corpus"] + ([] if args.update_seeds or not seeds.is_dir() else [seeds])
    before = sum(1 for _ in out.iterdir())
    cmd = [*command, "-merge=1", f"-artifact_prefix={d}/merge-", *option_flags(args, opts), out, *inputs]
    print_command(cmd, env)
    with open(d / "merge.log", "w") as log:
        code, killed = run_group(cmd, env, log, d, stop_at)
    files = [f for f in out.iterdir() if f.is_file()]
    return {"dir": str(out), "exit_code": code, "killed_at_deadline": killed, "files": len(files),
            "added": len(files) - before, "bytes": sum(f.stat().st_size for f in files),
            "log": str(d / "merge.log")}


def triage(args, target, d, command):
    """Every artifact → a regression input (named by its content hash), a one-line repro and, for
    fuzz_subject/fuzz_tiers, the case id and what failed from the harness's .finding file."""
    regressions = Path(args.regressions or Path(args.findings_root) / "regressions") / target
    cases = finding_cases(d)
    out = []
    for a in artifacts_in(d):
        data = a.read_bytes()
        regressions.mkdir(parents=True, exist_ok=True)
        kind = a.name.split("-", 1)[0]
        reg = regressions / f"regression-{kind}-{hashlib.sha1(data).hexdigest()[:16]}"
        shutil.copyfile(a, reg)
        env = target_env(target, args, d)
        for key in ("LCE_FUZZ_FINDINGS", "LCE_GOLDEN_DIR", "PYTHONPATH"):  # the repro runs in this tree, no atheris
            env.pop(key, None)
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        repro = (prefix + " " if prefix else "") + shlex.join(str(c) for c in repro_command(target, command, reg))
        # The harness writes its .finding for the input that failed: the one whose .input matches.
        case = next((c for c in cases if Path(c["file"]).with_suffix(".input").is_file()
                     and Path(c["file"]).with_suffix(".input").read_bytes() == data), None)
        if case is None and len(cases) == 1:
            case = cases[0]
        out.append({"kind": kind, "artifact": str(a), "regression": str(reg), "repro": repro,
                    "case": case["case"] if case else None, "what": finding_line(case) if case else None})
    return out


def target_campaign(args, target, seconds, deadline):
    """One target for `seconds` over args.jobs cores: progress while it runs, then triage and merge;
    everything it starts is killed at the monotonic time `deadline` (--deadline; inf without)."""
    entry = TARGETS[target]
    command = target_command(args, target)
    if command is None:
        sys.exit(f"fuzz_campaign: {Path(args.build) / target} not found; build it with CC=clang cmake -S {REPO} "
                 f"-B {args.build} -DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF && cmake --build {args.build} "
                 f"--target {target}")
    name = target + (f"_{args.subject}" if target == "fuzz_subject" else "")
    d = findings_dir_for(args.findings_root, name)
    opts = target_options(entry)
    env = target_env(target, args, d)
    seeds = Path(args.seed_root).resolve() / entry.corpus.name if args.seed_root else entry.corpus
    parallel = f"-fork={args.jobs}" if args.parallel == "fork" else f"-jobs={args.jobs}"
    cmd = [*command, f"-max_total_time={seconds}", f"-artifact_prefix={d}/", "-print_final_stats=1",
           *option_flags(args, opts), f"-seed={args.seed}", parallel,
           *([f"-workers={args.jobs}"] if args.parallel == "jobs" else
             ["-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1"]),
           d / "corpus", *([seeds] if seeds.is_dir() else [])]
    log_path = d / "fuzzer.log"
    t0 = time.monotonic()
    print_command(cmd, env)
    with open(log_path, "w") as log:
        # libFuzzer stops at max_total_time (with -jobs, each job does); the stop time only guards
        # against one that does not, and enforces --deadline.
        code, killed = run_group(cmd, env, log, d, min(t0 + seconds + max(60, seconds), deadline), args.progress,
                                 lambda: print(progress_line(target, seconds, t0, d), file=sys.stderr, flush=True))
    elapsed = time.monotonic() - t0
    log_text = log_path.read_text(errors="replace")
    started = "INFO: Seed:" in log_text or any(d.glob("fuzz-*.log"))
    p = progress_of(d)
    r = {"target": target, "subject": args.subject if target == "fuzz_subject" else None,
         "seconds_run": round(elapsed, 2), "exit_code": code, "killed": killed, "findings_dir": str(d),
         "log": str(log_path), "error": None, "skipped": False, **p,
         "exec_per_s": round(p["executions"] / elapsed) if elapsed > 0 else 0,
         "command": shlex.join(str(c) for c in cmd), "merge": None, "findings": []}
    if not started:
        r["error"], r["skipped"] = start_error(code, log_text, log_path, r["subject"], args.build)
        print(f"fuzz_campaign: {target}: {r['error']}", file=sys.stderr)
        return r
    print(progress_line(target, seconds, t0, d), file=sys.stderr, flush=True)
    if killed:
        print(f"fuzz_campaign: {target}: killed at {elapsed:.0f} s (its stop time or --deadline)", file=sys.stderr)
    r["findings"] = triage(args, target, d, command)
    r["merge"] = merge_corpus(args, target, command, env, opts, d, seeds, deadline)
    return r


def not_run(target, why):
    """The row of a target that --deadline left no time for (an error: the campaign is incomplete)."""
    return {"target": target, "subject": None, "seconds_run": 0.0, "exit_code": None, "killed": False,
            "error": f"not run: {why}", "skipped": False, "executions": 0, "coverage": 0, "corpus": 0,
            "exec_per_s": 0, "merge": None, "findings": []}


TARGET_COLUMNS = (("execs", 10), ("exec/s", 8), ("cov", 6), ("corpus", 7), ("merged", 7), ("findings", 8),
                  ("seconds", 7))


def target_cells(r):
    """The table's cells of one target, in TARGET_COLUMNS order; None after an error."""
    if r["error"]:
        return None
    return [r["executions"], r["exec_per_s"], r["coverage"], r["corpus"], r["merge"]["files"],
            len(r["findings"]), f"{r['seconds_run']:.1f}"]


def targets_table(rows):
    width = max(len("target"), *(len(r["target"]) for r in rows))
    lines = [f"{'target':<{width}} " + " ".join(f"{name:>{w}}" for name, w in TARGET_COLUMNS)]
    for r in rows:
        cells = target_cells(r)
        if cells is None:
            lines.append(f"{r['target']:<{width}}  {r['error'].splitlines()[0]}")
            continue
        lines.append(f"{r['target']:<{width}} " + " ".join(f"{c:>{w}}" for c, (_, w) in zip(cells, TARGET_COLUMNS)))
        for f in r["findings"]:
            lines.append(f"    {f['kind']}: {f['regression']}")
            if f["case"]:
                lines.append(f"    case {f['case']}: {f['what']}")
            lines.append(f"    repro: {f['repro']}")
    return "\n".join(lines)


def runs_description(args, rows):
    """What the targets ran as: the build of the binaries, atheris on this CPython for Python harnesses."""
    python = {r["target"] for r in rows if TARGETS[r["target"]].script and not (Path(args.build) / r["target"]).is_file()}
    parts = [f"build {build_description(args.build)}"] if len(python) < len(rows) else []
    if python:
        parts.append(f"{', '.join(sorted(python))} under atheris on CPython {sys.version.split()[0]}")
    return "; ".join(parts)


def record_section(args, rows, when):
    """One dated section for fuzz/CAMPAIGNS.md: date, commit, command, per-target table, findings."""
    command = "python3 scripts/fuzz_campaign.py " + shlex.join(sys.argv[1:])
    total = sum(r["executions"] for r in rows if not r["error"])
    found = sum(len(r["findings"]) for r in rows)
    lines = [f"\n## {when:%Y-%m-%d %H:%M} UTC — targets campaign (commit {source_commit()}, "
             f"working tree as it was then)\n", f"    {command}\n",
             f"{len(rows)} target(s), {args.seconds} s each over {args.jobs} core(s) ({args.parallel}), "
             f"{total} executions, {found} finding(s); libFuzzer -seed={args.seed}; {runs_description(args, rows)}.\n",
             "| target | " + " | ".join(name for name, _ in TARGET_COLUMNS) + " |",
             "|---|" + "---:|" * len(TARGET_COLUMNS)]
    for r in rows:
        cells = target_cells(r)
        if cells is None:
            cells = ["-"] * (len(TARGET_COLUMNS) - 1) + [md_cell(r["error"].splitlines()[0])]
        lines.append(f"| {r['target']} | " + " | ".join(str(c) for c in cells) + " |")
    for r in rows:
        for f in r["findings"]:
            case = f" (case `{f['case']}`: {md_cell(f['what'])})" if f["case"] else ""
            lines.append(f"\n- {r['target']}: {f['kind']}{case}; regression input `{f['regression']}`; "
                         f"repro `{f['repro']}`")
    return "\n".join(lines) + "\n"


def write_results(out, args, rows, section):
    """--out: report.md (the section --record appends), report.json, and fuzz-results.tar.gz, which
    holds both, the regression inputs, the harness's .finding files and each target's merged corpus
    (corpora/<target>/): three files to bring back from another machine."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(section, encoding="utf-8")
    (out / "report.json").write_text(json.dumps({"seconds": args.seconds, "jobs": args.jobs, "rows": rows}, indent=2))
    with tarfile.open(out / "fuzz-results.tar.gz", "w:gz") as tar:
        tar.add(out / "report.md", "report.md")
        tar.add(out / "report.json", "report.json")
        regressions = Path(args.regressions)
        if regressions.is_dir():
            tar.add(regressions, "regressions")
        for r in rows:
            d = Path(r["findings_dir"]) if r.get("findings_dir") else None
            for f in sorted(d.glob("*.finding")) + sorted(d.glob("*.input")) if d else []:
                tar.add(f, f"findings/{r['target']}/{f.name}")
            if r["merge"] and not args.update_seeds:
                tar.add(r["merge"]["dir"], f"corpora/{r['target']}")
    size = (out / "fuzz-results.tar.gz").stat().st_size
    print(f"fuzz_campaign: results in {out}: report.md, report.json, fuzz-results.tar.gz ({size / 2**20:.1f} MiB)",
          file=sys.stderr)


def target_seconds(args, left_s, targets_left):
    """The seconds a target gets: --seconds, or less where --deadline leaves less: four fifths of an
    equal share of the time left (the rest for start-up, merge and triage; one that overruns its
    share shortens those after it)."""
    if left_s == float("inf"):
        return args.seconds
    return min(args.seconds, int(0.8 * left_s / targets_left))


def cmd_run_targets(args):
    names = list(TARGETS) if args.target == "all" else args.target.split(",")
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        print(f"fuzz_campaign: unknown target {unknown[0]} (known: all, {', '.join(TARGETS)})", file=sys.stderr)
        return 2
    if args.target == "fuzz_subject" and is_gpu_subject(args.subject) and not build_has_cuda(args.build):
        print(f"fuzz_campaign: skipped: {args.subject} is a GPU subject and {args.build} was built "
              f"without CUDA (-DLCE_FUZZ_WITH_CUDA=ON, or bundle-gpu)", file=sys.stderr)
        return 77
    when = datetime.datetime.now(datetime.timezone.utc)
    deadline = time.monotonic() + args.deadline if args.deadline else float("inf")
    rows = []
    for i, name in enumerate(names):
        seconds = target_seconds(args, deadline - time.monotonic(), len(names) - i)
        if seconds < 1:
            rows.append(not_run(name, f"--deadline {args.deadline} s left no time for it"))
            print(f"fuzz_campaign: {name}: {rows[-1]['error']}", file=sys.stderr)
            continue
        print(f"fuzz_campaign: target {i + 1}/{len(names)}: {name}, {seconds} s", file=sys.stderr, flush=True)
        rows.append(target_campaign(args, name, seconds, deadline))
    if args.json:
        print(json.dumps({"seconds": args.seconds, "jobs": args.jobs, "rows": rows}, indent=2))
    else:
        print(targets_table(rows))
    section = record_section(args, rows, when)
    if args.record:
        with open(args.record, "a", encoding="utf-8") as fh:
            fh.write(section)
        print(f"fuzz_campaign: recorded in {args.record}", file=sys.stderr)
    if args.out:
        write_results(Path(args.out), args, rows, section)
    if any(r["error"] and not r["skipped"] for r in rows):
        return 2
    if any(r["findings"] for r in rows):
        return 1
    return 77 if all(r["skipped"] for r in rows) else 0
