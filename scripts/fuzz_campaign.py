#!/usr/bin/env python3
"""fuzz_campaign.py — time-boxed libFuzzer campaigns over the FLCE subjects (glue only).

  run --subject S --seconds T [--json]     one campaign: was a violation found, and how fast
  kill-table --seconds T [--json]          fused-host and every mutant/* subject of `lcecheck list`;
                                           fused-host must not be found, every mutant must be

The fuzzer is fuzz_fused_host from a clang build configured with
  CC=clang cmake -S . -B build-fuzz -DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF
The harness decides what a violation is (golden bounds, class checks, determinism); this script
only starts it, collects the artifacts and reports. Every command it runs is printed first.

Each campaign gets its own findings directory (<findings-root>/<subject>/<UTC time>) holding the
libFuzzer log, its crash-* artifacts, the harness's <case id>.finding/.input files and the working
corpus (new inputs never go into the committed seed corpus).
"""
import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEED_CORPUS = REPO / "fuzz" / "corpus" / "fused_host"
ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def echo_run(cmd, env_extra=None, **kwargs):
    """Prints the command (with its environment additions) and runs it."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env_extra or {}).items())
    print("+", (prefix + " " if prefix else "") + shlex.join(str(c) for c in cmd), file=sys.stderr, flush=True)
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([str(c) for c in cmd], env=env, **kwargs)


def findings_dir_for(root, subject):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    d = Path(root) / subject.replace("/", "_") / stamp
    (d / "corpus").mkdir(parents=True, exist_ok=False)
    return d


def finding_cases(d):
    """Case ids and violation kinds from the harness's .finding files."""
    cases = []
    for f in sorted(d.glob("*.finding")):
        text = f.read_text(errors="replace")
        case = re.search(r"^case: (.*)$", text, re.M)
        kind = re.search(r"^lce-fuzz violation: (.*)$", text, re.M)
        summary = re.search(r"^summary: (.*)$", text, re.M)
        cases.append({"case": case.group(1) if case else f.stem,
                      "kind": kind.group(1) if kind else "?",
                      "summary": summary.group(1) if summary else "",
                      "file": str(f)})
    return cases


def campaign(args, subject):
    """Runs the fuzzer for one subject; returns a result dict."""
    fuzzer = Path(args.build) / "fuzz_fused_host"
    if not fuzzer.is_file():
        sys.exit(f"fuzz_campaign: {fuzzer} not found; build it with "
                 f"CC=clang cmake -S {REPO} -B {args.build} -DLCE_BUILD_FUZZERS=ON -DLCE_BUILD_TESTS=OFF "
                 f"&& cmake --build {args.build} --target fuzz_fused_host")
    d = findings_dir_for(args.findings_root, subject)
    corpora = [d / "corpus"] + ([] if args.no_seed_corpus else [SEED_CORPUS])
    cmd = [fuzzer.resolve(), f"-max_total_time={args.seconds}", f"-artifact_prefix={d}/",
           "-print_final_stats=1", f"-timeout={args.unit_timeout}", "-rss_limit_mb=4096",
           f"-max_len={args.max_len}", f"-seed={args.seed}", *corpora]
    log_path = d / "fuzzer.log"
    t0 = time.monotonic()
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
    execs = re.search(r"stat::number_of_executed_units:\s*(\d+)", log_text)
    return {
        "subject": subject,
        "found": found and started,
        "error": None if started else f"fuzzer did not start (exit {proc.returncode}); see {log_path}",
        "seconds_to_finding": round(elapsed, 2) if found and started else None,
        "seconds_run": round(elapsed, 2),
        "executions": int(execs.group(1)) if execs else None,
        "exit_code": proc.returncode,
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
        print(f"finding        {c['kind']}: {c['case']}  ({c['summary']})")
    for a in r["artifacts"]:
        print(f"artifact       {a}")
    print(f"log            {r['log']}")


def cmd_run(args):
    r = campaign(args, args.subject)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print_run(r)
    if r["error"]:
        return 2
    return 1 if r["found"] else 0


def list_mutants(lcecheck):
    proc = echo_run([lcecheck, "list", "--json"], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"fuzz_campaign: `{lcecheck} list --json` failed ({proc.returncode}): {proc.stderr.strip()}")
    subjects = json.loads(proc.stdout)["subjects"]
    return [s["name"] for s in subjects if s["name"].startswith("mutant/")]


def cmd_kill_table(args):
    mutants = list_mutants(args.lcecheck)
    if not mutants:
        sys.exit("fuzz_campaign: lcecheck lists no mutant/* subject (built with LCE_BUILD_MUTANTS=OFF?)")
    rows = []
    for subject in ["fused-host"] + mutants:
        r = campaign(args, subject)
        r["expected_found"] = subject != "fused-host"
        r["ok"] = r["error"] is None and r["found"] == r["expected_found"]
        rows.append(r)
    if args.json:
        print(json.dumps({"seconds": args.seconds, "rows": rows}, indent=2))
    else:
        print(f"\n{'subject':<36} {'found':<6} {'seconds':>8} {'execs':>7}  verdict")
        for r in rows:
            secs = f"{r['seconds_to_finding']:.1f}" if r["found"] else "-"
            verdict = "ok" if r["ok"] else (r["error"] or ("FOUND (must not be)" if r["found"] else "NOT FOUND"))
            print(f"{r['subject']:<36} {'yes' if r['found'] else 'no':<6} {secs:>8} "
                  f"{r['executions'] if r['executions'] is not None else '-':>7}  {verdict}")
    return 0 if all(r["ok"] for r in rows) else 1


def main():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--build", default=str(REPO / "build-fuzz"), help="clang build dir holding fuzz_fused_host")
    common.add_argument("--lcecheck", default=str(REPO / "build" / "lcecheck"), help="lcecheck CLI (list --json)")
    common.add_argument("--findings-root", default="fuzz-findings", help="campaign directories go under it")
    common.add_argument("--no-seed-corpus", action="store_true",
                        help="start from an empty corpus (measures discovery, not replay of the seeds)")
    common.add_argument("--unit-timeout", type=int, default=60, help="libFuzzer -timeout per input, seconds")
    common.add_argument("--max-len", type=int, default=256, help="libFuzzer -max_len")
    common.add_argument("--seed", type=int, default=1, help="libFuzzer -seed (fixed: campaigns are reproducible)")
    common.add_argument("--json", action="store_true", help="print the result as JSON")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", parents=[common], help="one time-boxed campaign")
    r.add_argument("--subject", default="fused-host")
    r.add_argument("--seconds", type=int, required=True)
    r.set_defaults(func=cmd_run)
    k = sub.add_parser("kill-table", parents=[common], help="fused-host and every mutant, one campaign each")
    k.add_argument("--seconds", type=int, default=60)
    k.set_defaults(func=cmd_kill_table)
    args = p.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
