"""lcecheck_golden_judge.py — measurements judged against goldens without running lcecheck: the scales
of the golden terms on a measured output (as lce_bound_scales_of computes them), a measured run judged
metric by metric (the judge's rule: a metric above its bound fails the case), the measured mutant runs
of a regeneration from files (`regen --from-json`), and `lcecheck_golden.py judge --from-json`: how
goldens fitted on some cases hold on others (the out-of-sample tables of golden/README.md)."""
import json
import math
import os
import re

from lcecheck_golden_files import METRICS, Refusal, ToolError, bound_at, load_golden, needs_mags, read_text
from lcecheck_golden_fit import scales_of, u_dlogit
from lcecheck_run import log

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def case_shape(case_id):
    """N, H, V from a case id such as bf16.untied.tp2.n16.h32.v300.vp384.vc8.mean...."""
    shape = {}
    for tok in case_id.split("."):
        m = re.fullmatch(r"([nhv])(\d+)", tok)
        if m:
            shape[m.group(1).upper()] = int(m.group(2))
    if set(shape) != {"N", "H", "V"}:
        raise ToolError(f"case id '{case_id}' does not name n, h and v")
    return shape


def budget_pct(value, bound):
    """value as % of bound, as the judge reports it (lce_judge.c): 0 of a bound 0 is 0%, anything more infinite."""
    if bound > 0:
        return 100.0 * value / bound
    return 0.0 if value == 0 else math.inf


def tcx_of(o, metric):
    """The tensor-core alignment ratio of one metric of a measured output (lce_metric_values.tcx), at
    least 1; 1 where not reported (measurements from before it, or a reference without tcex)."""
    t = (o.get("tcx") or {}).get(metric)
    return max(1.0, float(t)) if t is not None and math.isfinite(float(t)) else 1.0


def output_scales(case_id, output, o, metric=None):
    """The scales of the golden terms on one measured output (lce_bound_scales_of) for one metric
    (lce_bound_scales_for: tcx, 1 without a metric, and tcx_ms for the maxscaled bound the term
    ms*cond/sqrtn scales with).
    Measurements from before neff was reported count one effective element (the loosest cond/sqrtn)."""
    grad = output in ("d_hidden", "d_weight")
    rnd = (o.get("rnd") or 0.0) if grad else 0.0  # 0 unmeasured (tier 2)
    flip = (o.get("flip") or 0.0) if grad else 0.0
    outr = (o.get("outr") or 0.0) if grad else 0.0
    acc, accn, gsc, flipn = ((o.get(t) or 0.0) if grad else 0.0 for t in ("acc", "accn", "gsc", "flipn"))
    # pertok: u per unit of sum mag |r| / <r, r> under reduction none, as measured; None: measurements
    # from before it was reported, where it was u of the case (scales_of)
    pertok = o.get("pertok") if grad else None
    # pertokn: its normwise twin, u per unit of ||m|| / ||r|| under reduction none (gradients' relerr); None:
    # measurements from before it was reported, u of the case as pertok's (scales_of); 0 for the forward outputs
    pertokn = o.get("pertokn") if grad else 0.0
    # rndn: rnd normwise (gradients' relerr); None: measurements from before it was reported, rnd (scales_of)
    rndn = o.get("rndn") if grad else 0.0
    # rnds: the bias of a result at R(rnd) or R(r); None: measurements from before it was reported, rnd + outr
    # (scales_of); outv: the spread of the roundings a kernel's own error changes, 0 where not reported
    rnds = o.get("rnds") if grad else 0.0
    outv = (o.get("outv") or 0.0) if grad else 0.0
    # rsum also reaches lse and loss_token (lse = m + log s; lce_output_has_rsum)
    rsum = (o.get("rsum") or 0.0) if grad or output in ("lse", "loss_token") else 0.0
    # ms*cond/sqrtn counts the smaller of r's and the error scale's elements (lce_bound_scales_of).
    neff = o.get("neff") or 1.0
    if (o.get("neff_emag") or 0.0) > 0.0:
        neff = min(neff, o["neff_emag"])
    # equal tokens make equal per-token errors: the count is of distinct tokens (lce_output_per_token)
    share = o.get("token_share") or 1.0
    if output in ("lse", "loss_token", "d_hidden") and 0.0 < share < 1.0:
        neff *= share
    # uo: the unit roundoff of the output's own format (d_hidden: the case dtype; the rest fp32)
    dtype = case_id.split(".")[0]
    uo = 2.0**-24 if output != "d_hidden" or dtype == "fp32" else {"bf16": 2.0**-8, "fp16": 2.0**-11}[dtype]
    # rndu: rnd's bound u/2 where the reference does not measure rnd (tier 2 without magnitudes, or files
    # made before tier 2 measured it: acc, which every reference with
    # rnd reports > 0 where r != 0, is 0 there) and r is not 0 everywhere (neff 0); lcecheck reports it
    # since the term exists, and files that report acc but not rndu are read by that rule (lce_bound_scales_of)
    if "rndu" in o or "acc" not in o:  # reported, or a file without the derived terms at all: as it says
        rndu = (o.get("rndu") or 0.0) if grad else 0.0
    else:
        rndu = u_dlogit(case_id) / 2 if grad and not o.get("acc") and (o.get("neff") or 0.0) > 0.0 else 0.0
    scales = scales_of(case_id, o.get("cond") or 1.0, neff, int(o["inner"]), rnd, flip, outr,
                       acc, accn, gsc, flipn, rsum, pertok, uo, rndu, pertokn, rndn, rnds, outv)
    scales["tcx"], scales["tcx_ms"] = tcx_of(o, metric), tcx_of(o, "maxscaled")
    return scales


