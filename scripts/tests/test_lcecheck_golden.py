"""test_lcecheck_golden.py — the refusal logic of scripts/lcecheck_golden.py on synthetic measurements.

A fake lcecheck (fake_lcecheck.py) answers list/measure/check from a JSON config, so no build is
needed. Outputs carry "cond" (the normwise condition lcecheck reports) only where a test sets it, so
the default of 1 for measurements without it is exercised too. The tests use the real golden/policy.txt, so they also prove that the committed policy parses
and that its ceilings sit where the derivation says (above a correct subject, below gross errors).
Run: python3 -m unittest discover -s scripts/tests -v"""
import json
import math
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "lcecheck_golden.py")
POLICY = os.path.join(os.path.dirname(os.path.dirname(HERE)), "golden", "policy.txt")
sys.path.insert(0, os.path.dirname(HERE))
sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
import lcecheck_golden  # noqa: E402  (pure functions: expressions, golden parsing)
import lcecheck_golden_fit  # noqa: E402  (the model terms and their fit)
import lcecheck_run  # noqa: E402  (running lcecheck: shards and their pooling)

CLASS = "fused-host"
GOLDEN_NAME = CLASS + ".golden"


# Every synthetic output spreads over 100 effective elements (the judge's neff): the few-element term
# ms*cond/sqrtn then takes a tenth of the maxscaled bound, whose policy floor (u + u_in for d_hidden) would
# otherwise, at one element, exceed the relerr values these tests fit.
NEFF = 100.0


def output(inner, relerr, bias, ulpfrac=0.01, maxscaled=None, cond=None):
    o = {"inner": inner, "judged": 100, "inconclusive": 0, "class_ok": True, "class_msg": "", "neff": NEFF,
         "relerr": relerr, "bias": bias, "ulpfrac": ulpfrac,
         "maxscaled": min(relerr, 1e-3) / 4 if maxscaled is None else maxscaled}
    if cond is not None:
        o["cond"] = cond
    return o


def case(cid, dtype, d_hidden_relerr=2e-3, d_hidden_bias=-1e-4, status="pass", d_hidden_cond=None):
    return {"id": cid, "dtype": dtype, "status": status, "outputs": {
        "loss": output(16, 1e-7, 5e-8),
        "loss_token": output(300, 2e-7, -1e-8),
        "lse": output(300, 1e-7, 2e-8),
        "d_hidden": output(300, d_hidden_relerr, d_hidden_bias, cond=d_hidden_cond),
        "d_weight": output(16, 5e-4, 1e-5),
        # Class checks only: the CLI reports judged 0 and zero metrics.
        "d_embedding": {"inner": 16, "judged": 0, "inconclusive": 0, "class_ok": True, "class_msg": "",
                        "relerr": 0, "bias": 0, "ulpfrac": 0, "maxscaled": 0}}}



