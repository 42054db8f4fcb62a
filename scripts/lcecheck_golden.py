#!/usr/bin/env python3
"""lcecheck_golden.py — regenerate and show golden bound files (golden/<class>.golden).

Glue only (STYLE.md rule 12): measurements come from `lcecheck measure`, margins and ceilings from
golden/policy.txt, verdicts on mutants from `lcecheck check`. Every command it runs is printed on
stderr with a leading '+'. Regeneration refuses, with exit code 1 and a message, to
  - use a measurement with a class failure or an error,
  - propose a bound above its analytic ceiling (or accept a measurement above its own case's one),
  - loosen or drop an existing bound without --allow-loosen "reason" (the reason is recorded),
  - measure fewer matrices than the golden records without --allow-fewer-matrices "reason",
  - write goldens under which a catalogued mutant of the class passes the matrix.
Without --write it shows what it would write and changes nothing; --stage DIR writes there instead.
The golden records the whole command that wrote it (lcecheck_golden_provenance.py), and
`reproduce [FILE...]` reruns that command and compares the entries bit for bit.
Bounds of the `cond` form (a + b*cond) scale with the output's normwise condition, which lcecheck
reports per case and output as "cond"; ceilings in the policy may use the name cond likewise.

  scripts/lcecheck_golden.py regen --subject fused-host [--matrix default] [--build build] [--jobs N] [--write]
  without --matrix: the matrices the class's golden records, or `default` for a new golden;
  --matrix NAME[@ORACLE] repeats: the samples of every matrix are pooled (e.g. --matrix default
  --matrix medium@fp64-gpu: the medium shapes judged by the fp64 GPU tier, lcecheck --oracle);
  --matrix case=ID[@ORACLE] adds one case
  --jobs N runs every matrix as N `lcecheck ... --shard i/N` processes at once and pools their cases in
  the matrix order: the same golden, sooner (the MPFR oracle is single-threaded; each shard gets
  cores / N OpenMP threads)
  scripts/lcecheck_golden.py regen --subject fused-cuda --arch sm_90 [...]   on that GPU: golden/sm_90/
  scripts/lcecheck_golden.py show [--arch sm_90] [--json]
  scripts/lcecheck_golden.py [--arch sm_90] judge --from-json FILE [--subject S] [--json]
  measurements made elsewhere (production --json, measure --json) judged offline against the committed
  goldens: a subject's runs must pass, a mutant's must fail a case (out-of-sample checks)
  scripts/lcecheck_golden.py reproduce [--command-only] [--build build] [--jobs N] [FILE...]

GPU subjects have one golden directory per architecture (golden/<arch>/, as glibc keeps one ulps
file per platform) with its own policy.txt, whose condk bounds carry the architecture's measured
tensor-core slope (the K term). --arch refuses unless GPU 0 is of that architecture, and records the
device name, driver and CUDA versions in the provenance.
"""
import argparse
import datetime
import json
import math
import os
import re
import shlex
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from lcecheck_golden_files import *  # noqa: F401,F403  (formats; re-exported for the tests)
from lcecheck_golden_fit import FitError, fit
from lcecheck_golden_judge import (budget_pct, case_shape, check_mutant_runs, cmd_judge,  # noqa: F401
                                   load_measurement_files, output_scales, with_ms)
from lcecheck_golden_provenance import (command_problems, generator_command, git_commit, gpu_identity, header,
                                        mpfr_version, recorded_matrices, repo_relative, seed_summary)
from lcecheck_run import log, matrix_args, run_json, run_sharded, run_verb


