#!/usr/bin/env python3
"""lcecheck_converge_golden.py — fit and reproduce the bounds of `lcecheck converge` (golden/converge.bounds,
golden/<arch>/converge.bounds; format in conformance/engine/lce_converge_golden.h).

Glue only (STYLE.md rule 12): the runs come from `lcecheck converge --json`, the margins from the command
line that the file records as its generator. Every command it runs is printed on stderr with a leading
'+', and each run's progress lines follow it.

  regen --subject S --seeds 1,2 --margin gap=4 --margin drift=2 ... [--check-seeds 3] [--must-fail M,...]
        [--shape NxHxV --vocab-chunk C --steps T --every E --lr LR --oracle O --embeddings E]
        [--out golden/converge.bounds] [--build build] [--write] [--allow-loosen REASON] [--save-runs DIR] [--json]
      runs S once per fit seed with --measure-only, and proposes per (embeddings, metric) its margin
      times the largest value over the fit seeds, rounded up to five significant digits. It refuses
      (exit 1) a candidate under which S fails a check seed (out of sample), under which a --must-fail
      subject passes (at the first check seed), a missing margin, and a bound looser than the file it
      replaces (same configuration) without --allow-loosen. Without --write it shows the candidate;
      --save-runs DIR keeps every run's JSON there (scripts/plot_errors.py draws them).
  reproduce [--build build] [FILE...]
      reruns each file's recorded generator and compares its configuration and bounds exactly (exit 1
      on a difference, 77 when a run is skipped: no GPU for a GPU subject or the fp64-gpu oracle).
"""
import argparse
import datetime
import json
import math
import os
import shlex
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lcecheck_golden_files import Refusal, ToolError, read_text, write_atomically  # noqa: E402
from lcecheck_golden_provenance import git_commit, repo_relative  # noqa: E402
from lcecheck_run import log, run_command, run_verb  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = "scripts/lcecheck_converge_golden.py"
METRICS = ("gap", "drift", "relerr", "relerr_hidden", "relerr_head")
DEFAULT_OUT = "golden/converge.bounds"
# Options passed through to `lcecheck converge` unchanged (they define the recorded run).
RUN_OPTIONS = ("shape", "vocab_chunk", "steps", "every", "lr", "oracle", "embeddings")
SKIPPED = 77


class Skipped(Exception):
    """A run lcecheck skipped (exit 77): no GPU for this subject or oracle."""


class EchoProgress:
    """Passes a run's stderr progress lines through as they come (a run at a realistic head takes minutes)."""

    def line(self, key, text):
        log("    " + text.rstrip())


def ceil_digits(x, digits=5):
    """x rounded up to `digits` significant digits (a bound never below the product it stands for)."""
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    return math.ceil(x / scale - 1e-9) * scale


def converge(args, subject, seed, golden=None):
    """One `lcecheck converge` run's JSON; exit 77 raises Skipped, any code but 0 and 1 is a tool error."""
    argv = [os.path.join(args.build, "lcecheck"), "converge", "--subject", subject, "--seed", str(seed), "--json"]
    for opt in RUN_OPTIONS:
        value = getattr(args, opt)
        if value is not None:
            argv += ["--" + opt.replace("_", "-"), str(value)]
    argv += ["--golden", golden] if golden else ["--measure-only"]
    rc, out, err = run_command(argv, check=False, progress=EchoProgress())
    if rc == SKIPPED:
        raise Skipped(f"{shlex.join(argv)}: skipped ({err.strip()[-300:]})")
    if rc not in (0, 1):
        raise ToolError(f"{shlex.join(argv)} exited with {rc}:\n{err.strip()[-2000:]}")
    try:
        d = json.loads(out)
    except json.JSONDecodeError as e:
        raise ToolError(f"{shlex.join(argv)} did not print JSON ({e})")
    if args.save_runs:
        os.makedirs(args.save_runs, exist_ok=True)
        name = f"converge-{subject.replace('/', '-')}-s{seed}{'-judged' if golden else ''}.json"
        write_atomically(os.path.join(args.save_runs, name), out)
    return d


