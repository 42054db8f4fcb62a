#!/usr/bin/env python3
"""test_fuzz_campaign.py — scripts/fuzz_campaign.py kill-table against fake_fuzzer.py: every
subject gets one campaign; the table says who was found, with the case and the failing output and
metric furthest over its bound; a surviving mutant or a found fused-host fails the table; --record
appends a dated section with the commit, the command and the table. Options are validated (usage
error, exit 2, naming the option); a fuzzer that cannot start shows why. `run --target` runs each
target with its .options and seed corpus over --jobs cores, prints progress and a table, merges the
working corpus into a fresh directory (the seed corpus only with --update-seeds) and triages each
finding into a regression input, a repro line and a --record entry."""
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent.parent / "scripts" / "fuzz_campaign.py"


REPO = HERE.parent.parent
# Every target the tree has: the subject and tier harnesses and one per fuzz/parsers/*.options (the
# script derives its list the same way; a parser target added there is covered here without an edit).
PARSERS = sorted(p.stem for p in (REPO / "fuzz" / "parsers").glob("fuzz_parse_*.options"))
TARGETS = ["fuzz_subject", "fuzz_tiers"] + PARSERS


class FakeBuild(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="lce_fuzz_campaign_"))
        build = self.tmp / "build"
        build.mkdir()
        for name in ["lcecheck"] + TARGETS:
            shutil.copy(HERE / "fake_fuzzer.py", build / name)
            (build / name).chmod(0o755)
        self.build = build

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def script(self, *args, **env):
        cmd = [sys.executable, str(SCRIPT), *args]
        if args[0] != "targets":
            cmd += ["--findings-root", str(self.tmp / "findings")]
        cmd += ["--build", str(self.build)]
        return subprocess.run(cmd, env=dict(os.environ, **env), capture_output=True, text=True)


class KillTable(FakeBuild):
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


class Options(FakeBuild):
    def test_numeric_options_are_validated(self):
        for args, option in ((["run", "--seconds", "0"], "--seconds"), (["run", "--seconds", "-5"], "--seconds"),
                             (["run", "--seconds", "5", "--target", "all", "--jobs", "0"], "--jobs"),
                             (["run", "--seconds", "5", "--max-len", "-1"], "--max-len"),
                             (["run", "--seconds", "5", "--unit-timeout", "0"], "--unit-timeout"),
                             (["run", "--seconds", "5", "--progress", "-1"], "--progress"),
                             (["run", "--seconds", "5", "--seed", "-2"], "--seed"),
                             (["kill-table", "--seconds", "0"], "--seconds")):
            proc = self.script(*args)
            self.assertEqual(proc.returncode, 2, args)
            self.assertIn(f"argument {option}:", proc.stderr, args)
        self.assertFalse((self.tmp / "findings").exists(), "a rejected command started a campaign")

    def test_target_that_cannot_start_says_why(self):
        why = "fuzz_parse_json: cannot open the dictionary (harness start-up)"
        for args in (["run", "--seconds", "5"], ["run", "--seconds", "5", "--target", "fuzz_parse_json", "--jobs", "1"]):
            proc = self.script(*args, FAKE_ABORT=why)
            self.assertEqual(proc.returncode, 2, args)
            self.assertIn("fuzzer did not start", proc.stderr)
            self.assertIn(why, proc.stderr, "the reason stayed in fuzzer.log")

    def test_gpu_subject_on_a_build_without_cuda_is_skipped(self):
        (self.build / "CMakeCache.txt").write_text("LCE_FUZZ_WITH_CUDA:BOOL=OFF\n")
        proc = self.script("run", "--seconds", "5", "--subject", "fused-cuda", "--json",
                           FAKE_ABORT="fuzz_subject: unknown subject 'fused-cuda' in LCE_FUZZ_SUBJECT")
        self.assertEqual(proc.returncode, 77, proc.stderr)
        self.assertIn("built without CUDA", json.loads(proc.stdout)["error"])
        proc = self.script("run", "--seconds", "5", "--subject", "fused-cuda", "--target", "fuzz_subject")
        self.assertEqual(proc.returncode, 77, proc.stderr)
        self.assertIn("built without CUDA", proc.stderr)


