#!/usr/bin/env python3
"""bias_table.py — the table of gpu_external.sh's `bias` stage: for each subject, the relative error and
the bias (⟨x − r, r⟩/⟨r, r⟩ against the fp64 GPU reference, as `lcecheck check|judge --json` reports
them) of d_hidden and of the weight gradient, at each n_valid the stage ran (the same shape, seed and
grad_output go, with no ignored label, so that n_valid = N, and with 5% ignored).

Beside them, for each n_valid, the two roundings a kernel folds into its bf16 d_logits under mean
reduction (DESIGN.md, "The 1/n_valid bias"): bf16(fp32(go/n))/(go/n) − 1 (torch, CCE, Megatron,
fused-cuda before the fix) and bf16(1/n)·n − 1 (Liger). Glue only: it reads and prints, it judges nothing.

    python3 scripts/subjects/bias_table.py RESULTS_DIR [--json FILE]

RESULTS_DIR holds, per tag T (ign0, ign5, ...): bias-T-SUBJECT.json (one `check` or `judge --json`
output per subject, one case each) and bias-T-grad_output.npy (the case's exported grad_output).
--json writes {"cases": [{tag, id, n_valid, go, fold_go_over_n, fold_one_over_n}], "rows": [{subject,
tag, n_valid, status, d_hidden: {relerr, bias}, d_weight: {relerr, bias}}]}, which
`scripts/plot_errors.py bias FILE` draws. Exit status: 0 done, 2 no or unreadable results."""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_exchange as lx  # noqa: E402

OUTPUTS = ("d_hidden", "d_weight")
NAME = re.compile(r"^bias-(?P<tag>[A-Za-z0-9]+)-(?P<subject>.+)\.json$")


class UsageError(Exception):
    pass


def fold_errors(go, n_valid):
    """(bf16(fp32(go/n))/(go/n) − 1, bf16(1/n)·n − 1): the relative roundings of the folded factors."""
    g = lx.round_to_format(go / n_valid, "float32")
    return (lx.round_to_format(g, "bfloat16") / (go / n_valid) - 1,
            lx.round_to_format(1.0 / n_valid, "bfloat16") * n_valid - 1)


def read_case(path):
    """The one case record of a check/judge --json file and its subject's name from the file."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: {e}")
    return lx.judged_case(d, os.path.basename(path))


def collect(results):
    files = sorted(f for f in glob.glob(os.path.join(results, "bias-*.json")) if NAME.match(os.path.basename(f)))
    if not files:
        raise UsageError(f"{results}: no bias-TAG-SUBJECT.json files")
    cases, rows = {}, []
    for path in files:
        m = NAME.match(os.path.basename(path))
        tag, subject = m.group("tag"), m.group("subject")
        c, why = read_case(path)
        row = {"subject": subject, "tag": tag, "n_valid": None, "status": why or c.get("status")}
        if c is not None and "n_valid" in c:
            row["n_valid"] = c["n_valid"]
            for out in OUTPUTS:
                o = c.get("outputs", {}).get(out, {})
                row[out] = {"relerr": o.get("relerr"), "bias": o.get("bias")}
            info = cases.setdefault(tag, {"tag": tag, "id": c.get("id"), "n_valid": c["n_valid"], "go": None,
                                          "fold_go_over_n": None, "fold_one_over_n": None})
            if info["n_valid"] != c["n_valid"] or info["id"] != c.get("id"):
                raise UsageError(f"{path}: case {c.get('id')} n_valid {c['n_valid']} differs from {info['id']} "
                                 f"n_valid {info['n_valid']} of another subject with tag {tag}")
        elif c is not None:
            row["status"] = f"{c.get('status')}: {c.get('message', '')}"
        rows.append(row)
    for tag, info in cases.items():
        npy = os.path.join(results, f"bias-{tag}-grad_output.npy")
        if os.path.exists(npy):
            _, _, data = lx.read_npy(npy)
            info["go"] = lx.decode("float32", data)[0]
            info["fold_go_over_n"], info["fold_one_over_n"] = fold_errors(info["go"], info["n_valid"])
    order = sorted(cases, key=lambda t: -cases[t]["n_valid"])
    rows.sort(key=lambda r: (r["subject"], order.index(r["tag"]) if r["tag"] in order else len(order)))
    return {"cases": [cases[t] for t in order], "rows": rows}


def cell(x, fmt):
    return "-" if x is None else format(x, fmt)


def print_table(d):
    print("bias of the gradients under mean reduction, against the fp64 GPU reference")
    for c in d["cases"]:
        n = c["n_valid"]
        kind = "a power of two" if n & (n - 1) == 0 else "not a power of two"
        print(f"  {c['tag']}: {c['id']}: n_valid {n} ({kind}); go {cell(c['go'], '.9g')}: "
              f"bf16(go/n)/(go/n) - 1 = {cell(c['fold_go_over_n'], '+.3e')}, "
              f"bf16(1/n)·n - 1 = {cell(c['fold_one_over_n'], '+.3e')}")
    print(f"\n{'subject':24} {'n_valid':>7} {'d_hidden relerr':>15} {'d_hidden bias':>13} "
          f"{'d_weight relerr':>15} {'d_weight bias':>13}  status")
    for r in d["rows"]:
        dh, dw = r.get("d_hidden", {}), r.get("d_weight", {})
        print(f"{r['subject']:24} {r['tag'] if r['n_valid'] is None else r['n_valid']:>7} {cell(dh.get('relerr'), '.3e'):>15} "
              f"{cell(dh.get('bias'), '+.3e'):>13} {cell(dw.get('relerr'), '.3e'):>15} "
              f"{cell(dw.get('bias'), '+.3e'):>13}  {r['status']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", metavar="RESULTS_DIR")
    ap.add_argument("--json", metavar="FILE", help="also write the table as JSON (plot_errors.py bias FILE)")
    args = ap.parse_args(argv)
    try:
        d = collect(args.results)
    except (UsageError, lx.ExchangeError) as e:
        print(f"bias_table.py: {e}", file=sys.stderr)
        return 2
    print_table(d)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(d, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