def parse_margins(items):
    margins = {}
    for item in items or []:
        name, _, value = item.partition("=")
        if name not in METRICS:
            raise ToolError(f"--margin {item}: the metric must be one of {', '.join(METRICS)}")
        try:
            margins[name] = float(value)
        except ValueError:
            raise ToolError(f"--margin {item}: '{value}' is not a number")
        if not (margins[name] >= 1 and math.isfinite(margins[name])):
            raise ToolError(f"--margin {item}: a margin is a finite factor >= 1")
    missing = [m for m in METRICS if m not in margins]
    if missing:
        raise Refusal(f"no --margin for {', '.join(missing)}: every metric needs its margin")
    return margins


def parse_seeds(text, what):
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()] if text else []
    except ValueError:
        raise ToolError(f"{what} '{text}': expected comma-separated integers")
    return seeds


def parse_bounds(text, where):
    """(config line, {(class, dtype, embeddings, metric): bound}) of a converge bounds file."""
    lines = [ln.strip() for ln in text.split("\n")]
    if not lines or lines[0] != "lcecheck-converge 1":
        raise ToolError(f"{where}:1: expected 'lcecheck-converge 1'")
    config, bounds = None, {}
    for no, ln in enumerate(lines[1:], 2):
        if not ln or ln.startswith("#"):
            continue
        if ln.startswith("config "):
            config = ln
            continue
        f = ln.split()
        if len(f) != 5:
            raise ToolError(f"{where}:{no}: expected '<class> <dtype> <tied|untied> <metric> <bound>'")
        bounds[tuple(f[:4])] = float.fromhex(f[4]) if "0x" in f[4] else float(f[4])
    if config is None:
        raise ToolError(f"{where}: no config line")
    return config, bounds


def config_line(run_json):
    c = run_json["config"]
    return (f"config {c['dtype']} n {c['n']} h {c['h']} v {c['v']} chunk {c['vocab_chunk']} steps {c['steps']} "
            f"every {c['eval_every']} lr {c['lr']!r} seed {c['seed']}")


def generator(args):
    argv = ["regen", "--subject", args.subject, "--seeds", args.seeds]
    argv += ["--check-seeds", args.check_seeds] if args.check_seeds else []
    argv += ["--must-fail", args.must_fail] if args.must_fail else []
    argv += [a for m in METRICS for a in ("--margin", f"{m}={args.margins[m]:g}")]
    for opt in RUN_OPTIONS:
        if getattr(args, opt) is not None:
            argv += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
    if os.path.abspath(args.out) != os.path.abspath(os.path.join(REPO, DEFAULT_OUT)):
        argv += ["--out", repo_relative(args.out, REPO)]
    return SCRIPT + " " + shlex.join(argv)


def device_line():
    """GPU 0 as nvidia-smi names it, or 'none (host)'."""
    if shutil.which("nvidia-smi") is None:
        return "none (host)"
    rc, out, _ = run_command(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                             check=False)
    return out.strip().split("\n")[0] if rc == 0 and out.strip() else "none (host)"


def golden_class(args):
    """The subject's golden class, as `lcecheck list --json` names it."""
    rc, out, err = run_command([os.path.join(args.build, "lcecheck"), "list", "--json"], check=False)
    try:
        subjects = json.loads(out)["subjects"] if rc == 0 else []
    except (json.JSONDecodeError, KeyError):
        subjects = []
    for s in subjects:
        if s.get("name") == args.subject:
            return s["golden_class"]
    raise ToolError(f"{args.subject}: not a subject of {args.build}/lcecheck (lcecheck list)")


