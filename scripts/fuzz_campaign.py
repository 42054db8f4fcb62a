#!/usr/bin/env python3
"""fuzz_campaign.py — time-boxed libFuzzer campaigns over the FLCE subjects (glue only).

  run --subject S --seconds T [--json]     one campaign: was a violation found, and how fast
  targets                                  the fuzz targets, their .options and seed corpora
  run --target T[,T...]|all --seconds T [--jobs N] [--parallel fork|jobs] [--update-seeds]
      [--regressions DIR] [--record FILE] [--json]
                                           T seconds per target over N cores (default: all), with
                                           progress lines while it runs; then the working corpus is
                                           merged and minimized (-merge=1) into a fresh directory
                                           (into the seed corpus only with --update-seeds), every
                                           finding is copied into DIR as a regression input with a
                                           one-line repro, and a table per target is printed
                                           (executions, exec/s, coverage, corpus, findings);
                                           --record appends it, dated, to FILE
  bundle-gpu [--build DIR] [--out DIR]   the libFuzzer build WITH fused-cuda (clang + nvcc), copied with
                                           the shared libraries a GPU machine may lack into an ignored
                                           folder (default .gpufuzz/) that scripts/gpu_fuzz.sh runs there
  kill-table [--seconds T] [--json] [--record FILE]
                                           fused-host and every mutant/* subject of `lcecheck list`,
                                           one campaign each (T seconds at most, default 60);
                                           fused-host must not be found, every mutant must be;
                                           --record appends the table, dated, with the commit and
                                           the command, to FILE (fuzz/CAMPAIGNS.md)

The fuzzer is fuzz_subject from a clang build configured with
  CC=clang cmake -S . -B build-fuzz -DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF
The harness decides what a violation is (golden bounds, class checks, determinism); this script
only starts it, collects the artifacts and reports. Every command it runs is printed first.

A subject that needs a GPU on a machine without one makes the harness exit 77 before libFuzzer starts:
`run` reports it as skipped and exits 77 (never "no finding").
A campaign ends at its first finding (the harness traps, libFuzzer stops), so a table of mutants
that are all killed early costs far less than (mutants + 1) * T.
Each campaign gets its own findings directory (<findings-root>/<subject>/<UTC time>) holding the
libFuzzer log, its crash-* artifacts, the harness's <case id>.finding/.input files and the working
corpus (new inputs never go into the committed seed corpus).
"""
import argparse
import configparser
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEED_CORPUS = REPO / "fuzz" / "corpus" / "subject"
FUZZ_DIR = REPO / "fuzz"
ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def echo_run(cmd, env_extra=None, **kwargs):
    """Prints the command (with its environment additions) and runs it."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env_extra or {}).items())
    print("+", (prefix + " " if prefix else "") + shlex.join(str(c) for c in cmd), file=sys.stderr, flush=True)
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([str(c) for c in cmd], env=env, **kwargs)


def findings_dir_for(root, subject):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    d = Path(root).resolve() / subject.replace("/", "_") / stamp  # absolute: the fuzzer runs in it
    (d / "corpus").mkdir(parents=True, exist_ok=False)
    return d


def parse_finding(text, fallback_case):
    """One .finding file (lce_fuzz_session.c's write_report) → dict: case, kind, summary, and the
    failing outputs ("d_hidden: ulpfrac 3.1, bound 1 (310% of budget)"), indented lines before repro."""
    case = re.search(r"^case: (.*)$", text, re.M)
    kind = re.search(r"^lce-fuzz violation: (.*)$", text, re.M)
    summary = re.search(r"^summary: (.*)$", text, re.M)
    outputs = [line.strip() for line in text.splitlines() if line.startswith("  ") and line.strip()]
    return {"case": case.group(1) if case else fallback_case,
            "kind": kind.group(1) if kind else "?",
            "summary": summary.group(1) if summary else "",
            "outputs": outputs}


def finding_cases(d):
    """The harness's .finding files, oldest first (libFuzzer stops at the first, so usually one)."""
    cases = []
    for f in sorted(d.glob("*.finding"), key=lambda p: (p.stat().st_mtime, p.name)):
        c = parse_finding(f.read_text(errors="replace"), f.stem)
        c["file"] = str(f)
        c["mtime"] = f.stat().st_mtime
        cases.append(c)
    return cases


def worst_output(outputs):
    """The failing output line that matters most: a class failure (wrong NaN/Inf/exact value, an
    untouched buffer written) first, else the metric furthest over its bound."""
    def rank(line):
        if ": class: " in line:
            return float("inf")
        m = re.search(r"\(([\d.]+)% of budget\)", line)
        return float(m.group(1)) if m else 0.0
    return max(outputs, key=rank) if outputs else None


def finding_line(c):
    """What failed, in one line: the worst failing output and metric, else the summary."""
    what = worst_output(c["outputs"]) or c["summary"]
    return what if c["kind"] == "verdict fail" else f"{c['kind']}: {what}"


def log_tail(text, lines=8):
    """The last lines of a fuzzer log that say something (the sanitizer's or the harness's message)."""
    kept = [line for line in text.splitlines() if line.strip()]
    return "\n".join("    " + line for line in kept[-lines:])


def build_has_cuda(build):
    """Whether the fuzzer build was configured with fused-cuda (LCE_FUZZ_WITH_CUDA=ON)."""
    cache = Path(build) / "CMakeCache.txt"
    return cache.is_file() and re.search(r"^LCE_FUZZ_WITH_CUDA:\w+=(ON|1|TRUE|YES)\s*$",
                                         cache.read_text(errors="replace"), re.M | re.I) is not None


def is_gpu_subject(subject):
    """GPU subjects are named fused-cuda* or mutant-cuda/* in the subject registry."""
    return subject.startswith(("fused-cuda", "mutant-cuda/"))


def start_error(returncode, log_text, log_path, subject, build):
    """Why a fuzzer that never reached libFuzzer's seed line did not start → (message, skipped).
    Exit 77 is the harness's skip for a GPU subject without a GPU; a GPU subject that a build without
    CUDA does not know is skipped as well; anything else is an error that shows the log's tail."""
    if returncode == 77:
        return f"skipped: the subject needs a GPU this machine lacks (exit 77); see {log_path}", True
    if subject and is_gpu_subject(subject) and "unknown subject" in log_text and not build_has_cuda(build):
        return (f"skipped: {subject} is a GPU subject and {build} was built without CUDA "
                f"(configure with -DLCE_FUZZ_WITH_CUDA=ON, or use bundle-gpu); see {log_path}"), True
    return f"fuzzer did not start (exit {returncode}); the end of {log_path}:\n{log_tail(log_text)}", False


def campaign(args, subject):
    """Runs the fuzzer for one subject; returns a result dict."""
    fuzzer = Path(args.build) / "fuzz_subject"
    if not fuzzer.is_file():
        sys.exit(f"fuzz_campaign: {fuzzer} not found; build it with "
                 f"CC=clang cmake -S {REPO} -B {args.build} -DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF "
                 f"&& cmake --build {args.build} --target fuzz_subject")
    d = findings_dir_for(args.findings_root, subject)
    corpora = [d / "corpus"] + ([] if args.no_seed_corpus else [SEED_CORPUS])
    cmd = [fuzzer.resolve(), f"-max_total_time={args.seconds}", f"-artifact_prefix={d}/",
           "-print_final_stats=1", *option_flags(args, target_options(TARGETS["fuzz_subject"])),
           f"-seed={args.seed}", *corpora]
    log_path = d / "fuzzer.log"
    t0, wall0 = time.monotonic(), time.time()
    with open(log_path, "w") as log:
        proc = echo_run(cmd, {"LCE_FUZZ_SUBJECT": subject, "LCE_FUZZ_FINDINGS": str(d)},
                        stdout=log, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - t0
    log_text = log_path.read_text(errors="replace")
    artifacts = sorted(str(p) for p in d.iterdir() if p.name.startswith(ARTIFACT_PREFIXES))
    cases = finding_cases(d)
    found = bool(artifacts or cases)
    # libFuzzer prints its seed line only after LLVMFuzzerInitialize returned: without it the harness
    # never started (unknown subject, missing golden), which is an error, not a finding.
    started = "INFO: Seed:" in log_text
    error, skipped = start_error(proc.returncode, log_text, log_path, subject, args.build) if not started else (None, False)
    execs = re.search(r"stat::number_of_executed_units:\s*(\d+)", log_text)
    # The harness writes the .finding file the moment it sees the violation: its time stamp, not the
    # process exit (crash dump, final stats), is when the campaign found it.
    to_finding = min(max(cases[0]["mtime"] - wall0, 0.0), elapsed) if cases else elapsed
    return {
        "subject": subject,
        "found": found and started,
        "error": error,
        "skipped": skipped,
        "seconds_to_finding": round(to_finding, 2) if found and started else None,
        "seconds_run": round(elapsed, 2),
        "executions": int(execs.group(1)) if execs else None,
        "exit_code": proc.returncode,
        "finding": finding_line(cases[0]) if cases else ("crash without a .finding file" if artifacts else None),
        "finding_case": cases[0]["case"] if cases else None,
        "findings": cases,
        "artifacts": artifacts,
        "findings_dir": str(d),
        "log": str(log_path),
    }


def print_run(r):
    print(f"subject        {r['subject']}")
    if r["error"]:
        print(f"error          {r['error']}")
        return
    print(f"found          {'yes' if r['found'] else 'no'}")
    if r["found"]:
        print(f"seconds        {r['seconds_to_finding']}")
    print(f"executions     {r['executions']}  in {r['seconds_run']} s")
    for c in r["findings"]:
        print(f"finding        {c['case']}: {finding_line(c)}")
    for a in r["artifacts"]:
        print(f"artifact       {a}")
    print(f"log            {r['log']}")


def cmd_run(args):
    if args.target:
        return cmd_run_targets(args)
    r = campaign(args, args.subject)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print_run(r)
    if r["error"]:
        print(f"fuzz_campaign: {r['subject']}: {r['error']}", file=sys.stderr)
        return 77 if r["skipped"] else 2
    return 1 if r["found"] else 0


def list_mutants(lcecheck):
    proc = echo_run([lcecheck, "list", "--json"], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"fuzz_campaign: `{lcecheck} list --json` failed ({proc.returncode}): {proc.stderr.strip()}")
    subjects = json.loads(proc.stdout)["subjects"]
    return [s["name"] for s in subjects if s["name"].startswith("mutant/")]


def verdict_of(r):
    if r["ok"]:
        return "ok"
    if r["error"]:
        return r["error"]
    return "FOUND (must not be)" if r["found"] else "NOT FOUND"


def print_table(rows):
    """One line per subject, and under a finding its case id and what failed."""
    width = max(len("subject"), *(len(r["subject"]) for r in rows))
    print(f"\n{'subject':<{width}}  {'found':<5} {'seconds':>7} {'execs':>7}  verdict")
    for r in rows:
        secs = f"{r['seconds_to_finding']:.1f}" if r["found"] else "-"
        execs = r["executions"] if r["executions"] is not None else "-"
        print(f"{r['subject']:<{width}}  {'yes' if r['found'] else 'no':<5} {secs:>7} {execs:>7}  {verdict_of(r)}")
        if r["finding_case"]:
            print(f"    {r['finding_case']}")
        if r["finding"]:
            print(f"    {r['finding']}")


def md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows):
    lines = ["| subject | found | s to finding | execs | verdict | first finding: case | output / metric |",
             "|---|---|---:|---:|---|---|---|"]
    for r in rows:
        secs = f"{r['seconds_to_finding']:.1f}" if r["found"] else "-"
        execs = r["executions"] if r["executions"] is not None else "-"
        case = f"`{r['finding_case']}`" if r["finding_case"] else ""
        lines.append(f"| {r['subject']} | {'yes' if r['found'] else 'no'} | {secs} | {execs} | "
                     f"{md_cell(verdict_of(r))} | {case} | {md_cell(r['finding'] or '')} |")
    return "\n".join(lines)


def head_commit(repo):
    """The checked-out commit, read from .git without running git (this script never changes or
    even queries git state through the git binary); "unknown" when it cannot be read."""
    git = repo / ".git"
    try:
        if git.is_file():  # a worktree or submodule: "gitdir: <path>"
            git = (repo / git.read_text().split(":", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()[:12]
        common = git / "commondir"
        roots = [git] + ([(git / common.read_text().strip()).resolve()] if common.is_file() else [])
        for root in roots:
            if (root / ref).is_file():
                return (root / ref).read_text().strip()[:12]
            packed = root / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0][:12]
    except (OSError, IndexError):
        pass
    return "unknown"


def build_description(build):
    """Compiler and build type of the fuzzer's build tree, from its CMakeCache.txt."""
    cache = Path(build) / "CMakeCache.txt"
    found = {}
    if cache.is_file():
        for line in cache.read_text(errors="replace").splitlines():
            m = re.match(r"(CMAKE_C_COMPILER|CMAKE_BUILD_TYPE):\w+=(.*)$", line)
            if m:
                found[m.group(1)] = m.group(2)
    compiler = Path(found["CMAKE_C_COMPILER"]).name if found.get("CMAKE_C_COMPILER") else "?"
    return f"{compiler} {found.get('CMAKE_BUILD_TYPE') or '?'}, libFuzzer + ASan/UBSan"


def record(path, args, rows, when):
    """Appends one dated section (date, commit, command, table) to the campaigns log."""
    command = "python3 scripts/fuzz_campaign.py " + shlex.join(sys.argv[1:])
    killed = sum(1 for r in rows if r["subject"] != "fused-host" and r["found"])
    mutants = sum(1 for r in rows if r["subject"] != "fused-host")
    host = next((r for r in rows if r["subject"] == "fused-host"), None)
    host_line = ("fused-host: no finding" if host and host["ok"] else
                 f"fused-host: {verdict_of(host)}" if host else "fused-host: not run")
    corpus = "none" if args.no_seed_corpus else SEED_CORPUS.relative_to(REPO)
    section = (f"\n## {when:%Y-%m-%d %H:%M} UTC — kill table (commit {head_commit(REPO)}, "
               f"working tree as it was then)\n\n"
               f"    {command}\n\n"
               f"{killed} of {mutants} mutants found within {args.seconds} s each; {host_line}; "
               f"libFuzzer -seed={args.seed}, seed corpus {corpus}; build {build_description(args.build)}.\n\n"
               f"{markdown_table(rows)}\n")
    with open(path, "a", encoding="utf-8") as f:
        f.write(section)
    print(f"fuzz_campaign: recorded in {path}", file=sys.stderr)


def cmd_kill_table(args):
    mutants = list_mutants(args.lcecheck)
    if not mutants:
        sys.exit("fuzz_campaign: lcecheck lists no mutant/* subject (built with LCE_BUILD_MUTANTS=OFF?)")
    when = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    for subject in ["fused-host"] + mutants:
        r = campaign(args, subject)
        r["expected_found"] = subject != "fused-host"
        r["ok"] = r["error"] is None and r["found"] == r["expected_found"]
        rows.append(r)
    if args.json:
        print(json.dumps({"seconds": args.seconds, "rows": rows}, indent=2))
    else:
        print_table(rows)
    if args.record:
        record(args.record, args, rows, when)
    return 0 if all(r["ok"] for r in rows) else 1


# The fuzz targets: binary name → (its .options file, its seed corpus). fuzz_subject fuzzes the
# subject named by --subject (LCE_FUZZ_SUBJECT); fuzz_tiers the oracle tiers against each other; the
# parser targets are every fuzz/parsers/fuzz_parse_<name>.options, with the corpus fuzz/corpus/parse_<name>.
TARGETS = {
    "fuzz_subject": (FUZZ_DIR / "fuzz_subject.options", FUZZ_DIR / "corpus" / "subject"),
    "fuzz_tiers": (FUZZ_DIR / "fuzz_tiers.options", FUZZ_DIR / "corpus" / "subject"),
    **{opt.stem: (opt, FUZZ_DIR / "corpus" / ("parse_" + opt.stem[len("fuzz_parse_"):]))
       for opt in sorted((FUZZ_DIR / "parsers").glob("fuzz_parse_*.options"))},
}
OPTION_KEYS = ("max_len", "dict", "timeout", "rss_limit_mb")


def target_options(entry):
    """A target's .options file ([libfuzzer] key = value) → {key: value}; dict becomes an absolute path."""
    path = entry[0]
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
    """The harness's environment: subject and findings directory (fuzz_subject, fuzz_tiers)."""
    env = {"LCE_FUZZ_FINDINGS": str(d)} if target in ("fuzz_subject", "fuzz_tiers") else {}
    if target == "fuzz_subject":
        env["LCE_FUZZ_SUBJECT"] = args.subject
    return env


def cmd_targets(args):
    rows = []
    for name, entry in TARGETS.items():
        binary = Path(args.build) / name
        rows.append({"target": name, "built": binary.is_file(), "options": str(entry[0].relative_to(REPO)),
                     "seed_corpus": str(entry[1].relative_to(REPO)),
                     "seeds": sum(1 for f in entry[1].iterdir() if f.is_file()) if entry[1].is_dir() else 0,
                     "libfuzzer": target_options(entry)})
    if args.json:
        print(json.dumps({"build": str(args.build), "targets": rows}, indent=2))
        return 0
    width = max(len(r["target"]) for r in rows)
    cwidth = max(len(r["seed_corpus"]) for r in rows)
    print(f"{'target':<{width}}  built  seeds  {'seed corpus':<{cwidth}}  options")
    for r in rows:
        flags = " ".join(f"{k}={Path(v).name if k == 'dict' else v}" for k, v in r["libfuzzer"].items())
        print(f"{r['target']:<{width}}  {'yes' if r['built'] else 'no':<5}  {r['seeds']:>5}  "
              f"{r['seed_corpus']:<{cwidth}}  {flags}")
    return 0


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


def merge_corpus(args, target, fuzzer, env, opts, d, seeds):
    """-merge=1 of the working corpus and the seeds into a fresh directory (the minimized corpus), or,
    with --update-seeds, of the working corpus into the seed corpus itself (only new coverage is added)."""
    out = seeds if args.update_seeds else d / "merged"
    out.mkdir(exist_ok=True)
    inputs = [d / "corpus"] + ([] if args.update_seeds else [seeds])
    before = sum(1 for _ in out.iterdir())
    with open(d / "merge.log", "w") as log:
        proc = echo_run([fuzzer, "-merge=1", f"-artifact_prefix={d}/merge-", *option_flags(args, opts),
                         out, *inputs], env, stdout=log, stderr=subprocess.STDOUT, cwd=d)
    files = [f for f in out.iterdir() if f.is_file()]
    return {"dir": str(out), "exit_code": proc.returncode, "files": len(files),
            "added": len(files) - before, "bytes": sum(f.stat().st_size for f in files),
            "log": str(d / "merge.log")}


def triage(args, target, d, fuzzer):
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
        env.pop("LCE_FUZZ_FINDINGS", None)
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        repro = (prefix + " " if prefix else "") + shlex.join([str(fuzzer), str(reg)])
        # The harness writes its .finding for the input that failed: the one whose .input matches.
        case = next((c for c in cases if Path(c["file"]).with_suffix(".input").is_file()
                     and Path(c["file"]).with_suffix(".input").read_bytes() == data), None)
        if case is None and len(cases) == 1:
            case = cases[0]
        out.append({"kind": kind, "artifact": str(a), "regression": str(reg), "repro": repro,
                    "case": case["case"] if case else None, "what": finding_line(case) if case else None})
    return out


def target_campaign(args, target):
    """One target for args.seconds over args.jobs cores: progress while it runs, then merge and triage."""
    entry = TARGETS[target]
    fuzzer = (Path(args.build) / target).resolve()
    if not fuzzer.is_file():
        sys.exit(f"fuzz_campaign: {fuzzer} not found; build it with CC=clang cmake -S {REPO} -B {args.build} "
                 f"-DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF && cmake --build {args.build} --target {target}")
    name = target + (f"_{args.subject}" if target == "fuzz_subject" else "")
    d = findings_dir_for(args.findings_root, name)
    opts = target_options(entry)
    env = target_env(target, args, d)
    seeds = Path(args.seed_root).resolve() / entry[1].name if args.seed_root else entry[1]
    parallel = f"-fork={args.jobs}" if args.parallel == "fork" else f"-jobs={args.jobs}"
    cmd = [fuzzer, f"-max_total_time={args.seconds}", f"-artifact_prefix={d}/", "-print_final_stats=1",
           *option_flags(args, opts), f"-seed={args.seed}", parallel,
           *([f"-workers={args.jobs}"] if args.parallel == "jobs" else
             ["-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1"]),
           d / "corpus", *([seeds] if seeds.is_dir() else [])]
    log_path = d / "fuzzer.log"
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        print("+", (prefix + " " if prefix else "") + shlex.join(str(c) for c in cmd), file=sys.stderr, flush=True)
        proc = subprocess.Popen([str(c) for c in cmd], env=dict(os.environ, **env), stdout=log,
                                stderr=subprocess.STDOUT, cwd=d)
        # With -jobs, libFuzzer runs until all jobs end; each job stops at max_total_time, so the
        # deadline below only guards against a fuzzer that ignores it.
        while proc.poll() is None:
            try:
                proc.wait(timeout=args.progress)
            except subprocess.TimeoutExpired:
                print(progress_line(target, args.seconds, t0, d), file=sys.stderr, flush=True)
                if time.monotonic() - t0 > args.seconds + max(60, args.seconds):
                    proc.kill()
    elapsed = time.monotonic() - t0
    log_text = log_path.read_text(errors="replace")
    started = "INFO: Seed:" in log_text or any(d.glob("fuzz-*.log"))
    p = progress_of(d)
    r = {"target": target, "subject": args.subject if target == "fuzz_subject" else None,
         "seconds_run": round(elapsed, 2), "exit_code": proc.returncode, "findings_dir": str(d),
         "log": str(log_path), "error": None, "skipped": False, **p,
         "exec_per_s": round(p["executions"] / elapsed) if elapsed > 0 else 0,
         "command": shlex.join(str(c) for c in cmd), "merge": None, "findings": []}
    if not started:
        r["error"], r["skipped"] = start_error(proc.returncode, log_text, log_path, r["subject"], args.build)
        print(f"fuzz_campaign: {target}: {r['error']}", file=sys.stderr)
        return r
    print(progress_line(target, args.seconds, t0, d), file=sys.stderr, flush=True)
    r["findings"] = triage(args, target, d, fuzzer)
    r["merge"] = merge_corpus(args, target, fuzzer, env, opts, d, seeds)
    return r


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


def record_targets(path, args, rows, when):
    """Appends one dated section (date, commit, command, per-target table, findings) to FILE."""
    command = "python3 scripts/fuzz_campaign.py " + shlex.join(sys.argv[1:])
    total = sum(r["executions"] for r in rows if not r["error"])
    found = sum(len(r["findings"]) for r in rows)
    lines = [f"\n## {when:%Y-%m-%d %H:%M} UTC — targets campaign (commit {head_commit(REPO)}, "
             f"working tree as it was then)\n", f"    {command}\n",
             f"{len(rows)} target(s), {args.seconds} s each over {args.jobs} core(s) ({args.parallel}), "
             f"{total} executions, {found} finding(s); libFuzzer -seed={args.seed}; "
             f"build {build_description(args.build)}.\n",
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
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"fuzz_campaign: recorded in {path}", file=sys.stderr)


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
    rows = [target_campaign(args, n) for n in names]
    if args.json:
        print(json.dumps({"seconds": args.seconds, "jobs": args.jobs, "rows": rows}, indent=2))
    else:
        print(targets_table(rows))
    if args.record:
        record_targets(args.record, args, rows, when)
    if any(r["error"] and not r["skipped"] for r in rows):
        return 2
    if any(r["findings"] for r in rows):
        return 1
    return 77 if all(r["skipped"] for r in rows) else 0


# What a GPU machine may lack, copied beside the fuzzer: MPFR and GMP (the device image has neither)
# into lib/, always on its library path; the C++ runtime into lib-fallback/, used there only when
# the machine's own is older than the one this build linked against (scripts/gpu_fuzz.sh decides).
BUNDLE_LIBS = ("libmpfr.so", "libgmp.so")
BUNDLE_FALLBACK_LIBS = ("libstdc++.so", "libgcc_s.so")


def ldd_paths(binary):
    """{soname: resolved path} of binary's shared libraries, from ldd."""
    proc = echo_run(["ldd", binary], capture_output=True, text=True, check=True)
    found = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found, proc.stdout


def cmd_bundle_gpu(args):
    """Configures and builds fuzz_subject with fused-cuda, then copies it and its libraries to
    args.out; checks here that the binary knows fused-cuda (exit 77 without a GPU, not "unknown subject")."""
    build, out = Path(args.build).resolve(), Path(args.out).resolve()
    env = {"CC": "clang"}
    echo_run(["cmake", "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DLCE_BUILD_FUZZERS=ON",
              "-DLCE_FUZZ_WITH_CUDA=ON", "-DLCE_BUILD_TESTS=OFF", "-DCMAKE_CUDA_HOST_COMPILER=g++",
              "-DCMAKE_CUDA_ARCHITECTURES=90"], env, check=True)
    cache = (build / "CMakeCache.txt").read_text(errors="replace")
    if not re.search(r"^CMAKE_CUDA_COMPILER:\w+=.*nvcc", cache, re.M):
        sys.exit("fuzz_campaign: the build found no CUDA compiler (nvcc): fused-cuda would be missing")
    echo_run(["cmake", "--build", build, "-j", str(args.jobs), "--target", "fuzz_subject"], check=True)
    fuzzer = build / "fuzz_subject"
    probe = echo_run([fuzzer, "-runs=0"], {"LCE_FUZZ_SUBJECT": "fused-cuda", "LCE_FUZZ_FINDINGS": str(build / "probe"),
                                           "LCE_GOLDEN_DIR": str(REPO / "golden")},
                     capture_output=True, text=True)
    if probe.returncode not in (0, 77) or "unknown subject" in probe.stderr:
        sys.exit(f"fuzz_campaign: {fuzzer} does not run fused-cuda (exit {probe.returncode}):\n{probe.stderr[-2000:]}")
    shutil.rmtree(out, ignore_errors=True)
    (out / "lib").mkdir(parents=True)
    (out / "lib-fallback").mkdir()
    shutil.copy2(fuzzer, out / "fuzz_subject")
    libs, ldd_text = ldd_paths(fuzzer)
    copied = []
    for soname, path in sorted(libs.items()):
        for prefixes, sub in ((BUNDLE_LIBS, "lib"), (BUNDLE_FALLBACK_LIBS, "lib-fallback")):
            if soname.startswith(prefixes):
                shutil.copy2(path, out / sub / soname)  # copy2 follows the symlink: the real file, named as loaded
                copied.append(f"{sub}/{soname}")
    missing = [p for p in BUNDLE_LIBS if not any(c.startswith("lib/" + p) for c in copied)]
    if missing:
        sys.exit(f"fuzz_campaign: ldd of {fuzzer} lists no {', '.join(missing)}")
    (out / "BUILD_INFO").write_text(
        f"fuzz_subject with fused-cuda, built {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"at commit {head_commit(REPO)} (working tree as it was then)\n"
        f"build: {build_description(build)}; CUDA objects nvcc sm_90, host compiler g++, no sanitizers\n"
        f"command: python3 scripts/fuzz_campaign.py {shlex.join(sys.argv[1:])}\n"
        f"copied: {' '.join(copied)}\n\nldd here:\n{ldd_text}")
    print(f"fuzz_campaign: {out} holds fuzz_subject and {' '.join(copied)}; here it exits "
          f"{probe.returncode} for fused-cuda ({'no GPU: skipped' if probe.returncode == 77 else 'GPU present'})")
    rel = "/" + out.relative_to(REPO).as_posix() + "/" if out.is_relative_to(REPO) else None
    if rel and echo_run(["git", "-C", REPO, "check-ignore", "-q", rel.strip("/")]).returncode != 0:
        print(f"fuzz_campaign: note: git does not ignore {rel}; ignore it (.gitignore or .git/info/exclude) so that "
              f"the device tool carries it (carry [\"{rel.strip('/')}\"]) instead of copying it as untracked files",
              file=sys.stderr)
    return 0


def positive(kind):
    """An argparse type: a number > 0 (argparse names the option in its usage error, exit 2)."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number")
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value
    return parse


def non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def main():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--build", default=str(REPO / "build-fuzz"), help="clang build dir holding the fuzz targets")
    common.add_argument("--lcecheck", default=str(REPO / "build" / "lcecheck"), help="lcecheck CLI (list --json)")
    common.add_argument("--findings-root", default="fuzz-findings", help="campaign directories go under it")
    common.add_argument("--no-seed-corpus", action="store_true",
                        help="start from an empty corpus (measures discovery, not replay of the seeds)")
    common.add_argument("--unit-timeout", type=positive(int), default=None,
                        help="libFuzzer -timeout per input, seconds (default: the target's .options)")
    common.add_argument("--max-len", type=positive(int), default=None,
                        help="libFuzzer -max_len (default: the target's .options)")
    common.add_argument("--seed", type=non_negative_int, default=1,
                        help="libFuzzer -seed (fixed: campaigns are reproducible; 0 lets libFuzzer choose)")
    common.add_argument("--json", action="store_true", help="print the result as JSON")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", parents=[common], help="one time-boxed campaign (a subject, or --target T|all)")
    r.add_argument("--subject", default="fused-host", help="fuzz_subject's subject (LCE_FUZZ_SUBJECT)")
    r.add_argument("--seconds", type=positive(int), required=True, help="per target, libFuzzer -max_total_time")
    r.add_argument("--target", help=f"all, or one or more (comma separated) of {', '.join(TARGETS)}: "
                                    "each with its .options, seed corpus, "
                                    "every core, progress, merge and triage")
    r.add_argument("--jobs", type=positive(int), default=os.cpu_count() or 1,
                   help="with --target: parallel fuzzing processes (default: nproc)")
    r.add_argument("--parallel", choices=("fork", "jobs"), default="fork",
                   help="with --target: libFuzzer -fork=N (default) or -jobs=N -workers=N")
    r.add_argument("--progress", type=positive(float), default=10.0,
                   help="with --target: seconds between progress lines")
    r.add_argument("--update-seeds", action="store_true",
                   help="with --target: merge the new coverage into the committed seed corpus")
    r.add_argument("--seed-root", metavar="DIR",
                   help="with --target: seed corpora are DIR/<corpus name> instead of fuzz/corpus/<corpus name>")
    r.add_argument("--regressions", metavar="DIR",
                   help="with --target: regression inputs go to DIR/<target>/ (default <findings-root>/regressions)")
    r.add_argument("--record", metavar="FILE", help="with --target: append the dated table to FILE")
    r.set_defaults(func=cmd_run)
    t = sub.add_parser("targets", help="the fuzz targets, their .options and seed corpora")
    t.add_argument("--build", default=str(REPO / "build-fuzz"), help="clang build dir holding the fuzz targets")
    t.add_argument("--json", action="store_true", help="print the list as JSON")
    t.set_defaults(func=cmd_targets)
    k = sub.add_parser("kill-table", parents=[common], help="fused-host and every mutant, one campaign each")
    k.add_argument("--seconds", type=positive(int), default=60, help="at most this long per subject")
    k.add_argument("--record", metavar="FILE", help="append the dated table to FILE (fuzz/CAMPAIGNS.md)")
    k.set_defaults(func=cmd_kill_table)
    b = sub.add_parser("bundle-gpu", help="libFuzzer build with fused-cuda, bundled for a GPU machine")
    b.add_argument("--build", default=str(REPO / "build-gpufuzz"), help="build dir (clang + nvcc)")
    b.add_argument("--out", default=str(REPO / ".gpufuzz"), help="bundle folder (git-ignored; the device tool carries it)")
    b.add_argument("--jobs", type=positive(int), default=2, help="parallel build jobs")
    b.set_defaults(func=cmd_bundle_gpu)
    args = p.parse_args()
    if getattr(args, "target", None) is None and getattr(args, "command", "") == "run":
        for opt in ("update_seeds", "regressions", "record"):
            if getattr(args, opt):
                p.error(f"--{opt.replace('_', '-')} needs --target")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
