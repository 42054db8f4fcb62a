#!/usr/bin/env python3
"""tier2_paths.py — tier 2's two comparisons of one subject against the same fp64 GPU reference must agree:
the host path (the reference copied back, lce_compare_block, elements it cannot certify left out) and the
device path (--on-device: lce_ref64_compare.cu reduces them there, leaving out the same elements). Runs

    LCECHECK check --subject SUBJECT --case CASE --oracle fp64-gpu [--on-device] --json --quiet

and compares, per output (lse, loss_token and the gradients), the elements judged and left inconclusive, the
metrics, and every scale the bounds use (the softmax-sum replay rsum; the gradients' rnd, rndn, outr, acc, pertok,
rnds, outv) to a relative 1e-6 (long double against fp64 sums in another order agree to ~1e-12).
Prints a table either way. Exit 77 when lcecheck does (no GPU, or a build without tier 2): ctest's skip.

usage: tier2_paths.py LCECHECK CASE [SUBJECT]"""
import json
import subprocess
import sys

OUTPUTS = ("lse", "loss_token", "d_hidden", "d_weight")
FIELDS = ("judged", "inconclusive", "relerr", "bias", "maxscaled", "rsum", "rnd", "rndn", "outr", "acc", "pertok",
          "rnds", "outv")


def run(lcecheck, case, subject, device):
    cmd = [lcecheck, "check", "--subject", subject, "--case", case, "--oracle", "fp64-gpu", "--json", "--quiet"]
    p = subprocess.run(cmd + (["--on-device"] if device else []), capture_output=True, text=True)
    if p.returncode == 77:
        print(f"skipped: {' '.join(cmd)} exited 77 ({p.stdout.strip()[:200]})")
        sys.exit(77)
    try:
        return json.loads(p.stdout)["cases"][0]["outputs"]
    except (ValueError, KeyError, IndexError):
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}, no case in its output:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")


def differ(a, b):
    if a is None or b is None:
        return a is not b
    return abs(a - b) > 1e-6 * max(abs(a), abs(b))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    lcecheck, case = sys.argv[1], sys.argv[2]
    subject = sys.argv[3] if len(sys.argv) == 4 else "fused-host"
    host, dev = run(lcecheck, case, subject, False), run(lcecheck, case, subject, True)
    bad = []
    print(f"{'output':10} {'field':12} {'host comparison':>18} {'device comparison':>18}")
    for out in OUTPUTS:
        for f in FIELDS:
            h, d = host.get(out, {}).get(f), dev.get(out, {}).get(f)
            if h is None and d is None:  # not a field of this output (lse has no rnd)
                continue
            mark = "  DIFFERS" if differ(h, d) else ""
            print(f"{out:10} {f:12} {h!s:>18} {d!s:>18}{mark}")
            if mark:
                bad.append(f"{out} {f}")
    if bad:
        sys.exit(f"tier 2's host and device comparisons differ on {case}: {', '.join(bad)}")
    print(f"tier 2's host and device comparisons agree on {case}")


if __name__ == "__main__":
    main()