def with_ms(entries, key, scales):
    """scales with ms set: the bound of the maxscaled entry of key's (class, dtype, output) at them
    (lce_bounds_apply), which the term ms*cond/sqrtn of the other metrics scales with."""
    ms = entries.get(tuple(key[:3]) + ("maxscaled",))
    at = dict(scales, tcx=scales.get("tcx_ms", 1.0))  # the maxscaled bound at its own tcx (lce_bound_scales_at)
    scales["ms"] = bound_at(ms, at) if ms is not None and key[3] != "maxscaled" else 0.0
    return scales


def load_measurement_files(paths, subject):
    """Measurements from files written by lcecheck (`production --json`, `measure --json`): the runs of
    subject pooled into one measurement, the runs of mutants kept apart (their golden_class decides
    which goldens they are checked against), and the device record of the first file."""
    meas, mutants, device = None, [], None
    for path in paths:
        try:
            d = json.loads(read_text(path))
        except (OSError, json.JSONDecodeError) as e:
            raise ToolError(f"cannot read measurements {path}: {e}")
        device = device or d.get("device")
        for run in d.get("runs", [d]):
            if not isinstance(run, dict) or not isinstance(run.get("cases"), list):
                raise ToolError(f"{path}: a run without cases")
            if run.get("subject") == subject:
                if meas is None:
                    meas = {"golden_class": run.get("golden_class"), "cases": []}
                meas["cases"] += run["cases"]
            elif run.get("mutant"):
                mutants.append(run)
    if meas is None:
        raise ToolError(f"no run of subject {subject} in {', '.join(paths)}")
    return meas, mutants, device


def check_mutant_runs(cls, runs, entries):
    """The measured mutant runs of class cls judged offline against candidate entries (judge_run: a
    metric above its bound fails the case); refuses a mutant that passes every case."""
    rows, survivors = [], []
    for run in runs:
        if run.get("golden_class") != cls:
            continue
        failed = [f"{r['case']} {r['output']} {r['metric']}" for r in judge_run(run, entries) if r["value"] > r["bound"]]
        verdict = "killed" if failed else "SURVIVED"
        rows.append({"mutant": run.get("subject"), "failed": len(failed), "verdict": verdict,
                     "first": failed[:3]})
        log(f"  mutant {run.get('subject')}: {verdict} ({len(failed)} failing metrics{': ' + '; '.join(failed[:3]) if failed else ''})")
        if not failed:
            survivors.append(f"{run.get('subject')}: passes every measured case")
    if survivors:
        raise Refusal("a measured mutant is not killed by the candidate goldens:\n  " + "\n  ".join(survivors))
    return rows