def regenerate(args):
    """Runs the fit, the checks and the must-fail subjects; returns (file text, report dict)."""
    fit_seeds, check_seeds = parse_seeds(args.seeds, "--seeds"), parse_seeds(args.check_seeds, "--check-seeds")
    if not fit_seeds:
        raise ToolError("--seeds: at least one fit seed")
    fits = [converge(args, args.subject, s) for s in fit_seeds]
    cls = golden_class(args)
    config = config_line(fits[0])
    dtype = fits[0]["config"]["dtype"]
    values, measured = {}, []
    for seed, fit in zip(fit_seeds, fits):
        for run in fit["runs"]:
            emb = run["embeddings"]
            row = {m: run["metrics"][m]["value"] for m in METRICS}
            measured.append(f"seed {seed} {emb}: " + ", ".join(f"{m} {row[m]:.4g}" for m in METRICS))
            for m in METRICS:
                if row[m] is None or not math.isfinite(row[m]):
                    raise Refusal(f"seed {seed} {emb}: {m} is not finite; nothing to fit")
                values.setdefault((emb, m), []).append(row[m])
    bounds = {(cls, dtype, emb, m): ceil_digits(args.margins[m] * max(v)) for (emb, m), v in values.items()}
    body = [config] + [f"{' '.join(k)} {b:.5g}" for k, b in sorted(bounds.items(), key=lambda kv: (
        kv[0][2] != "untied", METRICS.index(kv[0][3])))]
    checks = []
    with tempfile.TemporaryDirectory(prefix="lcecheck-converge-") as tmp:
        cand = os.path.join(tmp, "converge.bounds")
        with open(cand, "w", encoding="utf-8") as f:
            f.write("lcecheck-converge 1\n" + "\n".join(body) + "\n")
        for seed in check_seeds:
            d = converge(args, args.subject, seed, golden=cand)
            checks.append(summary(args.subject, seed, d, must_fail=False))
        for m in [s for s in (args.must_fail or "").split(",") if s]:
            d = converge(args, m, (check_seeds or fit_seeds)[0], golden=cand)
            checks.append(summary(m, (check_seeds or fit_seeds)[0], d, must_fail=True))
    bad = [c for c in checks if c["pass"] == c["must_fail"]]
    if bad:
        raise Refusal("the candidate bounds do not separate:\n  " + "\n  ".join(
            f"{c['subject']} seed {c['seed']}: {'passes' if c['pass'] else 'fails'} ({c['worst']})" for c in bad))
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    head = ["lcecheck-converge 1",
            "# Bounds of `lcecheck converge` (conformance/engine/lce_converge.h, format lce_converge_golden.h).",
            f"# generator: {generator(args)}",
            f"# fit: each bound is its margin times the largest value over seeds {args.seeds}, rounded up to 5 "
            "significant digits"] + [f"# measured: {m}" for m in measured] + \
        [f"# checked: {c['subject']} seed {c['seed']}: {'pass' if c['pass'] else 'FAIL'} ({c['worst']})"
         for c in checks] + \
        ([f"# loosened: {args.allow_loosen}"] if args.allow_loosen else []) + \
        [f"# commit: {git_commit(REPO)}", f"# device: {device_line()}", f"# date: {now}"]
    report = {"out": args.out, "config": config, "class": cls,
              "bounds": [{"key": list(k), "bound": b, "values": values[(k[2], k[3])]} for k, b in bounds.items()],
              "checks": checks}
    return "\n".join(head + body) + "\n", report


def summary(subject, seed, d, must_fail):
    """A checked run: its verdict and the metric with the largest share of its bound."""
    worst, share = "", -1.0
    for run in d["runs"]:
        for m, v in run["metrics"].items():
            if v["bound"] and v["value"] is not None and v["value"] / v["bound"] > share:
                share, worst = v["value"] / v["bound"], f"{run['embeddings']} {m} {100 * v['value'] / v['bound']:.0f}%"
    return {"subject": subject, "seed": seed, "pass": bool(d["pass"]), "must_fail": must_fail, "worst": worst}


def refuse_loosening(args, text):
    if not os.path.exists(args.out):
        return []
    old_config, old = parse_bounds(read_text(args.out), args.out)
    new_config, new = parse_bounds(text, "candidate")
    if old_config.rsplit(" seed ", 1)[0] != new_config.rsplit(" seed ", 1)[0]:
        return []  # another recorded run: a new golden, nothing to loosen
    looser = [f"{' '.join(k)} {old[k]:.5g} -> {b:.5g}" for k, b in new.items() if k in old and b > old[k]]
    looser += [f"{' '.join(k)} dropped" for k in old if k not in new]
    if looser and not args.allow_loosen:
        raise Refusal("the candidate loosens bounds (rerun with --allow-loosen \"reason\"):\n  " + "\n  ".join(looser))
    return looser


