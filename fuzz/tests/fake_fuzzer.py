#!/usr/bin/env python3
"""fake_fuzzer.py — stands in for fuzz_subject (and, called as `... list --json`, for lcecheck)
in test_fuzz_campaign.py, so the campaign script's table and record are tested without clang.

As the fuzzer: prints libFuzzer's start line; for a subject named in $FAKE_FUZZ_KILLS (comma
separated) writes a .finding file the way lce_fuzz_session.c does and exits like a trap; otherwise
"runs out of time" at once; for one in $FAKE_NEEDS_GPU exits 77 before starting, as the harness
does for a GPU subject on a machine without a GPU. Either way it prints the final-stats line the script reads."""
import os
import sys


def fuzzer():
    subject = os.environ["LCE_FUZZ_SUBJECT"]
    findings = os.environ["LCE_FUZZ_FINDINGS"]
    if subject in os.environ.get("FAKE_NEEDS_GPU", "").split(","):  # the harness's start-up exit 77
        print(f"fuzz_subject: subject {subject} needs a GPU: no CUDA device; skipped (exit 77)", flush=True)
        return 77
    print("INFO: Seed: 1", flush=True)
    if subject in os.environ.get("FAKE_FUZZ_KILLS", "").split(","):
        case = "bf16.untied.tp1.n8.h16.v100.vp100.vc32.mean.ign10.fresh.mixed.s1"
        with open(os.path.join(findings, case + ".finding"), "w") as f:
            f.write(f"lce-fuzz violation: verdict fail\ncase: {case}\nsubject: {subject} (golden g)\n"
                    "summary: FAIL d_hidden ulpfrac 350% of budget\n"
                    "  d_hidden: relerr 1.2, bound 1 (120% of budget)\n"
                    "  d_hidden: ulpfrac 3.5, bound 1 (350% of budget)\n"
                    f"repro: build/lcecheck repro --subject {subject} {case}\n")
        print("==1== ERROR: libFuzzer: deadly signal\nstat::number_of_executed_units: 7")
        return 77
    print("Done 1000 runs in 1 second(s)\nstat::number_of_executed_units: 1000")
    return 0


def lcecheck():
    names = ["fused-host"] + [s for s in os.environ["FAKE_MUTANTS"].split(",") if s]
    print('{"verb":"list","subjects":[' + ",".join('{"name":"%s"}' % n for n in names) + "]}")
    return 0


if __name__ == "__main__":
    sys.exit(lcecheck() if sys.argv[1:2] == ["list"] else fuzzer())