# ---- regeneration --------------------------------------------------------------------------------
def collect_measurements(meas):
    """Refuses on errors and class failures; returns {(class, dtype, output, metric): [samples]}."""
    cls = meas.get("golden_class")
    if not cls or not isinstance(meas.get("cases"), list):
        raise ToolError("measure JSON lacks golden_class or cases")
    problems, samples = [], {}
    for case in meas["cases"]:
        cid, status = case.get("id", "?"), case.get("status")
        if status == "skip":
            continue
        if status == "error":
            problems.append(f"{cid}: error: {case.get('message', '')}".rstrip(": "))
            continue
        if case.get("dtype") not in DTYPES:
            raise ToolError(f"measure JSON: case {cid} has no valid dtype")
        class_failures = 0
        for out, o in (case.get("outputs") or {}).items():
            if o is None:
                continue
            if not o.get("class_ok", False):
                problems.append(f"{cid}: {out}: class check failed: {o.get('class_msg', '')}")
                class_failures += 1
                continue
            if not o.get("judged"):
                continue  # class checks only (d_embedding, loss of reduction none): no metric exists
            cond = o.get("cond", 1.0)  # absent in measurements from before the cond form: no cancellation
            if cond is None or not math.isfinite(float(cond)) or float(cond) < 1.0:
                problems.append(f"{cid}: {out}: cond is {cond}, not a finite number >= 1")
                continue
            for metric in METRICS:
                v = o.get(metric)
                if v is None and metric in ("bias", "ulpfrac"):
                    continue  # a statistic over too few elements (LCE_STAT_MIN_ELEMS): never bounded
                if v is None:
                    problems.append(f"{cid}: {out}: {metric} is not a finite number")
                    continue
                key = (cls, case["dtype"], out, metric)
                samples.setdefault(key, []).append({"id": cid, "value": abs(float(v)), "k": int(o["inner"]),
                                                    "cond": float(cond), "shape": case_shape(cid),
                                                    "scales": output_scales(cid, out, o, metric)})
        if status != "pass" and not class_failures:
            problems.append(f"{cid}: status '{status}' without a class failure named")
    if problems:
        raise Refusal("the measurement has class failures or errors; fix them before regenerating:\n  "
                      + "\n  ".join(problems))
    if not samples:
        raise Refusal("the measurement judged no metric at all")
    return samples


def propose(pol, samples):
    """Proposes entries from the policy; also returns the worst sample of each entry and the values
    and bounds above their ceilings.

    Every rule is a model over its terms (policy `terms=`): the coefficients the policy fixes
    (`fix.<term>`, times the margin: a measured slope such as the tensor-core term per unit of K) are
    set, the others fitted (lcecheck_golden_fit.fit: the tightest bounds at least margin times every
    measured value and at least `min`), then capped (`max.<term>`). The worst sample is the one that
    uses the largest share of its bound. Expressions of a rule may name `maxscaled`: the constant
    term of the same output's maxscaled bound, proposed first (one element's error per unit of its
    error scale, which bounds relerr/cond over one element)."""
    entries, worst, refusals = {}, {}, []
    for key, ss in sorted(samples.items(), key=lambda kv: (kv[0][3] != "maxscaled", entry_order(kv[0]))):
        cls, dtype, output, metric = key
        ms = dict(entries.get((cls, dtype, output, "maxscaled"), ("model", 0, 0, 0, ()))[4])
        extra = {"maxscaled": ms.get("1", math.nan)}
        rule = pol["bounds"].get((output, metric))
        if rule is None:
            raise Refusal(f"{pol['path']}: no bound rule for {output} {metric}")
        ceiling = policy_ceiling(pol, dtype, output, metric)

        for s in ss:
            with_ms(entries, key, s["scales"])

        def value(expr, s):
            return policy_value(pol, expr, dtype, s["shape"], s["k"], extra=extra)
        margin = value(rule["margin"], ss[0])
        fixed = {t: value(e, ss[0]) * margin for t, e in rule["fix"].items()}
        # add.: a derived term for a mechanism the fitted terms do not hold, added after the fit (0 in it)
        # so that a case where that worst case overstates does not lower what the fitted terms hold
        added = {t: value(e, ss[0]) * margin for t, e in rule["add"].items()}
        fixed.update({t: 0.0 for t in added})
        if "ref" in rule:
            fixed[rule["ref"]] = 1.0
        floors = [value(rule["min"], s) if "min" in rule else 0.0 for s in ss]
        caps = {t: value(e, ss[0]) for t, e in rule["max"].items()}
        try:
            coefs = fit(ss, rule["terms"], fixed, margin, floors, rule.get("ref"))
            over = {t: caps[t] for t, c in zip(rule["terms"], coefs) if t in caps and c > caps[t]}
            if over and set(rule["terms"]) - set(fixed) - set(over):
                # a capped term is held at its cap, and the other terms refitted around it
                coefs = fit(ss, rule["terms"], {**fixed, **over}, margin, floors, rule.get("ref"))
            coefs = [min(c, caps[t]) if t in caps else added.get(t, c) for t, c in zip(rule["terms"], coefs)]
        except FitError as e:
            raise Refusal(f"{' '.join(key)}: {e}")
        entry = ("model", 0.0, 0.0, 0.0, tuple(zip(rule["terms"], coefs)))
        bounds = [bound_at(entry, s["scales"]) for s in ss]
        ceils = [policy_value(pol, ceiling, dtype, s["shape"], s["k"], s["cond"]) for s in ss]
        for s, c in zip(ss, ceils):
            if s["value"] > c:
                refusals.append(f"{' '.join(key)}: measured {s['value']:.3e} in {s['id']} (cond "
                                f"{s['cond']:.3g}) is above its ceiling {c:.3e} ({ceiling[1]})")
        if max(bounds) > max(ceils):
            refusals.append(f"{' '.join(key)}: proposed bound {max(bounds):.3e} is above the largest "
                            f"ceiling {max(ceils):.3e} of the matrix ({ceiling[1]})")
        entries[key] = entry
        worst[key] = max(zip(ss, bounds), key=lambda sb: budget_pct(sb[0]["value"], sb[1]))[0]
    derived, unjudgeable = derive_unmeasured(pol, samples, entries)
    if unjudgeable:
        raise Refusal("entries a larger matrix would judge and this golden could not:\n  " + "\n  ".join(unjudgeable))
    entries.update(derived)
    return entries, worst, refusals


