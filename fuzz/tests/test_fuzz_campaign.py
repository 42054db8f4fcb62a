#!/usr/bin/env python3
"""test_fuzz_campaign.py — scripts/fuzz_campaign.py kill-table against fake_fuzzer.py: every
subject gets one campaign; the table says who was found, with the case and the failing output and
metric furthest over its bound; a surviving mutant or a found fused-host fails the table; --record
appends a dated section with the commit, the command and the table."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent.parent / "scripts" / "fuzz_campaign.py"


class KillTable(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="lce_fuzz_campaign_"))
        build = self.tmp / "build"
        build.mkdir()
        for name in ("fuzz_subject", "lcecheck"):
            shutil.copy(HERE / "fake_fuzzer.py", build / name)
            (build / name).chmod(0o755)
        self.build = build

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def kill_table(self, mutants, kills, record=None):
        env = dict(os.environ, FAKE_MUTANTS=",".join(mutants), FAKE_FUZZ_KILLS=",".join(kills))
        cmd = [sys.executable, str(SCRIPT), "kill-table", "--seconds", "5", "--json",
               "--build", str(self.build), "--lcecheck", str(self.build / "lcecheck"),
               "--findings-root", str(self.tmp / "findings")]
        if record:
            cmd += ["--record", str(record)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        return proc.returncode, json.loads(proc.stdout)["rows"]

    def test_all_mutants_found_and_host_clean(self):
        rc, rows = self.kill_table(["mutant/a", "mutant/b"], ["mutant/a", "mutant/b"])
        self.assertEqual(rc, 0)
        self.assertEqual([r["subject"] for r in rows], ["fused-host", "mutant/a", "mutant/b"])
        host, a = rows[0], rows[1]
        self.assertFalse(host["found"])
        self.assertEqual(host["executions"], 1000)
        self.assertTrue(a["found"] and a["ok"])
        self.assertEqual(a["executions"], 7)
        self.assertLessEqual(a["seconds_to_finding"], a["seconds_run"])
        self.assertEqual(a["finding"], "d_hidden: ulpfrac 3.5, bound 1 (350% of budget)")
        self.assertTrue(a["finding_case"].startswith("bf16.untied"))

    def test_survivor_and_found_host_fail_the_table(self):
        rc, rows = self.kill_table(["mutant/a", "mutant/survivor"], ["fused-host", "mutant/a"])
        self.assertEqual(rc, 1)
        by = {r["subject"]: r for r in rows}
        self.assertFalse(by["fused-host"]["ok"])
        self.assertFalse(by["mutant/survivor"]["ok"] or by["mutant/survivor"]["found"])
        self.assertTrue(by["mutant/a"]["ok"])

    def test_record_appends_dated_section(self):
        log = self.tmp / "CAMPAIGNS.md"
        log.write_text("# Recorded fuzz campaigns\n")
        self.kill_table(["mutant/a", "mutant/survivor"], ["mutant/a"], record=log)
        text = log.read_text()
        self.assertTrue(text.startswith("# Recorded fuzz campaigns\n"), "the log was not appended to")
        self.assertRegex(text, r"\n## \d{4}-\d\d-\d\d \d\d:\d\d UTC — kill table \(commit \w+")
        self.assertIn("kill-table --seconds 5", text)
        self.assertIn("1 of 2 mutants found within 5 s each; fused-host: no finding", text)
        self.assertRegex(text, r"\| mutant/a \| yes \| [\d.]+ \| 7 \| ok \| `bf16\.untied[^`]*` \| "
                               r"d_hidden: ulpfrac 3\.5, bound 1 \(350% of budget\) \|")
        self.assertRegex(text, r"\| mutant/survivor \| no \| - \| 1000 \| NOT FOUND \|")

    def test_gpu_subject_without_gpu_is_skipped_not_clean(self):
        env = dict(os.environ, FAKE_NEEDS_GPU="fused-cuda")
        proc = subprocess.run([sys.executable, str(SCRIPT), "run", "--subject", "fused-cuda", "--seconds", "5",
                               "--json", "--build", str(self.build), "--findings-root", str(self.tmp / "findings")],
                              env=env, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 77, proc.stderr)
        r = json.loads(proc.stdout)
        self.assertTrue(r["skipped"])
        self.assertFalse(r["found"])
        self.assertTrue(r["error"].startswith("skipped: the subject needs a GPU"))


if __name__ == "__main__":
    unittest.main()
