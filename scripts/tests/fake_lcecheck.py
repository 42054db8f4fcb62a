#!/usr/bin/env python3
"""fake_lcecheck.py — stands in for build/lcecheck in the golden-regeneration tests.

Reads its behaviour from the JSON file named by $FAKE_LCECHECK_CONFIG:
  {"list": <list --json answer>, "measure": <measure --json answer, whose outputs may carry "cond"
              as the real CLI prints it; leaving it out stands for an older CLI (cond taken as 1)>,
   "check_rc": {"<mutant name>": <exit code of check for it (default 1: a failing case)>},
   "check_status": {"<mutant name>": <status of its cases when check_rc is not 0 (default "fail")>},
   "check_fail_outputs": {"<mutant name>": [outputs that fail in its failing cases (default: all)]},
   "shard_check_rc": {"<mutant name>": {"I/N": <exit code of that shard; the other shards pass>}},
   "shard_rc": {"I/N": <exit code of that shard of measure and check, with a message on stderr>}}
and appends every invocation (argv, OMP_NUM_THREADS, plus the golden file's text for check) to
$FAKE_LCECHECK_LOG, one JSON object per line, so that tests can see what the script ran.
--shard I/N keeps the cases whose index is I modulo N and adds "shard" to the JSON, as lcecheck does;
measure prints lcecheck's per-case progress lines ("[   k/n] status id ...") on stderr."""
import json
import os
import sys

OUTPUTS = ("loss", "loss_token", "lse", "d_hidden", "d_weight", "d_embedding")


def main(argv):
    with open(os.environ["FAKE_LCECHECK_CONFIG"], encoding="utf-8") as f:
        cfg = json.load(f)
    entry = {"argv": argv, "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    verb = argv[0] if argv else ""
    rc = 0
    shard = argv[argv.index("--shard") + 1] if "--shard" in argv else None
    cases = cfg["measure"]["cases"]
    if shard:
        index, count = map(int, shard.split("/"))
        cases = [c for i, c in enumerate(cases) if i % count == index]
    if verb == "list":
        print(json.dumps(cfg["list"]))
    elif verb == "measure":  # like the CLI: exit 1 when a case failed or errored; progress on stderr
        for k, c in enumerate(cases):
            print(f"[{k + 1:4d}/{len(cases)}] {c['status']:<5} {c['id']}  measured", file=sys.stderr)
        print(json.dumps(dict(cfg["measure"], cases=cases, **({"shard": shard} if shard else {}))))
        rc = 1 if any(c["status"] in ("fail", "error") for c in cases) else 0
    elif verb == "check":
        subject = argv[argv.index("--subject") + 1]
        golden = argv[argv.index("--golden") + 1]
        with open(golden, encoding="utf-8") as f:
            entry["golden_text"] = f.read()
        by_shard = cfg.get("shard_check_rc", {}).get(subject)
        rc = by_shard.get(shard, 0) if by_shard is not None else cfg.get("check_rc", {}).get(subject, 1)
        status = "pass" if rc == 0 else cfg.get("check_status", {}).get(subject, "fail")
        failing = cfg.get("check_fail_outputs", {}).get(subject, list(OUTPUTS)) if status == "fail" else []
        cases = [{"id": c["id"], "status": status, "outputs": {o: {"pass": o not in failing} for o in OUTPUTS}}
                 for c in cases]
        print(json.dumps({"verb": "check", "subject": subject, "cases": cases}))
    else:
        print(f"fake lcecheck: unknown verb {verb!r}", file=sys.stderr)
        rc = 2
    if shard in cfg.get("shard_rc", {}):
        print(f"fake lcecheck: shard {shard} broke", file=sys.stderr)
        rc = cfg["shard_rc"][shard]
    with open(os.environ["FAKE_LCECHECK_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
