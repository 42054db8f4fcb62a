#!/usr/bin/env python3
"""fuzz_campaign.py — time-boxed libFuzzer campaigns over the FLCE subjects (glue only).

  run --subject S --seconds T [--json]     one campaign: was a violation found, and how fast
  targets                                  the fuzz targets, their .options and seed corpora
  run --target T[,T...]|all --seconds T [--jobs N] [--parallel fork|jobs] [--update-seeds]
      [--regressions DIR] [--record FILE] [--deadline S] [--out DIR] [--json]
                                           T seconds per target over N cores (default: all), with
                                           progress lines while it runs; then the working corpus is
                                           merged and minimized (-merge=1) into a fresh directory
                                           (into the seed corpus only with --update-seeds), every
                                           finding is copied into DIR as a regression input with a
                                           one-line repro, and a table per target is printed
                                           (executions, exec/s, coverage, corpus, findings);
                                           --record appends it, dated, to FILE; --deadline S ends
                                           the whole command within S seconds (fewer seconds per
                                           target where needed, then killed); --out DIR gets
                                           report.md, report.json and fuzz-results.tar.gz
  bundle-gpu [--build DIR] [--out DIR]   the libFuzzer build WITH fused-cuda (clang + nvcc), copied with
                                           the shared libraries a GPU machine may lack into an ignored
                                           folder (default .gpufuzz/) that scripts/gpu_fuzz.sh runs there
  bundle [--out DIR] [--python-version X.Y] [--release-only]
                                           the CPU targets built twice (bin-asan: ASan + UBSan;
                                           bin-release: fuzz_subject and fuzz_tiers without sanitizers),
                                           MPFR/GMP static, with this script, options, dictionaries,
                                           seed corpora, goldens and atheris, into an ignored folder
                                           (default .fuzzbundle/) that runs where there is no clang:
                                           cd .fuzzbundle && python3 scripts/fuzz_campaign.py run ...;
                                           --release-only: bin-release alone (no sanitizers, no
                                           atheris), for campaigns on a GPU machine's host CPUs
  kill-table [--seconds T] [--json] [--record FILE]
                                           fused-host and every mutant/* subject of `lcecheck list`,
                                           one campaign each (T seconds at most, default 60);
                                           fused-host must not be found, every mutant must be;
                                           --record appends the table, dated, with the commit and
                                           the command, to FILE (fuzz/CAMPAIGNS.md)

The fuzzers come from a clang build configured with
  CC=clang cmake -S . -B build-fuzz -DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF
or from any directory of prebuilt targets (--build: a bundle's bin-asan, ClusterFuzzLite's $OUT). A
Python target (fuzz/parsers/fuzz_parse_<name>.py, atheris) runs as <build>/<target> where that exists
(a frozen or wrapped build), else as its harness under this interpreter.
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
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from fuzz_bundle import cmd_bundle, cmd_bundle_gpu
from fuzz_common import (REPO, SEED_CORPUS, build_description, echo_run, findings_dir_for, finding_cases, finding_line,
                         invocation, md_cell, source_commit, start_error, ARTIFACT_PREFIXES)
from fuzz_targets import TARGETS, cmd_run_targets, cmd_targets, option_flags, target_options


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




def record(path, args, rows, when):
    """Appends one dated section (date, commit, command, table) to the campaigns log."""
    command = invocation()
    killed = sum(1 for r in rows if r["subject"] != "fused-host" and r["found"])
    mutants = sum(1 for r in rows if r["subject"] != "fused-host")
    host = next((r for r in rows if r["subject"] == "fused-host"), None)
    host_line = ("fused-host: no finding" if host and host["ok"] else
                 f"fused-host: {verdict_of(host)}" if host else "fused-host: not run")
    corpus = "none" if args.no_seed_corpus else SEED_CORPUS.relative_to(REPO)
    section = (f"\n## {when:%Y-%m-%d %H:%M} UTC — kill table (commit {source_commit()}, "
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
    common.add_argument("--findings-root", help="campaign directories go under it (default fuzz-findings, "
                                                "or <out>/campaigns with --out)")
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
    r.add_argument("--deadline", type=positive(int), metavar="SECONDS",
                   help="with --target: a hard wall-clock limit for the whole command: targets get less than "
                        "--seconds where the rest would not fit, and whatever still runs then is killed")
    r.add_argument("--out", metavar="DIR",
                   help="with --target: report.md, report.json and fuzz-results.tar.gz (reports, regression "
                        "inputs, findings, merged corpora) in DIR; campaigns under DIR/campaigns")
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
    c = sub.add_parser("bundle", help="the CPU targets, prebuilt, with what a machine without clang needs to run them")
    c.add_argument("--out", default=str(REPO / ".fuzzbundle"), help="bundle folder (git-ignored)")
    c.add_argument("--build-root", default=str(REPO), help="build-bundle-asan/ and build-bundle-release/ go here")
    c.add_argument("--jobs", type=positive(int), default=2, help="parallel build jobs")
    c.add_argument("--release-only", action="store_true",
                   help="bin-release alone (fuzz_subject, fuzz_tiers without sanitizers, no atheris): throughput "
                        "campaigns on another machine's CPUs, a quarter of the size")
    c.add_argument("--python-version", action="append", metavar="X.Y",
                   help="also bundle atheris for this CPython (pip download; repeatable; default 3.12, the GPU "
                        "machines' python3); this interpreter's own is always bundled")
    c.set_defaults(func=cmd_bundle)
    args = p.parse_args()
    if getattr(args, "command", "") == "run":
        if args.target is None:
            for opt in ("update_seeds", "regressions", "record", "deadline", "out"):
                if getattr(args, opt):
                    p.error(f"--{opt.replace('_', '-')} needs --target")
    if hasattr(args, "findings_root"):
        out = getattr(args, "out", None) if args.command == "run" else None
        args.findings_root = args.findings_root or (str(Path(out) / "campaigns") if out else "fuzz-findings")
        if out:
            args.regressions = args.regressions or str(Path(out) / "regressions")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