def golden_entries(body):
    """The entries of a golden file whose text is the magic line followed by body."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.golden")
        with open(p, "w") as f:
            f.write("lcecheck-golden 1\n" + body)
        return lcecheck_golden.load_golden(p)["entries"]

def at(entry, cid="bf16.untied.tp2.n16.h32.v300.vp384.vc8.mean.ign0.prior.mixed.s1", cond=1.0, neff=NEFF, k=300, ms=None):
    """The bound of a proposed entry on one output of case cid (the judge's scales, those of d_hidden:
    its uo is the case dtype's); ms: the same output's maxscaled entry, whose bound there the term
    ms*cond/sqrtn scales with."""
    scales = lcecheck_golden.output_scales(cid, "d_hidden", {"cond": cond, "neff": neff, "inner": k})
    scales["ms"] = lcecheck_golden.bound_at(ms, scales) if ms is not None else 0.0
    return lcecheck_golden.bound_at(entry, scales)


def measurement(cases):
    return {"verb": "measure", "subject": CLASS, "golden_class": CLASS, "matrix": "default",
            "cases": cases, "summary": {}}


def listing(mutants=("mutant/bf16-dhidden-accum", "mutant/tied-weight-when-untied")):
    subjects = [{"name": CLASS, "golden_class": CLASS, "caps": ["bf16"], "description": "host twin"}]
    subjects += [{"name": m, "golden_class": CLASS, "caps": ["bf16", "mutant"], "description": "bug"}
                 for m in mutants]
    subjects.append({"name": "mutant/other-class", "golden_class": "fused-cuda", "caps": ["mutant"],
                     "description": "must not be run for fused-host"})
    return {"subjects": subjects, "matrices": [{"name": "default"}], "mpfr_version": "4.2.0"}


CONFIDENT_ID = "bf16.tied.tp1.n16.h32.v300.vp300.vc50.sum.ign10.fresh.confident.s7"
# p_y -> 1 on every row: d_hidden is tiny and known to a correct fp32 softmax only to ~20%, which
# its condition of 1e5 explains (policy.txt: relerr <= u + cond*Ghid).
CONFIDENT = case(CONFIDENT_ID, "bf16", d_hidden_relerr=0.2, d_hidden_bias=-0.1, d_hidden_cond=1e5)
DEFAULT_CASES = [case("bf16.untied.tp1.n16.h32.v300.vp384.vc8.mean.ign25.prior.mixed.s1", "bf16"),
                 case("bf16.tied.tp2.n16.h32.v300.vp384.vc8.sum.ign0.fresh.mixed.s2", "bf16",
                      d_hidden_relerr=3e-3, d_hidden_bias=-2e-4),
                 case("fp32.tied.tp1.n16.h32.v300.vp384.vc8.none.ign0.fresh.normal.s3", "fp32",
                      d_hidden_relerr=1e-6, d_hidden_bias=1e-8)]


class RegenTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test-lcecheck-golden-")
        d = self.tmp.name
        self.build = os.path.join(d, "build")
        self.golden_dir = os.path.join(d, "golden")
        os.makedirs(self.build)
        os.makedirs(self.golden_dir)
        exe = os.path.join(self.build, "lcecheck")
        with open(exe, "w") as f:
            f.write(f'#!/bin/sh\nexec "{sys.executable}" "{os.path.join(HERE, "fake_lcecheck.py")}" "$@"\n')
        os.chmod(exe, os.stat(exe).st_mode | stat.S_IXUSR)
        self.config_path = os.path.join(d, "config.json")
        self.log_path = os.path.join(d, "calls.log")
        self.configure()

    def tearDown(self):
        self.tmp.cleanup()

    def configure(self, cases=DEFAULT_CASES, mutants=None, check_rc=None, check_status=None, **shards):
        cfg = {"list": listing() if mutants is None else listing(mutants),
               "measure": measurement(cases), "check_rc": check_rc or {}, "check_status": check_status or {},
               **shards}
        with open(self.config_path, "w") as f:
            json.dump(cfg, f)

    def regen_json(self, *extra):
        p = self.regen("--json", *extra)
        return p, json.loads(p.stdout)

    def regen(self, *extra):
        env = dict(os.environ, FAKE_LCECHECK_CONFIG=self.config_path, FAKE_LCECHECK_LOG=self.log_path)
        argv = [sys.executable, SCRIPT, "--golden-dir", self.golden_dir, "--policy", POLICY, "regen",
                "--subject", CLASS, "--build", self.build] + list(extra)
        return subprocess.run(argv, capture_output=True, text=True, env=env)

    def golden_path(self):
        return os.path.join(self.golden_dir, GOLDEN_NAME)

    def calls(self):
        with open(self.log_path) as f:
            return [json.loads(line) for line in f]

    def write_golden(self, lines):
        with open(self.golden_path(), "w") as f:
            f.write("lcecheck-golden 1\n# hand-written for the test\n" + "\n".join(lines) + "\n")

    def entries(self):
        return lcecheck_golden.load_golden(self.golden_path())["entries"]

    # ---- happy paths ------------------------------------------------------------------------------
    def test_dry_run_changes_nothing(self):
        p = self.regen()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(self.golden_path()))
        self.assertIn("not written (dry run)", p.stdout)
        self.assertIn("+ ", p.stderr)  # every command is printed

    def test_write_proposes_worst_times_margin_in_hex_with_provenance(self):
        p = self.regen("--write")
        self.assertEqual(p.returncode, 0, p.stderr)
        text = lcecheck_golden.read_text(self.golden_path())
        self.assertTrue(text.startswith("lcecheck-golden 1\n"))
        for needle in ("# generator: scripts/lcecheck_golden.py ", " regen --subject fused-host --matrix default\n",
                       "# MPFR: 4.2.0", "# commit: ", "# date: ", "seeds 1..3",
                       "# device: host (fused-host emulation)"):
            self.assertIn(needle, text)
        e = self.entries()
        # relerr margin 2 over the worst bf16 case, bias margin 2.5 over the worst |bias|: the fitted
        # model bound meets them where they were measured (cond 1 where not reported); relerr's
        # few-element term is the maxscaled bound at the case, coefficient 1 (one element's worst).
        relerr, bias = e[(CLASS, "bf16", "d_hidden", "relerr")], e[(CLASS, "bf16", "d_hidden", "bias")]
        ms = e[(CLASS, "bf16", "d_hidden", "maxscaled")]
        self.assertEqual(relerr[0], "model")
        self.assertEqual(dict(relerr[4])["ms*cond/sqrtn"], 1.0)
        self.assertAlmostEqual(at(relerr, ms=ms), 3e-3 * 2, delta=1e-15)
        self.assertAlmostEqual(at(bias), 2e-4 * 2.5, delta=1e-15)
        self.assertIn(f"{CLASS} bf16 d_hidden relerr model cond=", text)
        # rsum (derived, coefficient 1) added to the fitted constant, which the policy's floor u + u_in (2^-7 for
        # bf16: the d_logit and the output rounding of one element) lifts above twice the measured 2.5e-4
        self.assertEqual(e[(CLASS, "bf16", "d_hidden", "maxscaled")], ("model", 0.0, 0.0, 0.0, (("1", 2.0**-7), ("rsum", 1.0))))
        # An output without metrics (judged 0: d_embedding) gets no entry; min= lifts tiny values.
        self.assertNotIn((CLASS, "bf16", "d_embedding", "relerr"), e)
        # (at the measured case: reduction none, where pertok gives two roundings of u32 without a fit)
        self.assertAlmostEqual(at(e[(CLASS, "fp32", "d_hidden", "bias")], "fp32.tied.tp1.n16.h32.v300.vp384.vc8.none.ign0.fresh.normal.s3"),
                               2.0**-23, delta=1e-22)

    def test_cond_form_takes_b_from_the_worst_value_over_cond(self):
        # relerr 1e-2 at cond 2.5 (ratio 4e-3) is the worst ratio, not 0.2 at cond 1e5 (2e-6) nor
        # 3e-3 at cond 1; the confident case is accepted because its ceiling grows with its cond.
        mild = case("bf16.untied.tp2.n16.h32.v300.vp384.vc8.mean.ign0.prior.mixed.s8", "bf16",
                    d_hidden_relerr=1e-2, d_hidden_bias=-1e-3, d_hidden_cond=2.5)
        self.configure(cases=DEFAULT_CASES + [CONFIDENT, mild])
        p, report = self.regen_json("--write")
        self.assertEqual(p.returncode, 0, p.stderr)
        e = self.entries()
        relerr = e[(CLASS, "bf16", "d_hidden", "relerr")]
        ms = e[(CLASS, "bf16", "d_hidden", "maxscaled")]
        self.assertAlmostEqual(at(relerr, mild["id"], 2.5, ms=ms), 2 * 1e-2, delta=1e-15)  # the binding sample
        self.assertGreaterEqual(at(relerr, CONFIDENT["id"], 1e5, ms=ms), 2 * 0.2)
        self.assertGreaterEqual(at(e[(CLASS, "bf16", "d_hidden", "bias")], mild["id"], 2.5), 2.5 * 1e-3)
        # The diff row is evaluated at the worst sample: the one nearest its new bound.
        row = next(r for r in report["diff"] if r["key"] == [CLASS, "bf16", "d_hidden", "relerr"])
        self.assertEqual(row["at"], {"k": 300, "cond": 2.5})
        self.assertAlmostEqual(row["new_value"], 2e-2, delta=1e-15)
        self.assertTrue(row["new"].startswith("model cond="))

    def test_cond_bound_is_looser_where_cond_is_large(self):
        # A const 1e-2 replaced by b·cond + uo (6e-3 at cond 1: b = 6e-3 - 2^-8, uo the bf16 output's
        # rounding) is tighter at cond 1 but far looser at the confident case's cond 1e5: loosening, so
        # it needs a reason.
        self.write_golden([f"{CLASS} bf16 d_hidden relerr const {(1e-2).hex()}"])
        self.configure(cases=DEFAULT_CASES + [CONFIDENT])
        p = self.regen("--write")
        self.assert_refused(p, "bf16 d_hidden relerr (looser)")
        # Values are shown at the worst sample (cond 1); the ratio is the largest over every
        # measured (K, cond): ((6e-3 - 2^-8)·1e5 + 2^-8) / 1e-2.
        self.assertIn("20937.891  looser", p.stdout)
        p = self.regen("--write", "--allow-loosen", "bounds scale with cond")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_tightening_is_allowed(self):
        self.write_golden([f"{CLASS} bf16 d_hidden relerr const {(1e-2).hex()}"])
        p = self.regen("--write")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("tighter", p.stdout)
        e = self.entries()
        self.assertAlmostEqual(at(e[(CLASS, "bf16", "d_hidden", "relerr")], ms=e[(CLASS, "bf16", "d_hidden", "maxscaled")]),
                               6e-3, delta=1e-15)

    def test_mutants_are_checked_against_the_candidate_not_the_committed_file(self):
        p = self.regen("--write")
        self.assertEqual(p.returncode, 0, p.stderr)
        checks = [c for c in self.calls() if c["argv"][0] == "check"]
        self.assertEqual(sorted(c["argv"][c["argv"].index("--subject") + 1] for c in checks),
                         ["mutant/bf16-dhidden-accum", "mutant/tied-weight-when-untied"])
        for c in checks:
            self.assertNotEqual(c["argv"][c["argv"].index("--golden") + 1], self.golden_path())
            self.assertEqual(c["golden_text"], lcecheck_golden.read_text(self.golden_path()))

    # ---- --jobs: matrices in shards ----------------------------------------------------------------
    SHARD_CASES = DEFAULT_CASES + [CONFIDENT]  # 4 cases in 3 shards: shard 0 holds two

    def test_jobs_write_the_same_golden_as_one_process(self):
        self.configure(cases=self.SHARD_CASES)
        goldens = {}
        for jobs in ("1", "3"):
            p = self.regen("--write", "--jobs", jobs, "--matrix", "default", "--matrix", "smoke")
            self.assertEqual(p.returncode, 0, p.stderr)
            goldens[jobs] = [line for line in lcecheck_golden.read_text(self.golden_path()).splitlines()
                             if not line.startswith("# date: ")]
            self.assertNotIn("--jobs", "\n".join(goldens[jobs]))
        self.assertEqual(goldens["1"], goldens["3"])
        self.assertIn("matrix: default, smoke (8 cases)", "\n".join(goldens["3"]))
        sharded = [c for c in self.calls() if "--shard" in c["argv"]]
        shards = sorted((c["argv"][0], c["argv"][c["argv"].index("--matrix") + 1], c["argv"][-1]) for c in sharded)
        # Both matrices measured in 3 shards; each mutant killed by the first matrix, in 3 shards.
        self.assertEqual(shards, sorted([("measure", m, f"{i}/3") for m in ("default", "smoke") for i in range(3)]
                                        + [("check", "default", f"{i}/3") for i in range(3)] * 2))
        self.assertEqual({c["omp_num_threads"] for c in sharded}, {str(lcecheck_run.omp_threads(3))})
        self.assertIn("shard 2/3 finished: exit 0", p.stderr)

    def test_omp_threads_share_the_cores(self):
        self.assertEqual(lcecheck_run.omp_threads(4, cores=16), 4)
        self.assertEqual(lcecheck_run.omp_threads(16, cores=16), 1)
        self.assertEqual(lcecheck_run.omp_threads(3, cores=2), 1)  # never 0
        self.assertEqual(lcecheck_run.omp_threads(1, cores=8), 8)
        self.assertGreaterEqual(lcecheck_run.usable_cores(), 1)

    def test_pooled_shards_are_the_unsharded_measurement(self):
        whole = measurement(self.SHARD_CASES)
        parts = [dict(whole, shard=f"{i}/3", cases=self.SHARD_CASES[i::3]) for i in range(3)]
        self.assertEqual(lcecheck_run.pool_shards(parts)["cases"], self.SHARD_CASES)

    def test_failing_shard_is_named(self):
        self.configure(cases=self.SHARD_CASES, shard_rc={"1/3": 2})
        p = self.regen("--write", "--jobs", "3")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--json (shard 1/3) exited with 2:\n", p.stderr)
        self.assertIn("\nfake lcecheck: shard 1/3 broke", p.stderr)
        self.assertFalse(os.path.exists(self.golden_path()))

    def test_mutant_failing_in_one_shard_is_killed_and_passing_in_all_survives(self):
        self.configure(cases=self.SHARD_CASES, shard_check_rc={"mutant/bf16-dhidden-accum": {"2/3": 1},
                                                               "mutant/tied-weight-when-untied": {}})
        p, report = self.regen_json("--write", "--jobs", "3")
        self.assertEqual(p.returncode, 1, p.stderr)
        # Shard 2/3 holds one of the 4 cases, and its failure is a kill.
        self.assertIn("  mutant mutant/bf16-dhidden-accum: killed (1 failing cases, exit 1)", p.stderr)
        self.assertIn("mutant/tied-weight-when-untied: every case of matrix default passes", report["refused"])

    # ---- refusals ---------------------------------------------------------------------------------
    def assert_refused(self, p, needle):
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("REFUSED", p.stderr)
        self.assertIn(needle, p.stderr)

    def test_bound_above_ceiling_is_refused(self):
        bad = DEFAULT_CASES + [case("bf16.untied.tp1.n16.h32.v300.vp384.vc8.mean.ign0.prior.mixed.s4",
                                    "bf16", d_hidden_relerr=0.2)]
        self.configure(cases=bad)
        p = self.regen("--write")
        # The same 0.2 that the confident case may have at cond 1e5 is a bug at cond 1.
        self.assert_refused(p, "bf16 d_hidden relerr: measured 2.000e-01")
        self.assertIn("(cond 1)", p.stderr)
        self.assertIn("above the largest ceiling", p.stderr)
        self.assertFalse(os.path.exists(self.golden_path()))

    def test_cond_missing_is_one_and_invalid_cond_is_refused(self):
        s = lcecheck_golden.collect_measurements(measurement(DEFAULT_CASES))
        self.assertEqual({x["cond"] for x in s[(CLASS, "bf16", "d_hidden", "relerr")]}, {1.0})
        bad = case("bf16.untied.tp1.n16.h32.v300.vp384.vc8.mean.ign0.prior.mixed.s9", "bf16")
        bad["outputs"]["lse"]["cond"] = None  # lcecheck prints null for a non-finite number
        self.configure(cases=DEFAULT_CASES + [bad])
        self.assert_refused(self.regen("--write"), "s9: lse: cond is None, not a finite number >= 1")

    def test_loosening_is_refused_without_reason_and_recorded_with_one(self):
        tight = f"{CLASS} bf16 d_hidden relerr const {(1e-3).hex()}"
        self.write_golden([tight])
        p = self.regen("--write")
        self.assert_refused(p, "bf16 d_hidden relerr (looser)")
        self.assertIn(tight, lcecheck_golden.read_text(self.golden_path()))
        p = self.regen("--write", "--allow-loosen", "new matrix has 64 chunks")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("new matrix has 64 chunks", lcecheck_golden.read_text(self.golden_path()))

    def test_dropping_an_entry_counts_as_loosening(self):
        self.write_golden([f"{CLASS} fp16 d_hidden relerr const {(1e-2).hex()}"])
        self.assert_refused(self.regen("--write"), "fp16 d_hidden relerr (removed)")

    def test_surviving_mutant_is_refused(self):
        self.configure(check_rc={"mutant/tied-weight-when-untied": 0})
        p = self.regen("--write")
        self.assert_refused(p, "mutant/tied-weight-when-untied: every case of matrix default passes")
        self.assertFalse(os.path.exists(self.golden_path()))

    def test_mutant_check_error_is_not_a_kill(self):
        self.configure(check_rc={"mutant/bf16-dhidden-accum": 3},
                       check_status={"mutant/bf16-dhidden-accum": "error"})
        p = self.regen("--write")
        self.assert_refused(p, "mutant/bf16-dhidden-accum: check exited 3 without a failing case")
        self.assertFalse(os.path.exists(self.golden_path()))

    def test_build_without_mutants_is_refused(self):
        self.configure(mutants=())
        self.assert_refused(self.regen("--write"), "no mutant subject of class fused-host")

    def test_class_failure_and_error_are_refused(self):
        broken = case("bf16.untied.tp1.n16.h32.v300.vp384.vc8.mean.ign0.prior.mixed.s5", "bf16", status="fail")
        broken["outputs"]["d_embedding"].update(class_ok=False, class_msg="element 3 changed")
        broken["outputs"]["lse"]["relerr"] = None
        errored = {"id": "bf16.untied.tp1.n16.h32.v300.vp384.vc8.mean.ign0.prior.mixed.s6", "dtype": "bf16",
                   "status": "error", "message": "oracle failed"}
        self.configure(cases=DEFAULT_CASES + [broken, errored])
        p = self.regen("--write")
        self.assert_refused(p, "d_embedding: class check failed: element 3 changed")
        self.assertIn("s6: error: oracle failed", p.stderr)
        self.assertIn("s5: lse: relerr is not a finite number", p.stderr)


class FromJsonTest(unittest.TestCase):
    """regen --from-json: measurements made elsewhere (lcecheck production --json), mutant runs judged
    offline against the candidate; no lcecheck is run."""
    SM90_POLICY = os.path.join(os.path.dirname(POLICY), "sm_90", "policy.txt")
    CASE = "bf16.tied.tp1.n8192.h4096.v128256.vp128256.vc4096.mean.ign5.fresh.normal.s1"

    def production_json(self, mutant_relerr):
        def run(subject, mutant, d_hidden_relerr):
            outs = {"loss": output(8192, 2e-6, None, ulpfrac=None, maxscaled=3e-7, cond=17.0),
                    # ulpfrac as a tier-1 run defines it: a golden fitted on tier 2 alone, which has none,
                    # could not judge it on a smaller matrix and is refused for want of it
                    "d_hidden": output(4096, d_hidden_relerr, 1.2e-3, ulpfrac=0.0, maxscaled=1e-4, cond=230.0),
                    "d_weight": output(8192, 1.3e-3, 1.2e-3, ulpfrac=None, maxscaled=5e-5, cond=140.0)}
            for o in outs.values():
                o["neff"] = 1.0 if o is outs["loss"] else 1e6  # production outputs: many elements
            return {"verb": "check", "subject": subject, "golden_class": "fused-cuda", "mutant": mutant,
                    "cases": [{"id": self.CASE, "dtype": "bf16", "status": "pass", "outputs": outs}]}
        return {"verb": "production", "device": {"name": "NVIDIA H200", "arch": "sm_90"},
                "runs": [run("fused-cuda", False, 2.1e-3), run("mutant-cuda/bf16-dhidden-accum", True, mutant_relerr)]}

    def regen(self, d, mutant_relerr, arch="sm_90"):
        path = os.path.join(d, "production.json")
        with open(path, "w") as f:
            json.dump(self.production_json(mutant_relerr), f)
        argv = [sys.executable, SCRIPT, "--arch", arch, "--golden-dir", d, "--policy", self.SM90_POLICY, "regen",
                "--subject", "fused-cuda", "--from-json", path, "--write"]
        return subprocess.run(argv, capture_output=True, text=True)

    def test_mutant_outside_the_margin_is_killed_and_the_golden_written(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.regen(d, 6.9e-3)  # fused-cuda 2.1e-3 x margin 2 = 4.2e-3 < 6.9e-3
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("mutant-cuda/bf16-dhidden-accum: killed", p.stderr)
            text = lcecheck_golden.read_text(os.path.join(d, "fused-cuda.golden"))
            self.assertIn("# device: name NVIDIA H200, arch sm_90", text)
            g = lcecheck_golden.load_golden(os.path.join(d, "fused-cuda.golden"))["entries"]
            entry = g[("fused-cuda", "bf16", "d_hidden", "relerr")]
            self.assertEqual(entry[0], "model")
            # k = the sm_90 slope x margin 2, fixed; the fitted terms make the bound margin x the measurement.
            self.assertAlmostEqual(dict(entry[4])["k"], 2 * 1.16e-9, delta=1e-20)

    def test_mutant_inside_the_margin_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.regen(d, 3e-3)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("mutant-cuda/bf16-dhidden-accum: passes every measured case", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "fused-cuda.golden")))

    def judge(self, d, mutant_relerr):
        path = os.path.join(d, "other.json")
        with open(path, "w") as f:
            json.dump(self.production_json(mutant_relerr), f)
        argv = [sys.executable, SCRIPT, "--arch", "sm_90", "--golden-dir", d, "judge", "--from-json", path, "--json"]
        return subprocess.run(argv, capture_output=True, text=True)

    def test_judge_offline_kills_and_reports_survivors(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(self.regen(d, 6.9e-3).returncode, 0)
            p = self.judge(d, 6.9e-3)  # the measurements the golden was fitted on: subject passes, mutant killed
            self.assertEqual(p.returncode, 0, p.stderr)
            runs = {r["subject"]: r for r in json.loads(p.stdout)["runs"]}
            self.assertEqual(runs["fused-cuda"]["verdict"], "pass")
            self.assertEqual(runs["mutant-cuda/bf16-dhidden-accum"]["verdict"], "killed")
            self.assertEqual(runs["mutant-cuda/bf16-dhidden-accum"]["misses"][0]["output"], "d_hidden")
            p = self.judge(d, 3e-3)  # a mutant inside the bound: reported, exit 1
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("SURVIVED", p.stderr)

    def test_measurements_of_another_architecture_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.regen(d, 6.9e-3, arch="sm_100")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("were made on sm_90", p.stderr)


class PolicyTest(unittest.TestCase):
    # Ceilings above 1 at cond 1 (the trivial per-term bound of fp16 d_logits that underflow, see
    # policy.txt at d_weight); anything else above 1, or inf, must be a conscious change here too.
    ABOVE_ONE = {("fp16", "d_weight", "maxscaled")}

    def ceiling(self, pol, t, out, metric, cond=1.0):
        return lcecheck_golden.policy_value(pol, lcecheck_golden.policy_ceiling(pol, t, out, metric), t,
                                            {"N": 16, "H": 32, "V": 300}, 300, cond)

    def test_policy_covers_every_judged_output_and_metric(self):
        pol = lcecheck_golden.load_policy(POLICY)
        shape = {"N": 16, "H": 32, "V": 300}
        for out in ("loss", "loss_token", "lse", "d_hidden", "d_weight"):
            for metric in lcecheck_golden.METRICS:
                self.assertIn((out, metric), pol["bounds"])
                for t in lcecheck_golden.DTYPES:
                    c = lcecheck_golden.policy_value(
                        pol, lcecheck_golden.policy_ceiling(pol, t, out, metric), t, shape, 300)
                    if (t, out, metric) in self.ABOVE_ONE:
                        self.assertTrue(1 < c < 2.1, f"{t} {out} {metric}: {c}")
                    else:
                        self.assertTrue(0 < c <= 1, f"{t} {out} {metric}: {c}")

    def test_normwise_ceilings_grow_with_cond_and_the_rest_do_not(self):
        pol = lcecheck_golden.load_policy(POLICY)
        for out in ("loss", "loss_token", "lse", "d_hidden", "d_weight"):
            self.assertIn("cond", pol["bounds"][(out, "relerr")]["terms"])
            self.assertIn("cond", pol["bounds"][(out, "bias")]["terms"])
            for metric in ("relerr", "bias"):
                lo, hi = self.ceiling(pol, "bf16", out, metric), self.ceiling(pol, "bf16", out, metric, 1e4)
                self.assertGreater(hi, 1e3 * lo, f"{out} {metric}")
            for metric in ("ulpfrac", "maxscaled"):
                self.assertFalse([t for t in pol["bounds"][(out, metric)]["terms"] if "cond" in t], f"{out} {metric}")
                self.assertEqual(self.ceiling(pol, "bf16", out, metric),
                                 self.ceiling(pol, "bf16", out, metric, 1e4), f"{out} {metric}")

    def test_bias_cap_keeps_cond_bounds_under_the_ceiling_at_any_cond(self):
        # b <= the ceiling's cond coefficient, so b·cond stays below the ceiling however large cond.
        pol = lcecheck_golden.load_policy(POLICY)
        shape = {"N": 16, "H": 32, "V": 300}
        for out in ("loss", "loss_token", "lse", "d_hidden", "d_weight"):
            for t in lcecheck_golden.DTYPES:
                cap = lcecheck_golden.policy_value(pol, pol["bounds"][(out, "bias")]["max"]["cond"], t, shape, 300)
                self.assertLessEqual(cap * 1e6, self.ceiling(pol, t, out, "bias", 1e6), f"{t} {out}")

    def test_cond_is_for_ceilings_only(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "policy.txt")
            with open(p, "w") as f:
                f.write("lcecheck-policy 1\nbound lse relerr model terms=cond margin=2*cond\n")
            with self.assertRaisesRegex(lcecheck_golden.ToolError, "only ceilings may use"):
                lcecheck_golden.load_policy(p)

    def test_bf16_d_hidden_ceiling_sits_between_correct_and_gross(self):
        pol = lcecheck_golden.load_policy(POLICY)
        c = self.ceiling(pol, "bf16", "d_hidden", "relerr")
        self.assertGreater(c, 5 * 2.0**-8)  # 2 × (final rounding + d_logits rounding + underflow)
        self.assertLess(c, 0.1)
        # At cond 1e5 (confident rows) a relerr of 0.2 is within the model, at cond 1 it is not.
        self.assertGreater(self.ceiling(pol, "bf16", "d_hidden", "relerr", 1e5), 0.2)

    def test_expressions_are_arithmetic_only(self):
        with self.assertRaises(lcecheck_golden.ToolError):
            lcecheck_golden.parse_expr("__import__('os').system('true')", "t")
        tree = lcecheck_golden.parse_expr("2*(u + sqrt(N))", "t")
        self.assertEqual(lcecheck_golden.eval_expr(tree, {"u": 0.5, "N": 16.0}, "t"), 9.0)

    def test_cond_entry_round_trips_and_scales_with_cond(self):
        line = f"{CLASS} bf16 d_hidden relerr cond {(2.0**-10).hex()} {(1.5 * 2.0**-8).hex()}"
        g = golden_entries("# c\n" + line + "\n" + f"{CLASS} bf16 lse bias cond 1e-7 0.5e-7\n")
        key = (CLASS, "bf16", "d_hidden", "relerr")
        self.assertEqual(g[key], ("cond", 2.0**-10, 1.5 * 2.0**-8, 0.0, ()))
        self.assertEqual(lcecheck_golden.format_entry(key, g[key]), line)
        self.assertEqual(at(g[key], cond=4.0), 2.0**-10 + 6 * 2.0**-8)
        self.assertEqual(at(g[key], k=1), at(g[key], k=9999))
        self.assertEqual(g[(CLASS, "bf16", "lse", "bias")], ("cond", 1e-7, 0.5e-7, 0.0, ()))  # decimal input
        self.assertEqual(at(("sqrtk", 1.0, 2.0, 0.0, ()), k=16, cond=1e9), 9.0)  # K forms ignore cond

    def test_bounds_needing_magnitudes_are_left_unbounded_without_them(self):
        import lcecheck_golden_judge  # noqa: E402  (judge_run: the offline judge's rule)
        g = golden_entries(f"{CLASS} bf16 loss relerr cond 0 1e-6\n"
                           f"{CLASS} bf16 lse relerr model 1=1e-6 cond=0 ms*cond/sqrtn=1\n"
                           f"{CLASS} bf16 lse bias model 1=1e-6 cond=0x0.0p+0 k=1e-12\n"
                           f"{CLASS} bf16 d_hidden bias model flip=1 rndu=1\n"
                           f"{CLASS} bf16 d_hidden relerr model rndu=1\n")
        self.assertTrue(lcecheck_golden.needs_mags(g[(CLASS, "bf16", "loss", "relerr")]))
        self.assertTrue(lcecheck_golden.needs_mags(g[(CLASS, "bf16", "lse", "relerr")]))
        self.assertFalse(lcecheck_golden.needs_mags(g[(CLASS, "bf16", "lse", "bias")]))  # its cond coefficient is 0
        self.assertTrue(lcecheck_golden.needs_mags(g[(CLASS, "bf16", "d_hidden", "bias")]))  # flip: measured from rnd
        self.assertFalse(lcecheck_golden.needs_mags(g[(CLASS, "bf16", "d_hidden", "relerr")]))  # rndu stands alone
        cid = "bf16.untied.tp1.n16.h32.v300.vp300.vc8.mean.ign0.fresh.normal.s1"
        loss = {"judged": 1, "inner": 300, "cond": 1.0, "relerr": 2e-6}
        run = {"golden_class": CLASS, "cases": [{"id": cid, "dtype": "bf16", "outputs": {"loss": loss}}]}
        row, = lcecheck_golden_judge.judge_run(run, g)
        self.assertGreater(row["value"], row["bound"])  # with magnitudes, cond 1: over its bound
        row, = lcecheck_golden_judge.judge_run({**run, "cases": [{**run["cases"][0], "outputs": {"loss": {**loss, "no_mags": True}}}]}, g)
        self.assertTrue(row["unbounded"] and math.isnan(row["bound"]) and row["pct"] == 0.0)

    def test_condk_entry_round_trips_and_adds_the_k_term(self):
        line = f"fused-cuda bf16 d_weight relerr condk {(0.0).hex()} {(2.0**-12).hex()} {(1.25 * 2.0**-30).hex()}"
        g = golden_entries(line + "\n")
        key = ("fused-cuda", "bf16", "d_weight", "relerr")
        self.assertEqual(g[key], ("condk", 0.0, 2.0**-12, 1.25 * 2.0**-30, ()))
        self.assertEqual(lcecheck_golden.format_entry(key, g[key]), line)
        self.assertEqual(at(g[key], k=1024, cond=2.0), 2 * 2.0**-12 + 1024 * 1.25 * 2.0**-30)

    def test_model_entry_round_trips_and_sums_its_terms(self):
        line = f"{CLASS} fp16 lse relerr model cond={(2.0**-22).hex()} cond*sqrtv={(2.0**-26).hex()} coh={(0.5).hex()}"
        g = golden_entries(line + "\n")
        with self.assertRaisesRegex(lcecheck_golden.ToolError, "model term"):
            golden_entries(line.replace("cond=", "cond/sqrtn=") + " cond=1\n")  # out of order
        key = (CLASS, "fp16", "lse", "relerr")
        self.assertEqual(lcecheck_golden.format_entry(key, g[key]), line)
        # tp2 v300: 150 rows per shard; mean: the coherent term is u16.
        fp16 = "fp16.untied.tp2.n16.h32.v300.vp384.vc8.mean.ign0.prior.mixed.s1"
        self.assertEqual(at(g[key], fp16, cond=2.0), 2 * 2.0**-22 + 2 * 150**0.5 * 2.0**-26 + 0.5 * 2.0**-11)

    def test_fixed_terms_are_set_and_the_others_fitted_to_the_residual(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "policy.txt")
            with open(p, "w") as f:
                f.write("lcecheck-policy 1\nbound d_weight relerr model terms=k margin=2 fix.cond=1\n")
            with self.assertRaises(lcecheck_golden.ToolError):
                lcecheck_golden.load_policy(p)  # fix. names a term the rule does not have
            with open(p, "w") as f:
                # the other metrics of d_weight, which no sample defines here, derived as the policy says
                f.write("lcecheck-policy 1\ndefine TC = 1e-9\nbound d_weight relerr model terms=cond,k margin=2 "
                        "fix.k=TC\nceiling * d_weight relerr 1\nbound d_weight ulpfrac model terms=1 margin=1 fix.1=1\n"
                        "bound d_weight maxscaled model terms=1 margin=2 fix.1=1/4\nunmeasured d_weight bias from relerr\n")
            pol = lcecheck_golden.load_policy(p)
        shape = {"N": 16, "H": 32, "V": 300}
        cid = "bf16.untied.tp1.n16.h32.v300.vp300.vc8.mean.ign0.prior.mixed.s1"
        samples = {("fused-cuda", "bf16", "d_weight", "relerr"): [
            {"id": "a", "value": 5e-6, "k": 4096, "cond": 1.0, "shape": shape,
             "scales": lcecheck_golden_fit.scales_of(cid, 1.0, 1.0, 4096)},
            {"id": "b", "value": 3e-6, "k": 16, "cond": 2.0, "shape": shape,
             "scales": lcecheck_golden_fit.scales_of(cid, 2.0, 1.0, 16)}]}
        entries, worst, refusals = lcecheck_golden.propose(pol, samples)
        terms = dict(entries[("fused-cuda", "bf16", "d_weight", "relerr")][4])
        self.assertEqual(terms["k"], 2e-9)
        # residuals: a 1e-5 - 8.192e-6 over cond 1, b (6e-6 - 3.2e-8) over cond 2: b binds.
        self.assertAlmostEqual(terms["cond"], (6e-6 - 3.2e-8) / 2, delta=1e-18)
        self.assertEqual(worst[("fused-cuda", "bf16", "d_weight", "relerr")]["id"], "b")
        self.assertEqual(refusals, [])
        self.assertEqual(entries[("fused-cuda", "bf16", "d_weight", "bias")], entries[("fused-cuda", "bf16", "d_weight", "relerr")])
        self.assertEqual(entries[("fused-cuda", "bf16", "d_weight", "maxscaled")][4], (("1", 0.5),))

    def test_the_fit_is_the_tightest_cover(self):
        # Two terms, two samples that each need one: the linear program gives each term what its
        # sample needs and no more, and a term no sample needs gets 0.
        s = lambda cid, cond, v: {"id": cid, "value": v, "scales": lcecheck_golden_fit.scales_of(cid, cond, 1.0, 300)}
        small = "fp32.untied.tp1.n2.h32.v100.vp100.vc100.none.ign0.prior.flat.s1"
        large = "fp32.untied.tp1.n2.h32.v10000.vp10000.vc100.none.ign0.prior.flat.s1"
        c = lcecheck_golden_fit.fit([s(small, 1.0, 1e-7), s(large, 1.0, 2e-6)], ("cond", "cond*sqrtv", "coh"), {},
                                    2.0, [0.0, 0.0])
        self.assertEqual(c[2], 0.0)
        self.assertGreaterEqual(c[0] + c[1] * 10, 2e-7 * (1 - 1e-12))
        self.assertGreaterEqual(c[0] + c[1] * 100, 4e-6 * (1 - 1e-12))
        self.assertLess(c[0], 2e-7)  # the length term carries the long row, not the constant

    def test_a_reference_term_takes_no_margin(self):
        # ref=rnd: the bound is rnd + margin * (value - rnd), so a value at its reference needs nothing
        # of the fitted terms, and one above it needs the margin on the excess only.
        cid = "bf16.untied.tp1.n16.h32.v300.vp300.vc300.mean.ign0.fresh.flat.s1"
        s = lambda cond, v, rnd: {"id": cid, "value": v, "scales": lcecheck_golden_fit.scales_of(cid, cond, 64.0, 300, rnd)}
        c = lcecheck_golden_fit.fit([s(1.0, 2e-3, 2e-3), s(2.0, 1.5e-3, 1e-3)], ("cond", "rnd"), {"rnd": 1.0},
                                    2.5, [0.0, 0.0], "rnd")
        self.assertEqual(c[1], 1.0)
        self.assertAlmostEqual(c[0], 2.5 * 0.5e-3 / 2.0, delta=1e-12)
        # The same samples without the reference: the margin covers the whole value.
        d = lcecheck_golden_fit.fit([s(1.0, 2e-3, 2e-3), s(2.0, 1.5e-3, 1e-3)], ("cond", "rnd"), {"rnd": 1.0},
                                    2.5, [0.0, 0.0])
        self.assertGreater(d[0], 2 * c[0])

    def test_gradient_terms_come_from_the_measurement(self):
        # The derived gradient terms (rnd, flip, outr, acc, accn, gsc) are lcecheck's scales of the
        # case, read from measure --json; the forward outputs have none of them.
        cid = "fp32.tied.tp2.n16.h16.v29.vp38.vc1.mean.ign25.cw.tf32.fresh.peaked.s1"
        o = {"inner": 16, "cond": 40.0, "neff": 66.0, "rnd": 1.3e-4, "flip": 3e-9, "outr": 2e-8, "acc": 3e-8,
             "accn": 2.7e-7, "gsc": 3.5e-7, "flipn": 8e-7}
        sc = lcecheck_golden.output_scales(cid, "d_weight", o)
        for t in ("rnd", "flip", "outr", "acc", "accn", "gsc", "flipn"):
            self.assertEqual(lcecheck_golden_fit.term_scale(t, sc), o[t])
        fwd = lcecheck_golden.output_scales(cid, "lse", o)
        self.assertEqual([lcecheck_golden_fit.term_scale(t, fwd) for t in ("acc", "accn", "gsc", "flipn")], [0.0] * 4)

    def test_relerr_couples_to_the_maxscaled_bound_at_the_case(self):
        key = ("fused-host", "fp32", "d_hidden", "relerr")
        ms = ("model", 0.0, 0.0, 0.0, (("1", 1e-7), ("sqrtv", 2e-8)))
        rel = ("model", 0.0, 0.0, 0.0, (("cond", 0.0), ("ms*cond/sqrtn", 1.0)))
        entries = {key[:3] + ("maxscaled",): ms, key: rel}
        sc = lcecheck_golden.with_ms(entries, key, lcecheck_golden_fit.scales_of(
            "fp32.untied.tp1.n1.h3.v400.vp400.vc1.none.ign0.fresh.flat.s1", 2.0, 4.0, 400))
        self.assertEqual(sc["ms"], 1e-7 + 2e-8 * 20.0)
        self.assertEqual(lcecheck_golden.bound_at(rel, sc), (1e-7 + 2e-8 * 20.0) * 2.0 / 2.0)

    def test_sm90_policy_is_the_base_plus_the_tensor_core_term(self):
        base = lcecheck_golden.load_policy(POLICY)
        arch = lcecheck_golden.load_policy(os.path.join(os.path.dirname(POLICY), "sm_90", "policy.txt"))
        self.assertEqual(set(arch["ceilings"]), set(base["ceilings"]))
        self.assertIn("k", arch["bounds"][("d_weight", "relerr")]["terms"])
        self.assertEqual(arch["bounds"][("lse", "relerr")]["form"], base["bounds"][("lse", "relerr")]["form"])
        # The forward outputs add the logits' tensor-core term to the base terms; loss keeps the base.
        self.assertEqual(arch["bounds"][("lse", "relerr")]["terms"], base["bounds"][("lse", "relerr")]["terms"] + ("cond*h",))
        self.assertIn("h", arch["bounds"][("lse", "maxscaled")]["fix"])
        self.assertEqual(arch["bounds"][("loss", "relerr")]["margin"][1], base["bounds"][("loss", "relerr")]["margin"][1]
                         .replace("golden/policy.txt", "golden/sm_90/../policy.txt"))
        self.assertIn("k", arch["bounds"][("d_hidden", "bias")]["terms"])
        shape = {"N": 512, "H": 64, "V": 1000}
        slope = arch["bounds"][("d_weight", "relerr")]["fix"]["k"]
        self.assertAlmostEqual(lcecheck_golden.policy_value(arch, slope, "bf16", shape, 512), 1.16e-9, delta=1e-21)
        self.assertEqual(lcecheck_golden.policy_value(arch, slope, "fp32", shape, 512), 0.0)  # CUDA cores: IEEE

    def test_include_must_come_first_and_keys_may_not_repeat_within_a_file(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "policy.txt")
            for body in (f"lcecheck-policy 1\ndefine X = 1\ninclude {POLICY}\n",
                         f"lcecheck-policy 1\ninclude {POLICY}\nbound lse relerr cond margin=2\n"
                         "bound lse relerr cond margin=3\n"):
                with open(p, "w") as f:
                    f.write(body)
                with self.assertRaises(lcecheck_golden.ToolError):
                    lcecheck_golden.load_policy(p)

    def test_golden_parser_rejects_malformed_lines(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.golden")
            for body in ("lcecheck-golden 2\n", "lcecheck-golden 1\nfused-host bf16 d_hidden relerr const\n",
                         "lcecheck-golden 1\nfused-host bf16 d_hidden relerr cond 1\n",
                         "lcecheck-golden 1\nfused-host bf16 d_hidden relerr condk 1 2\n",
                         "lcecheck-golden 1\nfused-host bf16 d_hidden relerr cond 0 -1\n",
                         "lcecheck-golden 1\nfused-host bf16 d_hidden relerr const -1\n",
                         "lcecheck-golden 1\nfused-host bf16 lse relerr const 1\nfused-host bf16 lse relerr const 2\n"):
                with open(p, "w") as f:
                    f.write(body)
                with self.assertRaises(lcecheck_golden.ToolError):
                    lcecheck_golden.load_golden(p)


if __name__ == "__main__":
    unittest.main()
