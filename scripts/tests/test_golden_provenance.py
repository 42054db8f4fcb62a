"""test_golden_provenance.py — what a golden records of the command that wrote it, and `reproduce`.

A golden's generator line must reproduce its entries bit for bit (scripts/lcecheck_golden_provenance.py):
these tests write goldens through the fake lcecheck (fake_lcecheck.py, as test_lcecheck_golden.py
does), rerun their recorded command with `reproduce`, and break the record or the measurement to see
both refused. Also: a run on fewer matrices than the golden records is refused, and long sweeps
report progress; a mutant must fail on the outputs the kill table names. Run: python3 -m unittest discover -s scripts/tests -v"""
import os
import subprocess
import sys
import unittest

import test_lcecheck_golden as base
from test_lcecheck_golden import CLASS, DEFAULT_CASES, POLICY, SCRIPT, case, lcecheck_golden

NO_MUTANTS = "a baseline, for the test"


class ProvenanceTest(unittest.TestCase):
    setUp, tearDown, configure = base.RegenTest.setUp, base.RegenTest.tearDown, base.RegenTest.configure
    regen, golden_path, assert_refused = base.RegenTest.regen, base.RegenTest.golden_path, base.RegenTest.assert_refused

    def reproduce(self, *extra):
        env = dict(os.environ, FAKE_LCECHECK_CONFIG=self.config_path, FAKE_LCECHECK_LOG=self.log_path)
        argv = [sys.executable, SCRIPT, "reproduce", "--build", self.build] + list(extra) + [self.golden_path()]
        return subprocess.run(argv, capture_output=True, text=True, env=env)

    def generator(self):
        return lcecheck_golden.header(self.golden_path())["text"]

    def test_generator_names_every_option_that_shapes_the_file(self):
        self.configure(mutants=())
        p = self.regen("--write", "--matrix", "default", "--matrix", "case=X", "--jobs", "2",
                       "--allow-no-mutants", NO_MUTANTS)
        self.assertEqual(p.returncode, 0, p.stderr)
        gen = self.generator()
        for needle in (f"--golden-dir {self.golden_dir} --policy golden/policy.txt regen --subject {CLASS}",
                       "--matrix default --matrix case=X", f"--allow-no-mutants '{NO_MUTANTS}'"):
            self.assertIn(needle, gen)
        self.assertNotIn("--jobs", gen)
        self.assertNotIn("--build", gen)
        self.assertEqual(self.reproduce("--command-only").returncode, 0)

    def test_reproduce_reruns_the_generator_and_compares_every_entry(self):
        self.assertEqual(self.regen("--write").returncode, 0)
        p = self.reproduce()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("reproduced:", p.stderr)
        self.assertIn("reproduced by their generator", p.stdout)
        # The subject changed: the same command no longer gives this file (a tighter d_hidden relerr).
        self.configure(cases=[case(c["id"], c["dtype"], d_hidden_relerr=1e-3) for c in DEFAULT_CASES])
        p = self.reproduce()
        self.assert_refused(p, "entries differ from a fresh run of its generator: fused-host bf16 d_hidden relerr")

    def test_incomplete_generator_is_named(self):
        self.configure(mutants=())
        self.assertEqual(self.regen("--write", "--allow-no-mutants", NO_MUTANTS).returncode, 0)
        text = lcecheck_golden.read_text(self.golden_path())
        with open(self.golden_path(), "w") as f:  # the record a golden kept before: the reason left out
            f.write(text.replace(f" --allow-no-mutants '{NO_MUTANTS}'", ""))
        p = self.reproduce("--command-only")
        self.assert_refused(p, f"the file records 'no mutants checked: {NO_MUTANTS}', the command passes "
                               "--allow-no-mutants None")
        with open(self.golden_path(), "w") as f:
            f.write(text.replace("--policy golden/policy.txt ", ""))
        self.assert_refused(self.reproduce("--command-only"), "(--policy missing or wrong)")

    def test_fewer_matrices_than_recorded_are_refused_before_measuring(self):
        self.assertEqual(self.regen("--write", "--matrix", "default", "--matrix", "smoke").returncode, 0)
        p = self.regen("--write", "--matrix", "default")
        self.assert_refused(p, "was measured on smoke too, which this run leaves out")
        self.assertIn("--matrix default --matrix smoke", p.stderr)  # the command to run instead
        self.assertNotIn("measure", [c["argv"][0] for c in base.RegenTest.calls(self)][-1:])
        p = self.regen("--write", "--matrix", "default", "--allow-fewer-matrices", "smoke is a subset of default")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("fewer matrices than before (without smoke): smoke is a subset of default",
                      lcecheck_golden.read_text(self.golden_path()))

    def test_without_matrix_the_recorded_matrices_are_measured(self):
        self.assertEqual(self.regen("--write", "--matrix", "default", "--matrix", "smoke").returncode, 0)
        p = self.regen()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("measuring the matrices fused-host.golden records: default, smoke", p.stderr)
        measured = [c["argv"][c["argv"].index("--matrix") + 1] for c in base.RegenTest.calls(self)[-6:]
                    if c["argv"][0] == "measure"]
        self.assertEqual(measured, ["default", "smoke"])
        self.assertIn("--matrix default --matrix smoke", p.stdout)  # the candidate records them too

    def test_long_sweeps_report_progress(self):
        self.configure(cases=DEFAULT_CASES)
        p = self.regen("--jobs", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        # Both shards' last lines: every case done, counted over the shards.
        self.assertIn("progress measure --subject fused-host --matrix default: 3/3 cases", p.stderr)

    def test_stage_writes_elsewhere_and_records_the_golden_directory(self):
        stage = os.path.join(self.tmp.name, "stage")
        os.makedirs(stage)
        p = self.regen("--write", "--stage", stage)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(self.golden_path()))
        staged = os.path.join(stage, base.GOLDEN_NAME)
        gen = lcecheck_golden.header(staged)["text"]
        self.assertIn(f"--golden-dir {self.golden_dir} ", gen)
        self.assertNotIn(stage, gen)

    def test_mutant_that_never_fails_on_its_must_fail_output_is_refused(self):
        # conformance/tests/mutant_kills.txt: mutant/bf16-dhidden-accum must fail on d_hidden.
        self.configure(check_fail_outputs={"mutant/bf16-dhidden-accum": ["d_weight"]})
        p = self.regen("--write")
        self.assert_refused(p, "mutant/bf16-dhidden-accum: never fails on d_hidden, which the kill table "
                               "conformance/tests/mutant_kills.txt says it must")
        self.assertIn("SURVIVED on d_hidden", p.stderr)
        self.assertFalse(os.path.exists(self.golden_path()))

    def test_options_of_the_golden_set_may_follow_the_verb(self):
        args = lcecheck_golden.parse_args(["regen", "--subject", "fused-cuda", "--matrix", "default", "--arch", "sm_90"])
        self.assertEqual(args.arch, "sm_90")
        self.assertTrue(args.golden_dir.endswith(os.path.join("golden", "sm_90")))
        args = lcecheck_golden.parse_args(["--policy", POLICY, "regen", "--subject", CLASS])
        self.assertEqual(args.policy, POLICY)


if __name__ == "__main__":
    unittest.main()