def bound_ratio(new, old):
    """new/old; a bound of 0 before and after is unchanged (1), a bound made positive from 0 infinitely looser."""
    if old > 0:
        return new / old
    return math.inf if new > 0 else 1.0


def diff_entries(old, new, samples, worst=None):
    """Rows old → new. 'looser' when new exceeds old on any measured output; ratio is the largest
    new/old over those outputs; old_value and new_value are the bounds at the worst sample (the one
    nearest its new bound), or at the measured output with the largest new bound without one."""
    rows = []
    worst = worst or {}
    neutral = {"cond": 1.0, "neff": 1.0, "vs": 1.0, "h": 1.0, "k": 1.0, "coh": 0.0, "ms": 0.0, "rnd": 0.0, "pertok": 0.0}
    for key in sorted(set(old) | set(new), key=entry_order):
        points = [s["scales"] for s in samples.get(key, [])] or [neutral]
        w = worst.get(key)
        at = w["scales"] if w else max(points, key=lambda p: bound_at(new.get(key) or old[key], p))
        o, n = old.get(key), new.get(key)
        if o is None:
            change, ratio = "new", None
        elif n is None:
            change, ratio = "removed", None
        else:
            ratio = max(bound_ratio(bound_at(n, p), bound_at(o, p)) for p in points)
            change = "looser" if ratio > 1.0 + 1e-12 else ("same" if n == o else "tighter")
        rows.append({"key": list(key), "old": format_entry(key, o)[len(" ".join(key)) + 1:] if o else None,
                     "new": format_entry(key, n)[len(" ".join(key)) + 1:] if n else None,
                     "at": {"k": at["k"], "cond": at["cond"]},
                     "old_value": bound_at(o, at) if o else None,
                     "new_value": bound_at(n, at) if n else None, "ratio": ratio, "change": change})
    return rows