def judge_run(run, entries):
    """Every (case, output, metric) of one measured run against entries: rows with value, bound and % of
    budget (the judge's rule, offline: a metric above its bound fails the case; a defined metric without
    an entry, which the judge refuses to judge, is a row with bound NaN, infinite use and no_entry)."""
    cls, rows = run.get("golden_class"), []
    for case in run.get("cases", []):
        for out, o in (case.get("outputs") or {}).items():
            for metric in METRICS:
                key = (cls, case.get("dtype"), out, metric)
                e, v = entries.get(key), (o or {}).get(metric)
                if v is None or (o or {}).get("judged") == 0:
                    continue
                if e is None:  # the judge's error: a defined metric the golden has no entry for
                    rows.append({"case": case["id"], "dtype": case.get("dtype"), "output": out, "metric": metric,
                                 "value": abs(float(v)), "bound": math.nan, "pct": math.inf, "no_entry": True})
                    continue
                if (o or {}).get("no_mags") and needs_mags(e):  # the judge leaves it unbounded (lce_bounds_apply)
                    rows.append({"case": case["id"], "dtype": case.get("dtype"), "output": out, "metric": metric,
                                 "value": abs(float(v)), "bound": math.nan, "pct": 0.0, "unbounded": True})
                    continue
                bound = bound_at(e, with_ms(entries, key, output_scales(case["id"], out, o, metric)))
                rows.append({"case": case["id"], "dtype": case.get("dtype"), "output": out, "metric": metric,
                             "value": abs(float(v)), "bound": bound,
                             "pct": budget_pct(abs(float(v)), bound)})
    return rows


def misses_and_worst(rows):
    """judge_run's rows over their bound (a metric without a golden entry among them: its use is infinite)
    and the row that uses the most of its budget (None without rows)."""
    return [r for r in rows if r["pct"] > 100.0], max(rows, key=lambda r: r["pct"], default=None)


def cmd_judge(args):
    """Measurements made elsewhere (lcecheck production --json, measure --json) judged offline against
    the committed golden of each run's class: how goldens fitted on some cases hold on others (the
    out-of-sample tables of golden/README.md). A run of a subject must pass every metric; a mutant run
    (--json files of `production` hold them) must fail at least one, or it is reported as surviving."""
    runs = []
    for path in args.from_json:
        try:
            d = json.loads(read_text(path))
        except (OSError, json.JSONDecodeError) as e:
            raise ToolError(f"cannot read measurements {path}: {e}")
        runs += [dict(r, file=os.path.relpath(os.path.abspath(path), REPO)) for r in d.get("runs", [d]) if isinstance(r, dict)]
    if args.subject:
        runs = [r for r in runs if r.get("subject") in args.subject]
    if not runs:
        raise ToolError("no run to judge in " + ", ".join(args.from_json))
    results, bad = [], []
    for run in runs:
        cls = run.get("golden_class")
        path = os.path.join(args.golden_dir, f"{cls}.golden")
        if not cls or not os.path.exists(path):
            raise ToolError(f"{run['file']}: run of {run.get('subject')}: no golden {path} for class {cls}")
        rows = judge_run(run, load_golden(path)["entries"])
        misses, worst = misses_and_worst(rows)
        mutant = bool(run.get("mutant"))
        verdict = ("killed" if misses else "SURVIVED") if mutant else ("pass" if not misses else "MISS")
        results.append({"file": run["file"], "subject": run.get("subject"), "golden": os.path.relpath(path, REPO),
                        "mutant": mutant, "metrics": len(rows), "misses": misses, "worst": worst,
                        "verdict": verdict})
        if verdict in ("MISS", "SURVIVED"):
            bad.append(f"{run.get('subject')} ({run['file']}): {verdict}")
    if args.json:
        print(json.dumps({"golden_dir": os.path.relpath(args.golden_dir, REPO), "runs": results}, indent=2))
    else:
        print(f"{'subject':<34} {'metrics':>7} {'misses':>6} {'worst':>8}  verdict   worst at")
        for r in results:
            w = r["worst"]
            at = f"{w['case']} {w['output']} {w['metric']}" if w else "-"
            pct = f"{w['pct']:.1f}%" if w else "-"
            print(f"{r['subject']:<34} {r['metrics']:>7} {len(r['misses']):>6} {pct:>8}  {r['verdict']:<9} {at}")
            for m in (r["misses"] if not r["mutant"] else [])[:10]:
                print(f"    miss: {m['case']} {m['output']} {m['metric']} {m['value']:.3e} "
                      + ("without a golden entry" if m.get("no_entry") else f"> {m['bound']:.3e} ({m['pct']:.0f}%)"))
    if bad:
        raise Refusal("judged against " + os.path.relpath(args.golden_dir, REPO) + ":\n  " + "\n  ".join(bad))
    return 0
