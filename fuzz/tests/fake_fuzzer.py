#!/usr/bin/env python3
"""fake_fuzzer.py — stands in for fuzz_subject (and, called as `... list --json`, for lcecheck)
in test_fuzz_campaign.py, so the campaign script's table and record are tested without clang.

As the fuzzer: prints libFuzzer's start line; for a subject named in $FAKE_FUZZ_KILLS (comma
separated) writes a .finding file the way lce_fuzz_session.c does and exits like a trap; otherwise
"runs out of time" at once; for one in $FAKE_NEEDS_GPU exits 77 before starting, as the harness
does for a GPU subject on a machine without a GPU. Either way it prints the final-stats line the script reads.

Called under another name (a parser target) or with -fork=N/-jobs=N (`run --target`): appends its
arguments as one JSON line to $FAKE_ARGV_LOG; with -jobs=N writes N job logs fuzz-<i>.log (400
executions each) and ends; otherwise prints fork-mode status lines, writes one new input into
the first corpus directory and, for a target or subject in $FAKE_FUZZ_KILLS, a crash-<sha1> artifact
(and for fuzz_subject the harness's .finding/.input pair); with $FAKE_ABORT it prints that message
and aborts before the seed line, as a harness that cannot start does. With -merge=1 it copies every
input of the other directories not yet in the first one there."""
import hashlib
import json
import os
import sys
import time


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


def flags_and_dirs(argv):
    flags = dict(a[1:].split("=", 1) for a in argv if a.startswith("-") and "=" in a)
    return flags, [a for a in argv if not a.startswith("-")]


def merge(dirs):
    present = {open(os.path.join(dirs[0], f), "rb").read() for f in os.listdir(dirs[0])}
    added = 0
    for d in dirs[1:]:
        for f in sorted(os.listdir(d)):
            data = open(os.path.join(d, f), "rb").read()
            if data not in present:
                present.add(data)
                added += 1
                with open(os.path.join(dirs[0], hashlib.sha1(data).hexdigest()), "wb") as out:
                    out.write(data)
    print(f"MERGE-OUTER: {added} new files with 9 new features added; 5 new coverage edges")
    return 0


def target_fuzzer(name, flags, dirs):
    if "jobs" in flags:  # libFuzzer's -jobs: one fuzz-<i>.log per job in the working directory
        for i in range(int(flags["jobs"])):
            with open(f"fuzz-{i}.log", "w") as log:
                log.write("INFO: Seed: 1\n#300\tNEW    cov: 30 ft: 41 corp: 5/90b lim: 4 exec/s: 300 rss: 30Mb\n"
                          "Done 400 runs in 1 second(s)\nstat::number_of_executed_units: 400\n")
        print("Done 400 runs in 1 second(s)\nstat::number_of_executed_units: 400")  # the last job's log, repeated
        return 0
    print("INFO: Seed: 1", flush=True)
    print("#100: cov: 12 ft: 20 corp: 3 exec/s 100 oom/timeout/crash: 0/0/0 time: 1s job: 1 dft_time: 0", flush=True)
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    with open(os.path.join(dirs[0], "new-input"), "wb") as f:
        f.write(b"new " + name.encode())
    subject = os.environ.get("LCE_FUZZ_SUBJECT", "")
    if {name, subject} & set(os.environ.get("FAKE_FUZZ_KILLS", "").split(",")) - {""}:
        data = b"crashing input of " + name.encode()
        with open(flags["artifact_prefix"] + "crash-" + hashlib.sha1(data).hexdigest(), "wb") as f:
            f.write(data)
        if name == "fuzz_subject":
            case = "fp32.tied.tp1.n4.h8.v64.vp64.vc16.sum.ign0.fresh.mixed.s7"
            findings = os.environ["LCE_FUZZ_FINDINGS"]
            with open(os.path.join(findings, case + ".input"), "wb") as f:
                f.write(data)
            with open(os.path.join(findings, case + ".finding"), "w") as f:
                f.write(f"lce-fuzz violation: verdict fail\ncase: {case}\nsubject: {subject} (golden g)\n"
                        "summary: FAIL loss\n  loss: relerr 4, bound 1 (400% of budget)\n")
    print("#5000: cov: 40 ft: 60 corp: 7 exec/s 2500 oom/timeout/crash: 0/0/1 time: 2s job: 2 dft_time: 0")
    print("INFO: fuzzed for 2 seconds, wrapping up soon\nINFO: exiting: 0 time: 2s")
    return 0


def lcecheck():
    names = ["fused-host"] + [s for s in os.environ["FAKE_MUTANTS"].split(",") if s]
    print('{"verb":"list","subjects":[' + ",".join('{"name":"%s"}' % n for n in names) + "]}")
    return 0


def main():
    if sys.argv[1:2] == ["list"]:
        return lcecheck()
    name = os.path.basename(sys.argv[0])
    flags, dirs = flags_and_dirs(sys.argv[1:])
    if os.environ.get("FAKE_ARGV_LOG"):
        with open(os.environ["FAKE_ARGV_LOG"], "a") as f:
            f.write(json.dumps({"target": name, "argv": sys.argv[1:], "cwd": os.getcwd()}) + "\n")
    if flags.get("merge") == "1":
        return merge(dirs)
    if os.environ.get("FAKE_ABORT"):
        print("INFO: Running with entropic power schedule (0xFF, 100).")
        print(os.environ["FAKE_ABORT"], flush=True)
        os.abort()
    if name != "fuzz_subject" or "fork" in flags or "jobs" in flags:
        return target_fuzzer(name, flags, dirs)
    return fuzzer()


if __name__ == "__main__":
    sys.exit(main())