def print_diff(rows, worst):
    print(f"{'class':<12} {'dtype':<5} {'output':<11} {'metric':<9} {'old':>10}    {'new':>10} "
          f"{'ratio':>7}  change   {'at cond':>8}  worst case")
    for r in rows:
        old = f"{r['old_value']:.3e}" if r["old_value"] is not None else "-"
        new = f"{r['new_value']:.3e}" if r["new_value"] is not None else "-"
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        w = worst.get(tuple(r["key"]))
        print(f"{r['key'][0]:<12} {r['key'][1]:<5} {r['key'][2]:<11} {r['key'][3]:<9} {old:>10} -> "
              f"{new:>10} {ratio:>7}  {r['change']:<8} {r['at']['cond']:>8.3g}  {w['id'] if w else ''}")


KILL_TABLE = os.path.join(REPO, "conformance", "tests", "mutant_kills.txt")

def check_mutants(lcecheck, listing, cls, matrices, candidate_path, no_mutants_reason=None, jobs=1):
    """Runs every mutant of the class under the candidate on every matrix (in `jobs` shards each);
    returns rows and refuses survivors: a mutant that passes every case of every matrix, or that
    never fails on an output the kill table (KILL_TABLE) says it must fail on."""
    kills = load_kill_table(KILL_TABLE)
    mutants = [s for s in listing.get("subjects", []) if s.get("golden_class") == cls
               and (s.get("name", "").startswith("mutant") or "mutant" in (s.get("caps") or []))]
    if not mutants and no_mutants_reason:
        log(f"  class {cls} has no mutants: {no_mutants_reason}")
        return []
    if not mutants:
        raise Refusal(f"no mutant subject of class {cls} in this build, so the goldens cannot be "
                      "shown to kill anything (configure with -DLCE_BUILD_MUTANTS=ON)")
    rows, survivors = [], []
    for m in mutants:
        failed, rcs, err, failed_outputs = [], [], "", set()
        need = set(kills.get(m["name"], []))
        for spec in matrices:
            # A failing case in any shard kills the mutant; every shard must exit 0 for it to survive.
            for name, rc, out, e in run_sharded([lcecheck, "check", "--subject", m["name"]] + matrix_args(spec)
                                                + ["--golden", candidate_path, "--json"], jobs):
                rcs.append(rc)
                err += f"{name}: {e}" if name and e.strip() else e
                try:
                    cases = [c for c in json.loads(out).get("cases", []) if c.get("status") == "fail"]
                except (json.JSONDecodeError, AttributeError):
                    cases = []
                failed += [c.get("id") for c in cases]
                failed_outputs |= {o for c in cases for o, v in (c.get("outputs") or {}).items()
                                   if v is not None and v.get("pass") is False}
            if failed and need <= failed_outputs:
                break  # killed where it must be: the other matrices cannot change that
        rc = max(rcs)
        missing = sorted(need - failed_outputs)
        if failed and missing:
            verdict = "SURVIVED on " + ",".join(missing)
            survivors.append(f"{m['name']}: never fails on {', '.join(missing)}, which the kill table "
                             f"{os.path.relpath(KILL_TABLE, REPO)} says it must")
        elif all(r == 0 for r in rcs):
            verdict = "SURVIVED"
            survivors.append(f"{m['name']}: every case of matrix {', '.join(matrices)} passes "
                             f"({m.get('description', '')})")
        elif failed:
            verdict = "killed"
        else:
            verdict = "UNCONFIRMED"
            survivors.append(f"{m['name']}: check exited {rc} without a failing case "
                             f"(an error is not a kill): {err.strip()[-300:]}")
        rows.append({"mutant": m["name"], "exit": rc, "failed_cases": len(failed), "verdict": verdict})
        log(f"  mutant {m['name']}: {verdict} ({len(failed)} failing cases, exit {rc})")
    if survivors:
        raise Refusal("a catalogued mutant is not killed by the candidate goldens:\n  " + "\n  ".join(survivors))
    return rows