class Targets(FakeBuild):
    def run_targets(self, *args, **env):
        argv_log = self.tmp / "argv.jsonl"
        argv_log.unlink(missing_ok=True)
        proc = self.script("run", "--seconds", "3", "--jobs", "3", "--json", *args, FAKE_ARGV_LOG=str(argv_log), **env)
        calls = [json.loads(line) for line in argv_log.read_text().splitlines()] if argv_log.is_file() else []
        return proc, calls

    def test_targets_lists_every_target_with_its_options(self):
        proc = self.script("targets", "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = {r["target"]: r for r in json.loads(proc.stdout)["targets"]}
        self.assertEqual(sorted(rows), sorted(TARGETS))
        self.assertTrue(all(r["built"] and r["seeds"] > 0 for r in rows.values()))
        self.assertEqual(rows["fuzz_parse_case_id"]["libfuzzer"]["max_len"], "511")
        self.assertTrue(rows["fuzz_parse_json"]["libfuzzer"]["dict"].endswith("fuzz/parsers/fuzz_parse_json.dict"))

    def test_one_target_uses_its_options_corpus_and_cores_then_merges(self):
        seeds = REPO / "fuzz" / "corpus" / "parse_json"
        before = sorted(p.name for p in seeds.iterdir())
        proc, calls = self.run_targets("--target", "fuzz_parse_json", "--progress", "0.2", FAKE_SLEEP="0.7")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        fuzz, merge = calls
        self.assertIn("-fork=3", fuzz["argv"])
        self.assertIn("-max_len=65536", fuzz["argv"])
        self.assertIn("-timeout=10", fuzz["argv"])
        self.assertIn(f"-dict={REPO}/fuzz/parsers/fuzz_parse_json.dict", fuzz["argv"])
        self.assertEqual(fuzz["argv"][-1], str(seeds))
        self.assertRegex(proc.stderr, r"fuzz_parse_json: 100 execs, cov 12, corpus 3, findings 0, \d+ s left")
        r = json.loads(proc.stdout)["rows"][0]
        self.assertEqual((r["executions"], r["coverage"], r["corpus"], r["findings"]), (5000, 40, 7, []))
        self.assertIn("-merge=1", merge["argv"])
        merged = Path(r["merge"]["dir"])
        self.assertEqual(merged.name, "merged")
        self.assertEqual(r["merge"]["files"], len(before) + 1)
        self.assertEqual(sorted(p.name for p in seeds.iterdir()), before, "the seed corpus was written to")

    def test_a_list_of_targets_and_an_unknown_one(self):
        proc, calls = self.run_targets("--target", "fuzz_parse_npy,fuzz_parse_golden")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual([r["target"] for r in json.loads(proc.stdout)["rows"]], ["fuzz_parse_npy", "fuzz_parse_golden"])
        proc, _ = self.run_targets("--target", "fuzz_parse_nothing")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("unknown target fuzz_parse_nothing", proc.stderr)

    def test_jobs_mode(self):
        proc, calls = self.run_targets("--target", "fuzz_parse_npy", "--parallel", "jobs")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("-jobs=3", calls[0]["argv"])
        self.assertIn("-workers=3", calls[0]["argv"])
        r = json.loads(proc.stdout)["rows"][0]
        self.assertEqual((r["executions"], r["coverage"], r["corpus"]), (3 * 400, 30, 5), "executions not summed over jobs")

    def test_update_seeds_merges_into_the_seed_corpus(self):
        seeds = self.tmp / "seeds" / "parse_case_id"
        shutil.copytree(REPO / "fuzz" / "corpus" / "parse_case_id", seeds)
        n = sum(1 for _ in seeds.iterdir())
        proc, calls = self.run_targets("--target", "fuzz_parse_case_id", "--update-seeds",
                                       "--seed-root", str(self.tmp / "seeds"))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        fuzz, merge = calls[0]["argv"], calls[1]["argv"]
        self.assertEqual(fuzz[-1], str(seeds))
        self.assertEqual(merge[-2], str(seeds), "merge output is not the seed corpus")
        self.assertTrue(merge[-1].endswith("/corpus"))
        self.assertEqual(sum(1 for _ in seeds.iterdir()), n + 1)
        self.assertTrue(any(p.read_bytes() == b"new fuzz_parse_case_id" for p in seeds.iterdir()))

    def test_update_seeds_needs_a_target(self):
        proc = self.script("run", "--seconds", "5", "--update-seeds")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--update-seeds needs --target", proc.stderr)

    def test_findings_are_triaged_and_recorded(self):
        log = self.tmp / "CAMPAIGNS.md"
        proc, _ = self.run_targets("--target", "all", "--regressions", str(self.tmp / "reg"), "--record", str(log),
                                   FAKE_FUZZ_KILLS="fuzz_parse_npy,fused-host")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        rows = {r["target"]: r for r in json.loads(proc.stdout)["rows"]}
        self.assertEqual(sorted(rows), sorted(TARGETS))
        self.assertEqual([t for t, r in rows.items() if r["findings"]], ["fuzz_subject", "fuzz_parse_npy"])
        npy = rows["fuzz_parse_npy"]["findings"][0]
        self.assertEqual(Path(npy["regression"]).parent, self.tmp / "reg" / "fuzz_parse_npy")
        self.assertEqual(Path(npy["regression"]).read_bytes(), b"crashing input of fuzz_parse_npy")
        self.assertEqual(npy["repro"], f"{self.build}/fuzz_parse_npy {npy['regression']}")
        subj = rows["fuzz_subject"]["findings"][0]
        self.assertEqual(subj["case"], "fp32.tied.tp1.n4.h8.v64.vp64.vc16.sum.ign0.fresh.mixed.s7")
        self.assertEqual(subj["what"], "loss: relerr 4, bound 1 (400% of budget)")
        self.assertTrue(subj["repro"].startswith("LCE_FUZZ_SUBJECT=fused-host "))
        text = log.read_text()
        self.assertRegex(text, r"## \d{4}-\d\d-\d\d \d\d:\d\d UTC — targets campaign")
        self.assertIn("| fuzz_parse_npy | 5000 |", text)
        self.assertIn(f"repro `{npy['repro']}`", text)
        self.assertIn("case `fp32.tied", text)

    def test_deadline_shortens_and_kills(self):
        t0 = time.monotonic()
        proc, calls = self.run_targets("--target", "fuzz_parse_npy", "--seconds", "50", "--deadline", "12",
                                       FAKE_SLEEP="60")
        self.assertLess(time.monotonic() - t0, 40, "the deadline did not end the command")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("-max_total_time=9", calls[0]["argv"], "the target kept its --seconds past the deadline")
        r = json.loads(proc.stdout)["rows"][0]
        self.assertTrue(r["killed"])
        self.assertIn("killed at", proc.stderr)
        proc, calls = self.run_targets("--target", "fuzz_parse_npy,fuzz_parse_json", "--deadline", "1")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(calls, [], "a target ran that the deadline had no time for")
        self.assertTrue(all(r["error"].startswith("not run: --deadline") for r in json.loads(proc.stdout)["rows"]))

    def test_out_holds_what_comes_back(self):
        out = self.tmp / "results"
        proc, _ = self.run_targets("--target", "fuzz_parse_npy,fuzz_parse_json", "--out", str(out),
                                   FAKE_FUZZ_KILLS="fuzz_parse_npy")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(sorted(p.name for p in out.iterdir()),
                         ["fuzz-results.tar.gz", "regressions", "report.json", "report.md"])
        self.assertIn("| fuzz_parse_npy | 5000 |", (out / "report.md").read_text())
        self.assertEqual(len(json.loads((out / "report.json").read_text())["rows"]), 2)
        with tarfile.open(out / "fuzz-results.tar.gz") as tar:
            names = tar.getnames()
        self.assertTrue(any(n.startswith("regressions/fuzz_parse_npy/regression-crash-") for n in names), names)
        self.assertIn("corpora/fuzz_parse_json/" + hashlib.sha1(b"new fuzz_parse_json").hexdigest(), names)
        self.assertIn("report.md", names)


class PythonTarget(FakeBuild):
    """fuzz_parse_policy without a binary in --build: its harness under this interpreter (atheris)."""

    def test_repro_of_a_python_target_is_its_replay(self):
        sys.path.insert(0, str(REPO / "scripts"))
        import fuzz_targets
        script = fuzz_targets.TARGETS["fuzz_parse_policy"].script
        self.assertEqual(script, REPO / "fuzz" / "parsers" / "fuzz_parse_policy.py")
        self.assertEqual(fuzz_targets.repro_command("fuzz_parse_policy", ["py", script], "r"), ["py", script, "replay", "r"])
        self.assertEqual(fuzz_targets.repro_command("fuzz_parse_npy", ["b"], "r"), ["b", "r"])

    @unittest.skipUnless(importlib.util.find_spec("atheris"), "atheris is not installed (scripts/requirements.txt)")
    def test_harness_runs_with_progress_and_merge(self):
        (self.build / "fuzz_parse_policy").unlink()
        proc = self.script("targets", "--json")
        row = next(r for r in json.loads(proc.stdout)["targets"] if r["target"] == "fuzz_parse_policy")
        self.assertEqual(row["runner"], "python harness")
        proc = self.script("run", "--target", "fuzz_parse_policy", "--seconds", "3", "--jobs", "1", "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = json.loads(proc.stdout)["rows"][0]
        self.assertTrue(r["command"].startswith(f"{sys.executable} {REPO}/fuzz/parsers/fuzz_parse_policy.py -max_total_time=3"))
        self.assertGreater(r["executions"], 0)
        self.assertGreater(r["coverage"], 0)
        self.assertGreater(r["merge"]["files"], 0)


if __name__ == "__main__":
    unittest.main()
