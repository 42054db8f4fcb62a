"""The GPU adapters where no GPU (nor torch) is: every script answers --help, every adapter's
declared option set skips what its library cannot express, with the reason in out/skip.txt, and an
export whose cases are all skipped runs to exit 0 without importing torch. run_all.sh runs the
reference runners over an export."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SUBJECTS = os.path.dirname(HERE)
sys.path.insert(0, SUBJECTS)
sys.path.insert(0, HERE)
import case_factory  # noqa: E402
import lce_exchange as lx  # noqa: E402
import lce_torch_common as common  # noqa: E402
from cce import CutCrossEntropy  # noqa: E402
from liger import Liger  # noqa: E402
from megatron_fused_lce import MegatronFusedLCE  # noqa: E402
from megatron_vocab_parallel import MegatronVocabParallel  # noqa: E402
from te_parallel_ce import TEParallelCE  # noqa: E402
from torch_compile import TorchCompile  # noqa: E402
from torch_eager import TorchEager  # noqa: E402

SCRIPTS = ["reference_runner.py", "torch_eager.py", "torch_compile.py", "liger.py", "cce.py",
           "megatron_vocab_parallel.py", "megatron_fused_lce.py", "te_parallel_ce.py"]


def export(cases):
    tmp = tempfile.TemporaryDirectory()
    made = []
    for k, kw in enumerate(cases):
        f = case_factory.case_fields(id=f"c{k}", **kw)
        made.append((f, case_factory.make_inputs(f, seed=k)))
    case_factory.make_export(tmp.name, made)
    return tmp


class HelpTest(unittest.TestCase):
    def test_every_script_has_help(self):
        for script in SCRIPTS:
            with self.subTest(script):
                p = subprocess.run([sys.executable, os.path.join(SUBJECTS, script), "--help"],
                                   capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("usage:", p.stdout)
        for sub in ("run", "unit-test"):
            p = subprocess.run([sys.executable, os.path.join(SUBJECTS, "megatron_fused_lce.py"), sub, "--help"],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run(["bash", os.path.join(SUBJECTS, "run_all.sh"), "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_unit_test_dtypes_refused(self):
        """A --dtypes outside upstream's two is bad usage (exit 2, named), before torch or Megatron is loaded."""
        for bad in ("fp8", "", "bf16,fp32"):
            with self.subTest(bad):
                p = subprocess.run([sys.executable, os.path.join(SUBJECTS, "megatron_fused_lce.py"), "unit-test",
                                    "--megatron", "/nonexistent", "--dtypes", bad], capture_output=True, text=True)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("--dtypes", p.stderr)