def fewer_matrices(args, cls, matrices):
    """The matrices (or files) class cls's golden was measured on that this run leaves out; refuses
    unless --allow-fewer-matrices gives a reason. Bounds fitted on fewer cases fail the cases left
    out: fitted on the default matrix alone, fused-host's fail 2 of the wide matrix's 8 (golden/README.md)."""
    path = os.path.join(args.golden_dir, f"{cls}.golden")
    # The same cases judged by another oracle tier (NAME@ORACLE) are not fewer cases.
    measured = {m.partition("@")[0] for m in (args.from_json or matrices)}
    missing = [m for m in recorded_matrices(path) if m.partition("@")[0] not in measured]
    if missing and not args.allow_fewer_matrices:
        raise Refusal(f"{path} was measured on {', '.join(missing)} too, which this run leaves out; bounds "
                      "fitted without them fail those cases. Run the command its header records:\n  "
                      + header(path)["text"] + "\nor pass --allow-fewer-matrices \"reason\"")
    return missing


def regenerate(args, run_mutants=True):
    """Measures (or reads the measurement files), proposes, diffs and checks; returns the golden text,
    the report and the golden's path, or raises Refusal. run_mutants False leaves out the `lcecheck
    check` runs of the class's mutants (reproduce: the committed goldens' kills are the mutants
    tests' job); mutant runs in measurement files are judged either way."""
    lcecheck = os.path.join(args.build, "lcecheck")
    matrices = args.matrix or ["default"]
    report = {"subject": args.subject, "matrix": matrices, "written": False}
    pol = load_policy(args.policy)
    mutant_runs, device = None, None
    if args.from_json:  # measured elsewhere (e.g. lcecheck production on the GPU): no lcecheck run here
        matrices = ["files " + ", ".join(os.path.basename(p) for p in args.from_json)]
        listing = {}
        meas, mutant_runs, device = load_measurement_files(args.from_json, args.subject)
        if args.arch and (device or {}).get("arch") != args.arch:
            raise Refusal(f"--arch {args.arch}, but the measurements were made on {(device or {}).get('arch')}")
    else:
        listing = run_json([lcecheck, "list", "--json"])
    # The class is known before measuring from the listing (or the files): refuse early, not after minutes.
    early = meas.get("golden_class") if args.from_json else next(
        (s.get("golden_class") for s in listing.get("subjects", []) if s.get("name") == args.subject), None)
    if early and not args.matrix and not args.from_json:
        # No --matrix: the matrices the class's golden records (its own command reruns), else default.
        recorded = recorded_matrices(os.path.join(args.golden_dir, f"{early}.golden"))
        if recorded:
            log(f"  no --matrix: measuring the matrices {early}.golden records: {', '.join(recorded)}")
            matrices = args.matrix = report["matrix"] = recorded
    missing = fewer_matrices(args, early, matrices) if early else None
    # measure exits 1 when a case fails a class check or errors; the JSON says which, and
    # collect_measurements refuses with the details. Several matrices: their cases are pooled.
    for spec in ([] if args.from_json else matrices):
        m = run_json([lcecheck, "measure", "--subject", args.subject] + matrix_args(spec) + ["--json"],
                     ok_codes=(0, 1), jobs=args.jobs)
        if spec == matrices[0]:
            meas = m
        else:
            meas["cases"] = meas.get("cases", []) + m.get("cases", [])
    cls = meas.get("golden_class")
    report["golden_class"] = cls
    samples = collect_measurements(meas)
    new, worst, above_ceiling = propose(pol, samples)
    golden_path = os.path.join(args.golden_dir, f"{cls}.golden")
    old = load_golden(golden_path)
    missing = fewer_matrices(args, cls, matrices) if missing is None else missing
    old_entries = {k: v for k, v in (old or {"entries": {}})["entries"].items() if k[0] == cls}
    rows = diff_entries(old_entries, new, samples, worst)
    report["diff"] = rows
    if not args.json:
        print(f"golden {golden_path} ({'exists' if old else 'new file'}), class {cls}, "
              f"matrix {', '.join(matrices)}, {len(meas['cases'])} cases")
        print_diff(rows, worst)
    if above_ceiling:
        raise Refusal("bounds above the analytic ceiling (golden/policy.txt):\n  " + "\n  ".join(above_ceiling))
    loosened = [" ".join(r["key"]) + f" ({r['change']})" for r in rows if r["change"] in ("looser", "removed")]
    if loosened and not args.allow_loosen:
        raise Refusal("refusing to loosen or drop existing bounds without --allow-loosen \"reason\":\n  "
                      + "\n  ".join(loosened))
    provenance = [
        f"generator: {generator_command(args, REPO)}",
        (f"measured by: lcecheck (JSON files {', '.join(os.path.basename(p) for p in args.from_json)})"
         if args.from_json else f"measured by: {repo_relative(lcecheck, REPO)} measure --subject {args.subject} "
         + " and ".join(shlex.join(matrix_args(spec)) for spec in matrices) + " --json"),
        f"matrix: {', '.join(matrices)} ({len(meas['cases'])} cases), seeds {seed_summary(meas)}",
        f"policy: {os.path.relpath(args.policy, REPO)} (margins and analytic ceilings)",
        f"MPFR: {mpfr_version(listing, args.build)}",
        f"commit: {git_commit(REPO)}",
        f"date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}",
        "device: " + (", ".join(f"{k} {v}" for k, v in device.items()) if device
                      else gpu_identity(args.arch) if args.arch
                      else os.environ.get("LCE_GOLDEN_DEVICE", "host (fused-host emulation)")),
    ]
    if loosened:
        provenance.append(f"loosened ({', '.join(loosened)}): {args.allow_loosen}")
    if missing:
        provenance.append(f"fewer matrices than before (without {', '.join(missing)}): {args.allow_fewer_matrices}")
    if args.allow_no_mutants:
        provenance.append(f"no mutants checked: {args.allow_no_mutants}")
    text = format_golden(new, provenance)
    with tempfile.TemporaryDirectory(prefix="lcecheck-golden-") as tmpdir:
        candidate = os.path.join(tmpdir, f"{cls}.golden")
        with open(candidate, "w", encoding="utf-8") as f:
            f.write(text)
        checks = mutant_runs is not None or run_mutants  # reproduce compares the text only
        log(f"candidate written to {candidate}" + (f"; checking the mutants of class {cls}" if checks else ""))
        if mutant_runs is not None and (any(r.get("golden_class") == cls for r in mutant_runs) or not args.allow_no_mutants):
            report["mutants"] = check_mutant_runs(cls, mutant_runs, new)
            if not report["mutants"]:
                raise Refusal(f"the measurement files hold no mutant run of class {cls}")
        elif mutant_runs is not None:
            log(f"  class {cls} has no mutants: {args.allow_no_mutants}")
            report["mutants"] = []
        elif run_mutants:
            report["mutants"] = check_mutants(lcecheck, listing, cls, matrices, candidate, args.allow_no_mutants,
                                              args.jobs)
    report["golden"] = golden_path
    return text, report, new


