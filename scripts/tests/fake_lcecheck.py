#!/usr/bin/env python3
"""fake_lcecheck.py — stands in for build/lcecheck in the golden-regeneration tests.

Reads its behaviour from the JSON file named by $FAKE_LCECHECK_CONFIG:
  {"list": <list --json answer>, "measure": <measure --json answer, whose outputs may carry "cond"
              as the real CLI prints it; leaving it out stands for an older CLI (cond taken as 1)>,
   "check_rc": {"<mutant name>": <exit code of check for it (default 1: a failing case)>},
   "check_status": {"<mutant name>": <status of its cases when check_rc is not 0 (default "fail")>}}
and appends every invocation (argv, plus the golden file's text for check) to $FAKE_LCECHECK_LOG,
one JSON object per line, so that tests can see what the script ran."""
import json
import os
import sys


def main(argv):
    with open(os.environ["FAKE_LCECHECK_CONFIG"], encoding="utf-8") as f:
        cfg = json.load(f)
    entry = {"argv": argv}
    verb = argv[0] if argv else ""
    rc = 0
    if verb == "list":
        print(json.dumps(cfg["list"]))
    elif verb == "measure":  # like the CLI: exit 1 when a case failed or errored
        print(json.dumps(cfg["measure"]))
        rc = 1 if any(c["status"] in ("fail", "error") for c in cfg["measure"]["cases"]) else 0
    elif verb == "check":
        subject = argv[argv.index("--subject") + 1]
        golden = argv[argv.index("--golden") + 1]
        with open(golden, encoding="utf-8") as f:
            entry["golden_text"] = f.read()
        rc = cfg.get("check_rc", {}).get(subject, 1)
        status = "pass" if rc == 0 else cfg.get("check_status", {}).get(subject, "fail")
        cases = [{"id": c["id"], "status": status} for c in cfg["measure"]["cases"]]
        print(json.dumps({"verb": "check", "subject": subject, "cases": cases}))
    else:
        print(f"fake lcecheck: unknown verb {verb!r}", file=sys.stderr)
        rc = 2
    with open(os.environ["FAKE_LCECHECK_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
