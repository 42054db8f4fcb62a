#!/usr/bin/env python3
"""production_rows.py — the rows of gpu_external.sh's `production` stage: for every judged subject of
every production case, the verdict, the failing or worst metric, relerr and bias of d_hidden and of the
weight gradient, the loss's relerr, each output's % of budget and bound, the adapter's forward+backward
time and peak extra memory (its meta.json), and whether the reference carried its error magnitudes
(without them, tier 2 on a card too small for them, the bounds that scale with cond are left unbounded:
lce_bounds_apply). The rows of conformance/external-production*.json. Glue only: it reads and prints;
what it judges again (--golden-dir) the offline judge of lcecheck_golden.py judges.

    python3 scripts/subjects/production_rows.py RESULTS_DIR [RESULTS_DIR ...] [--version SUBJECT=TEXT ...]
        [--note TEXT] [--golden-dir DIR] [--json FILE]

Each RESULTS_DIR is one unpacked results.tar of the stage: prod-K-SUBJECT.json (one `check` or `judge
--json` output, one case) and meta-prod-K-SUBJECT/0000-CASE/out/meta.json for the adapters. A subject
found in several directories keeps its first judged (pass or fail) row per case; an unreadable file (a
judge stopped at its limit) or a skip is kept only where no directory judged it. Each row records the
golden its judge names; --version replaces an adapter's version text (e.g. a Megatron-LM tree without
git metadata reports "unknown"); --note is recorded in every row (e.g. how to read verdicts made under
an older judge). --golden-dir DIR judges every row again, offline, against DIR/<class>.golden
(lcecheck_golden_judge.judge_run: the bounds evaluated at the scales the judge's JSON recorded, as
`lcecheck_golden.py judge` does): its bounds, budgets, status and summary are then those, its `golden` names
that file and `judged_on_device` keeps what the device's judge said (for goldens regenerated after the run).
Exit status: 0 done, 2 no or unreadable results, or a row's class has no golden in DIR."""
import argparse
import glob
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lce_exchange as lx  # noqa: E402
from lcecheck_golden_files import load_golden  # noqa: E402
from lcecheck_golden_judge import judge_run, misses_and_worst  # noqa: E402

NAME = re.compile(r"^prod-(?P<k>\d+)-(?P<subject>.+)\.json$")
OUTPUTS = ("loss", "d_hidden", "d_weight")


class UsageError(Exception):
    pass


def finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: {e}")


def meta_path(results, k, subject):
    """The adapter's meta.json for this case, or None (lcecheck's own subjects have none)."""
    found = glob.glob(os.path.join(results, f"meta-prod-{k}-{subject}", "*", "out", "meta.json"))
    return found[0] if found else None


def case_of_meta(path):
    """The case id in an adapter's result path (meta-prod-K-SUBJECT/0000-CASE/out/meta.json)."""
    m = path and re.match(r"\d+-(.+)$", os.path.basename(os.path.dirname(os.path.dirname(path))))
    return m.group(1) if m else None


def has_mags(o):
    """Whether the reference carried its error magnitudes for output o (lcecheck's no_mags; in files from
    before it was written, read from maxscaled, which exists only with them)."""
    if "no_mags" in o:
        return not o["no_mags"]
    return o.get("maxscaled") is not None or not o.get("judged")


def golden_of(d):
    """The golden a judge's JSON names, from golden/ on (the path it ran with is the device's)."""
    g = d.get("golden") or ""
    return g[g.rfind("golden/"):] if "golden/" in g else g or None


def row_of(results, k, subject, versions, note, golden_dir=None):
    path, mp = os.path.join(results, f"prod-{k}-{subject}.json"), meta_path(results, k, subject)
    head = {"subject": subject, "case": case_of_meta(mp)} if case_of_meta(mp) else {"subject": subject}
    if note:
        head["note"] = note
    try:
        d = read_json(path)
    except UsageError as e:  # a judge stopped at its time limit leaves an empty file
        return dict(head, status="error", summary=f"unreadable: {e}")
    c, why = lx.judged_case(d, os.path.basename(path))
    if c is None:
        return dict(head, status="error", summary=why)
    meta = read_json(mp) if mp else None
    outs = c.get("outputs") or {}
    row = {**head, "version": versions.get(subject, (meta or {}).get("version", "this tree")),
           "setting": (meta or {}).get("setting", "—"), "case": c["id"], "golden": golden_of(d),
           "status": c.get("status"), "summary": c.get("summary"),
           "reference_magnitudes": all(has_mags(outs[o]) for o in OUTPUTS if o in outs)}
    for o, key in (("d_hidden", "dh"), ("d_weight", "dw")):
        row[key + "_relerr"] = finite((outs.get(o) or {}).get("relerr"))
        row[key + "_bias"] = finite((outs.get(o) or {}).get("bias"))
    row["loss_relerr"] = finite((outs.get("loss") or {}).get("relerr"))
    row["budget"], row["bound"], row["unbounded"] = {}, {}, {}
    for o in OUTPUTS:
        v = outs.get(o) or {}
        row["budget"][o] = {m: round(p, 1) for m, p in (v.get("budget_pct") or {}).items() if finite(p) and p > 0}
        row["bound"][o] = {m: b for m, b in (v.get("bound") or {}).items() if finite(b)}
        if v.get("unbounded"):
            row["unbounded"][o] = v["unbounded"]
    if meta:
        row["ms"] = round(1000 * meta["seconds"], 1) if finite(meta.get("seconds")) else None
        row["peak_extra_gb"] = round(meta["peak_extra_bytes"] / 1e9, 2) if finite(meta.get("peak_extra_bytes")) else None
    return rejudge(row, d, c, golden_dir) if golden_dir and row["status"] in ("pass", "fail") else row