def cmd_regen(args):
    text, report, new = regenerate(args)
    golden_path = report["golden"]
    if args.stage:  # diffed against the golden directory, written beside it for a later install
        golden_path = report["golden"] = os.path.join(args.stage, os.path.basename(golden_path))
    if args.write:
        write_atomically(golden_path, text)
        report["written"] = True
    if args.json:
        print(json.dumps(report, indent=2))
    elif args.write:
        print(f"wrote {golden_path} ({len(new)} entries)")
    else:
        print(f"not written (dry run): pass --write to replace {golden_path}; it would read:\n{text}", end="")
    return 0


def cmd_show(args):
    paths = sorted(os.path.join(args.golden_dir, f) for f in os.listdir(args.golden_dir)
                   if f.endswith(".golden"))
    rows = []
    for p in paths:
        g = load_golden(p)
        for key in sorted(g["entries"], key=entry_order):
            form, a, b, c, terms = g["entries"][key]
            rows.append({"file": os.path.relpath(p, REPO), "class": key[0], "dtype": key[1], "output": key[2],
                         "metric": key[3], "form": form, "a": a, "b": b, "c": c, "terms": dict(terms)})
    missing = [c for c in args.require if not os.path.exists(os.path.join(args.golden_dir, f"{c}.golden"))]
    if args.json:
        print(json.dumps({"goldens": rows, "missing": missing}, indent=2))
    else:
        print(f"{'class':<12} {'dtype':<5} {'output':<11} {'metric':<9} {'form':<7} constants (model: term=coef)")
        for r in rows:
            consts = (" ".join(f"{t}={v:.3e}" for t, v in r["terms"].items()) if r["form"] == "model"
                      else f"a={r['a']:.3e} b={r['b']:.3e} c={r['c']:.3e}")
            print(f"{r['class']:<12} {r['dtype']:<5} {r['output']:<11} {r['metric']:<9} {r['form']:<7} {consts}")
        print(f"{len(rows)} entries in {len(paths)} files under {args.golden_dir}")
    if missing:
        raise Refusal("missing golden files (a missing golden is an error): " + ", ".join(missing))
    load_policy(args.policy)
    return 0