class SkipRuleTest(unittest.TestCase):
    def reasons(self, adapter, **kw):
        with export([kw]) as d:
            c = lx.Case(os.path.join(d, "case0"))
            return common.skip_reason(c, adapter.supported, lambda x: adapter.extra_skip(x, None))

    def test_declared_options(self):
        everything = dict(softcap=5, z_loss=1e-3, class_weights=True, label_smoothing={"form": "pytorch", "eps": 0.1})
        self.assertIsNone(self.reasons(TorchEager(), **everything))
        self.assertIsNone(self.reasons(TorchCompile(), dtype="float32", gemm="tf32", **everything))
        self.assertIn("weight the z-loss", self.reasons(Liger(), **everything))
        self.assertIsNone(self.reasons(Liger(), softcap=5, z_loss=1e-3, label_smoothing={"form": "megatron", "eps": 0.1}))
        self.assertIn("bf16/fp16", self.reasons(CutCrossEntropy(), dtype="float32"))
        self.assertIsNone(self.reasons(CutCrossEntropy(), softcap=30, reduction="none"))
        self.assertIn("label smoothing", self.reasons(CutCrossEntropy(), label_smoothing={"form": "pytorch", "eps": 0.1}))
        self.assertIn("class-weight", self.reasons(CutCrossEntropy(), class_weights=True))
        self.assertIn("z-loss", self.reasons(MegatronVocabParallel(), z_loss=1e-4))
        self.assertIsNone(self.reasons(MegatronVocabParallel(), label_smoothing={"form": "pytorch", "eps": 0.1}))
        self.assertIn("BF16/FP32", self.reasons(TEParallelCE(), dtype="float16"))
        self.assertIn("z-loss", self.reasons(TEParallelCE(), z_loss=1e-4))
        self.assertIn("class weights", self.reasons(TEParallelCE(), class_weights=True))
        self.assertIsNone(self.reasons(TEParallelCE(), dtype="float32", gemm="tf32", reduction="sum",
                                       label_smoothing={"form": "megatron", "eps": 0.1}))
        self.assertIn("softcap", self.reasons(MegatronFusedLCE(), softcap=5))
        self.assertIn("bf16/fp16", self.reasons(MegatronFusedLCE(), dtype="float32"))
        self.assertIsNone(self.reasons(MegatronFusedLCE(), dtype="float16", reduction="sum", ignore_index=-7, h=128))
        self.assertIn("multiple of 64", self.reasons(MegatronFusedLCE(), h=96))
        # Megatron form with tiny V pushes PyTorch's parameter above 1: visible skip, not an assert.
        self.assertIn("outside", self.reasons(TorchEager(), v=2, vp=2, label_smoothing={"form": "megatron", "eps": 0.9}))

    def test_smoothing_parameter_mapping(self):
        with export([dict(v=10, vp=10, label_smoothing={"form": "pytorch", "eps": 0.2})]) as d:
            c = lx.Case(os.path.join(d, "case0"))
            self.assertAlmostEqual(common.smoothing_param(c, TorchEager.supported), 0.2)
            alpha = common.smoothing_param(c, MegatronVocabParallel.supported)
            self.assertAlmostEqual(alpha * 10 / 9, 0.2)  # Megatron's e = alpha V / (V - 1)

    def test_all_skipped_export_runs_without_torch(self):
        with export([dict(dtype="float32"), dict(class_weights=True)]) as d:
            p = subprocess.run([sys.executable, os.path.join(SUBJECTS, "cce.py"), d], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("bf16/fp16", case_factory.read_skip(os.path.join(d, "case0")))
            self.assertIn("class-weight", case_factory.read_skip(os.path.join(d, "case1")))
            self.assertFalse(os.path.exists(os.path.join(d, "case0", "out", "meta.json")))


    def test_shards_and_time_limit(self):
        # Four all-skipped cases: shard 1/2 touches cases 1 and 3 only; a limit of 0 s reaches none.
        with export([dict(dtype="float32")] * 4) as d:
            cce = [sys.executable, os.path.join(SUBJECTS, "cce.py")]
            p = subprocess.run(cce + ["--shard", "1/2", d], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("reached 2 of 2 cases (shard 1/2)", p.stdout)
            got = [case_factory.read_skip(os.path.join(d, f"case{k}")) for k in range(4)]
            self.assertEqual([g is not None for g in got], [False, True, False, True])
            p = subprocess.run(cce + ["--time-limit", "0", d], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("reached 0 of 4 cases", p.stdout)
            self.assertIn("not reached", case_factory.read_skip(os.path.join(d, "case2")))
            p = subprocess.run(cce + ["--shard", "2/2", d], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            for bad in ("-1", "nan", "soon"):
                p = subprocess.run(cce + ["--time-limit", bad, d], capture_output=True, text=True)
                self.assertEqual(p.returncode, 2, bad)
                self.assertIn("--time-limit", p.stderr)

    def test_missing_library_is_a_clear_error(self):
        # A case TE could run, and no TE where --te points: exit 2 naming the folder, before torch.
        with export([dict(), dict(dtype="float16")]) as d, tempfile.TemporaryDirectory() as empty:
            p = subprocess.run([sys.executable, os.path.join(SUBJECTS, "te_parallel_ce.py"), "--te", empty, d],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn(f"TransformerEngine not found at {os.path.abspath(empty)}", p.stderr)


    @unittest.skipIf(importlib.util.find_spec("torch") is not None, "torch is installed here")
    def test_no_torch_is_a_clear_error(self):
        # Cases every torch adapter could run, and no torch: exit 2 saying so, not a traceback's exit 1.
        with export([dict()]) as d:
            for script in ("torch_eager.py", "torch_compile.py", "liger.py", "cce.py"):
                with self.subTest(script):
                    p = subprocess.run([sys.executable, os.path.join(SUBJECTS, script), d], capture_output=True,
                                       text=True)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn("cannot load the library: ModuleNotFoundError: No module named", p.stderr)


class RunAllTest(unittest.TestCase):
    def test_reference_subjects(self):
        with export([dict(), dict(tied=True, reduction="none")]) as d:
            out = d + ".results"
            p = subprocess.run(["bash", os.path.join(SUBJECTS, "run_all.sh"), "--no-install", "--subjects",
                                "reference,reference-bug", "--out", out, d], capture_output=True, text=True)
            try:
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertIn("+ cp -r", p.stdout)
                for s in ("reference", "reference-bug"):
                    self.assertTrue(os.path.exists(os.path.join(out, s, "case1", "out", "d_hidden.npy")))
            finally:
                subprocess.run(["rm", "-rf", out])

    def test_interpreter_bf16_rounding_is_ieee(self):
        # triton_interpreter_shims' fp32 -> bf16 (the compiled kernel's cvt.rn) against the exchange
        # format's exact rounding: random values, ties both ways, carries into the exponent, overflow,
        # subnormals, zeros, infinities and NaN of either sign.
        import math
        import random
        import struct
        import numpy as np
        rng = random.Random(11)
        xs = [rng.uniform(-4, 4) * 2.0 ** rng.randint(-140, 120) for _ in range(20000)]
        xs += [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 2 - 2 ** -9, 2 - 2 ** -23, 3.3895e38, 3.4e38,
               2.0 ** -133, -2.0 ** -140, 0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan]
        f32 = [struct.unpack("<f", struct.pack("<f", x))[0] if abs(x) < 3.41e38 or not math.isfinite(x) else x for x in xs]
        f32 = [x for x in f32 if math.isnan(x) or abs(x) <= 3.4028234663852886e38]
        got = common.bf16_bits_rne(np.array(f32, dtype=np.float32)).tolist()
        self.assertEqual(got, [lx.float_to_bf16_bits(x) for x in f32])

    def test_bad_time_limit_is_a_usage_error(self):
        with export([dict(dtype="float32")]) as d:
            p = subprocess.run(["bash", os.path.join(SUBJECTS, "run_all.sh"), "--no-install", "--subjects", "cce",
                                "--time-limit", "-5", d], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("--time-limit wants a number of seconds", p.stderr)

    def test_jobs_share_the_cases(self):
        with export([dict(dtype="float32")] * 3) as d:
            out = d + ".results"
            p = subprocess.run(["bash", os.path.join(SUBJECTS, "run_all.sh"), "--no-install", "--subjects", "cce",
                                "--jobs", "2", "--time-limit", "300", "--out", out, d], capture_output=True, text=True)
            try:
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertIn("--time-limit 300 --shard 1/2", p.stdout)
                self.assertIn("reached 1 of 1 cases (shard 1/2)", p.stdout)
                for k in range(3):
                    self.assertIn("bf16/fp16", case_factory.read_skip(os.path.join(out, "cce", f"case{k}")))
            finally:
                subprocess.run(["rm", "-rf", out])


if __name__ == "__main__":
    unittest.main()