def rejudge(row, d, c, golden_dir):
    """row (case c of the judge's JSON d) judged again against golden_dir's golden of the judge's class by
    the offline judge's rule (misses_and_worst: a metric above its bound, or without an entry, fails); a
    class check that failed on the device still fails."""
    cls = d.get("golden_class")
    path = os.path.join(golden_dir, f"{cls}.golden")
    if not cls or not os.path.exists(path):
        raise UsageError(f"{row['subject']}: no golden {path} for class {cls}")
    results = judge_run({"golden_class": cls, "cases": [c]}, load_golden(path)["entries"])
    misses, worst = misses_and_worst(results)
    class_failed = any(not (o or {}).get("class_ok", True) for o in (c.get("outputs") or {}).values())
    row["judged_on_device"] = {k: row[k] for k in ("golden", "status", "summary", "bound", "budget")}
    row["golden"] = golden_of({"golden": os.path.abspath(path)})
    row["bound"] = {o: {} for o in OUTPUTS}
    row["budget"] = {o: {} for o in OUTPUTS}
    for r in results:
        if r["output"] in OUTPUTS and finite(r["bound"]):
            row["bound"][r["output"]][r["metric"]] = r["bound"]
            if r["pct"] > 0:
                row["budget"][r["output"]][r["metric"]] = round(r["pct"], 1)
    row["status"] = "fail" if class_failed or misses else "pass"
    if class_failed:
        return row  # the device's summary names the class check
    if misses:
        row["summary"] = (f"FAIL {worst['output']} {worst['metric']} without a golden entry" if worst.get("no_entry")
                          else f"FAIL {worst['output']} {worst['metric']} {worst['pct']:.0f}% of budget "
                               f"(|{worst['value']:.1e}| > {worst['bound']:.1e})")
    else:
        row["summary"] = f"pass (max {worst['pct']:.0f}% {worst['output']} {worst['metric']})" if worst else "pass"
    return row


def collect(dirs, versions, note=None, golden_dir=None):
    """One row per (case, subject): the first judged one (pass or fail), another only where none was.
    A row without a case of its own (an unreadable judge file of lcecheck's own subject) takes that of
    the directory's other subjects with the same tag."""
    rows = {}
    for results in dirs:
        found = [(m["k"], m["subject"]) for m in (NAME.match(os.path.basename(p))
                                                   for p in sorted(glob.glob(os.path.join(results, "prod-*.json")))) if m]
        new = [row_of(results, k, subject, versions, note, golden_dir) for k, subject in found]
        case_of = {k: r["case"] for (k, _), r in zip(found, new) if r.get("case")}
        for (k, subject), r in zip(found, new):
            r.setdefault("case", case_of.get(k, f"prod-{k} of {results}"))
            key = (r["case"], subject)
            if key not in rows or rows[key]["status"] not in ("pass", "fail"):
                rows[key] = r
    if not rows:
        raise UsageError(f"no prod-K-SUBJECT.json in {', '.join(dirs)}")
    return list(rows.values())


def fmt(x, spec):
    """x formatted by spec, or a dash as wide as the spec's width where x is missing."""
    return format(x, spec) if x is not None else "—".rjust(int(re.match(r"\D*(\d+)", spec).group(1)))


def print_table(rows):
    for case in dict.fromkeys(r["case"] for r in rows):
        print(case)
        print_case(r for r in rows if r["case"] == case)


def print_case(rows):
    print(f"{'subject':<28} {'verdict':<6} {'dh relerr':>10} {'dh bias':>10} {'dw relerr':>10} {'dw bias':>10} "
          f"{'loss rel':>9} {'ms':>7} {'GB':>6}  magnitudes; summary")
    for r in rows:
        print(f"{r['subject']:<28} {str(r['status']):<6} {fmt(r.get('dh_relerr'), '10.3e')} {fmt(r.get('dh_bias'), '+10.2e')} "
              f"{fmt(r.get('dw_relerr'), '10.3e')} {fmt(r.get('dw_bias'), '+10.2e')} {fmt(r.get('loss_relerr'), '9.2e')} "
              f"{fmt(r.get('ms'), '7.1f')} {fmt(r.get('peak_extra_gb'), '6.2f')}  "
              f"{'yes' if r.get('reference_magnitudes') else 'NO'}; {r.get('summary')}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="unpacked results.tar of gpu_external.sh's production stage")
    ap.add_argument("--version", action="append", default=[], metavar="SUBJECT=TEXT",
                    help="the version text of SUBJECT's row (repeatable)")
    ap.add_argument("--note", help="recorded in every row")
    ap.add_argument("--golden-dir", metavar="DIR", help="judge every row again against DIR/<class>.golden (offline)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    try:
        versions = dict(v.split("=", 1) for v in args.version)
    except ValueError:
        print("production_rows.py: --version takes SUBJECT=TEXT", file=sys.stderr)
        return 2
    try:
        rows = collect(args.results, versions, args.note, args.golden_dir)
    except UsageError as e:
        print(f"production_rows.py: {e}", file=sys.stderr)
        return 2
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