def cmd_reproduce(args):
    """Reruns the command each golden's header records (without writing) and compares: every entry
    bit for bit and the generator line itself. --command-only checks the command is complete (it
    names every option that shapes the file) without measuring anything."""
    paths = args.golden or sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(REPO, "golden"))
                                  for f in fs if f.endswith(".golden"))
    paths = [os.path.abspath(p) for p in paths]
    build = os.path.abspath(args.build)
    os.chdir(REPO)  # the recorded commands run from the repository root, and name paths from there
    failed, skipped = [], []
    for path in paths:
        where = os.path.relpath(path, REPO)
        h = header(path)
        try:
            rec = parse_args(h["generator"])
        except SystemExit:
            failed.append(f"{where}: the generator does not parse: {h['text']}")
            continue
        problems = command_problems(path, h, rec, REPO)
        if problems or args.command_only:
            failed += [f"{where}: {p}" for p in problems]
            log(f"{where}: command {'incomplete' if problems else 'complete'}: {h['text']}")
            continue
        if rec.arch and not rec.from_json:  # measured here: only on a GPU of that architecture
            try:
                gpu_identity(rec.arch)
            except (Refusal, ToolError) as e:  # no GPU, or one of another architecture
                skipped.append(f"{where}: {e}")
                continue
        rec.build, rec.jobs, rec.json = build, args.jobs, False
        rec.allow_loosen = "reproduce: compared with the file, nothing written"  # a looser entry is a difference
        log(f"{where}: rerunning its generator: {h['text']}")
        try:
            text, _, _ = regenerate(rec, run_mutants=False)
        except Refusal as e:
            failed.append(f"{where}: its generator refuses now: {e}")
            continue
        with tempfile.TemporaryDirectory(prefix="lcecheck-reproduce-") as tmp:
            write_atomically(os.path.join(tmp, "g.golden"), text)
            now = load_golden(os.path.join(tmp, "g.golden"))["entries"]
        was = load_golden(path)["entries"]
        differ = [" ".join(k) for k in sorted(set(was) | set(now), key=entry_order) if was.get(k) != now.get(k)]
        if differ:
            failed.append(f"{where}: {len(differ)} entries differ from a fresh run of its generator: "
                          + ", ".join(differ[:8]) + (" ..." if len(differ) > 8 else ""))
        else:
            log(f"{where}: reproduced: {len(was)} entries bit for bit")
    for s in skipped:
        log(f"skipped (needs its GPU): {s}")
    if failed:
        raise Refusal("goldens not reproduced by the command in their header:\n  " + "\n  ".join(failed))
    if skipped and len(skipped) == len(paths):
        return 77  # nothing could be rerun on this machine (ctest's skip code)
    done = len(paths) - len(skipped)
    print(f"{done} golden{'s' if done != 1 else ''}: "
          + ("every generator command complete" if args.command_only else "reproduced by their generator")
          + (f"; {len(skipped)} skipped for want of their GPU" if skipped else ""))
    return 0


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    # The options of the golden set, accepted before the verb and (as older goldens recorded them)
    # after it; the later word wins.
    where = argparse.ArgumentParser(add_help=False)
    for sup, parser in ((None, ap), (argparse.SUPPRESS, where)):
        parser.add_argument("--golden-dir", default=sup, help="directory of *.golden (default golden/, or golden/<arch>/)")
        parser.add_argument("--policy", default=sup, help="policy file (default policy.txt in the golden directory)")
        parser.add_argument("--arch", default=sup, help="GPU architecture of the goldens, e.g. sm_90 (GPU subjects)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("regen", parents=[where], help="measure, propose bounds, check ceilings and mutants, write")
    r.add_argument("--subject", required=True)
    r.add_argument("--from-json", action="append", metavar="FILE",
                   help="measurements made elsewhere (lcecheck production/measure --json; repeatable), mutant "
                        "runs in them judged offline")
    r.add_argument("--matrix", action="append", metavar="NAME[@ORACLE]",
                   help="matrix to measure (repeatable, pooled; default: the matrices the golden records, "
                        "else default)")
    r.add_argument("--build", default=os.path.join(REPO, "build"), help="directory holding lcecheck")
    r.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="run each matrix (measure, and check for the mutants) as N lcecheck shards at once, "
                        "the cores shared out among them; the result is the same as with 1 (default 1)")
    r.add_argument("--write", action="store_true", help="replace golden/<class>.golden")
    r.add_argument("--stage", metavar="DIR",
                   help="write the golden into DIR instead (a GPU machine's results, installed later); the file "
                        "is diffed against, and records, the golden directory")
    r.add_argument("--allow-loosen", metavar="REASON", help="permit looser or dropped bounds; recorded")
    r.add_argument("--allow-no-mutants", metavar="REASON",
                   help="a class without mutants (a baseline such as unfused-cuda); recorded")
    r.add_argument("--allow-fewer-matrices", metavar="REASON",
                   help="measure fewer matrices than the golden records (its bounds then fail the cases left "
                        "out); recorded")
    r.add_argument("--json", action="store_true")
    s = sub.add_parser("show", help="print the committed goldens as a table")
    s.add_argument("--json", action="store_true")
    s.add_argument("--require", action="append", default=[], metavar="CLASS",
                   help="fail when golden/CLASS.golden is missing (repeatable)")
    j = sub.add_parser("judge", parents=[where],
                       help="judge measurements made elsewhere against the committed goldens (out of sample)")
    j.add_argument("--from-json", action="append", required=True, metavar="FILE",
                   help="lcecheck production/measure --json output (repeatable)")
    j.add_argument("--subject", action="append", metavar="S", help="only the runs of S (repeatable)")
    j.add_argument("--json", action="store_true")
    p = sub.add_parser("reproduce", help="rerun each golden's recorded generator and compare its entries")
    p.add_argument("golden", nargs="*", help="golden files (default: every *.golden under golden/)")
    p.add_argument("--command-only", action="store_true",
                   help="only check that each recorded command is complete; measure nothing")
    p.add_argument("--build", default=os.path.join(REPO, "build"), help="directory holding lcecheck")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="as for regen")
    p.add_argument("--json", action="store_true", help="print refusals as JSON")
    return ap


def parse_args(argv):
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.arch is not None and not re.fullmatch(r"sm_[0-9]{2,3}", args.arch):
        ap.error(f"--arch wants sm_XY (e.g. sm_90), got '{args.arch}'")
    if getattr(args, "jobs", 1) < 1:
        ap.error(f"--jobs wants a count of at least 1, got {args.jobs}")
    if args.golden_dir is None:
        args.golden_dir = os.path.join(REPO, "golden", *([args.arch] if args.arch else []))
    if args.policy is None:
        args.policy = os.path.join(args.golden_dir, "policy.txt")
    args.golden_dir, args.policy = os.path.abspath(args.golden_dir), os.path.abspath(args.policy)
    return args


def main(argv=None):
    args = parse_args(argv)
    verbs = {"regen": cmd_regen, "show": cmd_show, "judge": cmd_judge, "reproduce": cmd_reproduce}
    return run_verb("lcecheck_golden", verbs[args.cmd], args)


if __name__ == "__main__":
    sys.exit(main())