def cmd_regen(args):
    args.margins = parse_margins(args.margin)
    text, report = regenerate(args)
    report["loosened"] = refuse_loosening(args, text)
    if args.write:
        write_atomically(args.out, text)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{'metric':<14} {'run':<7} {'fit values':<24} {'bound':>11}")
        for b in report["bounds"]:
            print(f"{b['key'][3]:<14} {b['key'][2]:<7} {' '.join(f'{v:.3e}' for v in b['values']):<24} "
                  f"{b['bound']:11.5g}")
        for c in report["checks"]:
            print(f"check {c['subject']} seed {c['seed']}: {'pass' if c['pass'] else 'FAIL'} "
                  f"({'must fail' if c['must_fail'] else 'must pass'}; worst {c['worst']})")
        print(f"{'wrote' if args.write else 'would write (no --write)'} {args.out}")
    return 0


def cmd_reproduce(args):
    status = 0
    for path in args.files or [os.path.join(REPO, DEFAULT_OUT)]:
        text = read_text(path)
        gen = next((ln[len("# generator: "):] for ln in text.split("\n") if ln.startswith("# generator: ")), None)
        if gen is None or not gen.startswith(SCRIPT + " "):
            raise ToolError(f"{path}: no '# generator: {SCRIPT} ...' line")
        rerun = build_parser().parse_args(shlex.split(gen)[1:] + ["--build", args.build])
        rerun.margins, rerun.save_runs = parse_margins(rerun.margin), args.save_runs
        try:
            new_text, _ = regenerate(rerun)
        except Skipped as e:
            log(f"{path}: skipped: {e}")
            status = status or SKIPPED
            continue
        old_config, old = parse_bounds(text, path)
        new_config, new = parse_bounds(new_text, "rerun")
        diffs = ([f"config: {old_config} -> {new_config}"] if old_config != new_config else []) + \
            [f"{' '.join(k)}: {old.get(k)} -> {new.get(k)}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        print(f"{path}: " + ("reproduced exactly" if not diffs else "DIFFERS:\n  " + "\n  ".join(diffs)))
        if diffs:
            status = 1
    return status


def build_parser():
    ap = argparse.ArgumentParser(prog=SCRIPT,
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("regen", help="fit the bounds of one subject's converge runs, check them, write")
    r.add_argument("--subject", required=True)
    r.add_argument("--seeds", required=True, help="fit seeds, comma-separated")
    r.add_argument("--check-seeds", help="seeds the subject must pass under the candidate (out of sample)")
    r.add_argument("--must-fail", help="subjects (comma-separated) that must fail under the candidate")
    r.add_argument("--margin", action="append", metavar="METRIC=FACTOR", help="one per metric: " + ", ".join(METRICS))
    for opt in RUN_OPTIONS:
        r.add_argument("--" + opt.replace("_", "-"), dest=opt, help="passed to lcecheck converge")
    r.add_argument("--out", default=os.path.join(REPO, DEFAULT_OUT))
    r.add_argument("--allow-loosen", metavar="REASON")
    r.add_argument("--write", action="store_true")
    for p in (r, sub.add_parser("reproduce", help="rerun each file's generator and compare its bounds")):
        p.add_argument("--build", default=os.path.join(REPO, "build"))
        p.add_argument("--save-runs", metavar="DIR", help="write each run's lcecheck converge --json into DIR")
        p.add_argument("--json", action="store_true")
    sub.choices["reproduce"].add_argument("files", nargs="*")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    verb = {"regen": cmd_regen, "reproduce": cmd_reproduce}[args.cmd]

    def skipping(a):  # a GPU run with no GPU here: exit 77 (ctest's skip)
        try:
            return verb(a)
        except Skipped as e:
            log(f"lcecheck_converge_golden: skipped: {e}")
            return SKIPPED
    return run_verb("lcecheck_converge_golden", skipping, args)


if __name__ == "__main__":
    sys.exit(main())
