"""root_cause.py without a GPU: --help everywhere, `failing` over made-up judge JSON (failing gradient
outputs only, metrics over 100% of budget, class messages, case features), `collect`, which variant
flips which rounding and where a variant does not apply; with torch installed, the TF32 emulation
against the exchange format's cvt.rna rounding, and without it a clear error from `run`."""
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SUBJECTS = os.path.dirname(HERE)
sys.path.insert(0, SUBJECTS)
import lce_exchange as lx  # noqa: E402
import root_cause as rc  # noqa: E402

SCRIPT = os.path.join(SUBJECTS, "root_cause.py")
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def judged(cid, outputs):
    """A case as `lcecheck judge --json` reports it: outputs name -> (pass, budget_pct, class message)."""
    out = {}
    for name, (ok, pct, cls) in outputs.items():
        out[name] = {"pass": ok, "class_ok": cls is None, "class_msg": cls or "",
                     "budget_pct": {m: pct.get(m, 0) for m in rc.METRICS}}
    return {"id": cid, "n_valid": 14, "status": "fail", "outputs": out}


BF16 = "bf16.untied.tp1.n16.h32.v300.vp384.vc64.none.ign10.fresh.normal.s1001"
FP16 = "fp16.tied.tp1.n16.h32.v300.vp384.vc384.sum.ign0.ls100.zl10.cw.fresh.flat.s1093"
OK = "fp32.untied.tp1.n16.h32.v300.vp384.vc8.mean.ign0.fresh.normal.s7"


class RootCauseTest(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)

    def test_help(self):
        for sub in ([], ["failing"], ["run"], ["collect"]):
            with self.subTest(sub=sub):
                p = self.run_script(*sub, "--help")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("usage:", p.stdout)

    def write_judges(self, tmp):
        eager = {"cases": [
            judged(BF16, {"d_hidden": (False, {"ulpfrac": 632.1, "bias": 40.0}, None), "loss_token": (False, {"relerr": 900.0}, None)}),
            judged(FP16, {"d_weight": (False, {"maxscaled": 1102.0, "relerr": 310.1}, None),
                          "d_hidden": (False, {}, "element 0: NaN (expected finite 0x0p+0)")}),
            judged(OK, {"d_hidden": (True, {"relerr": 80.0}, None)})]}
        te = {"cases": [judged(BF16, {"d_hidden": (False, {"ulpfrac": 632.1}, None)}), {"id": FP16, "status": "skip"}]}
        paths = []
        for name, doc in (("default-torch-eager.json", eager), ("default-te-parallel-ce.json", te)):
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "w") as f:
                json.dump(doc, f)
        return paths

    def test_failing_lists_gradient_failures_only(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "failing.json")
            p = self.run_script("failing", *self.write_judges(tmp), "--json", out)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("2 cases with a failing gradient output", p.stdout)
            with open(out) as f:
                cases = json.load(f)["cases"]
        self.assertEqual(sorted(cases), sorted([BF16, FP16]))  # OK's failing loss_token is not a gradient
        self.assertEqual(cases[BF16]["subjects"], {"torch-eager": {"d_hidden": {"ulpfrac": 632.1}},
                                                   "te-parallel-ce": {"d_hidden": {"ulpfrac": 632.1}}})
        fp16 = cases[FP16]["subjects"]["torch-eager"]
        self.assertEqual(fp16["d_weight"], {"maxscaled": 1102.0, "relerr": 310.1})
        self.assertEqual(fp16["d_hidden"], {"class": "element 0: NaN (expected finite 0x0p+0)"})
        f = cases[FP16]["features"]
        self.assertEqual((f["dtype"], f["emb"], f["reduction"], f["dist"], f["ignored"], f["options"], f["n_valid"]),
                         ("fp16", "tied", "sum", "flat", "0%", "ls100 zl10 cw", 14))

    def test_collect_keeps_the_list_and_the_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            failing = os.path.join(tmp, "failing.json")
            self.assertEqual(self.run_script("failing", *self.write_judges(tmp), "--json", failing).returncode, 0)
            run = os.path.join(tmp, "run.json")
            with open(run, "w") as f:
                json.dump({"subject": "torch-eager", "cases": {}}, f)
            into = os.path.join(tmp, "all.json")
            p = self.run_script("collect", into, "--label", "made up", "--failing", failing)
            self.assertEqual(p.returncode, 0, p.stderr)
            p = self.run_script("collect", into, "--label", "cpu", "--run", run)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(into) as f:
                doc = json.load(f)
        self.assertEqual(doc["failing"]["run"], "made up")
        self.assertIn(BF16, doc["failing"]["cases"])
        self.assertEqual(doc["runs"], {"cpu": {"torch-eager": {"subject": "torch-eager", "cases": {}}}})

    def test_each_variant_removes_one_rounding(self):
        switches = ("logits32", "dlogits32", "dweight32", "g_after", "ieee_backward")
        single = {"fp32-logits": "logits32", "fp32-dlogits": "dlogits32", "fp32-dweight": "dweight32",
                  "g-after": "g_after", "ieee-backward": "ieee_backward"}
        for v in rc.VARIANTS:
            on = {k for k in switches if getattr(rc.Knobs(v), k)}
            want = set(switches) if v == "exact" else {single[v]} if v in single else set()
            self.assertEqual(on, want, v)

    def test_combined_variants(self):
        k = rc.Knobs("fp32-dweight+g-after")
        self.assertEqual((k.logits32, k.dlogits32, k.dweight32, k.g_after, k.ieee_backward),
                         (False, False, True, True, False))
        self.assertTrue(rc.valid_variant("fp32-logits+fp32-dlogits"))
        for bad in ("fp32-dweight+exact", "g-after+g-after", "fp32-dweight+nosuch", "nosuch", "as-is+g-after"):
            self.assertFalse(rc.valid_variant(bad), bad)
        case = types.SimpleNamespace(id=BF16, reduction="none", dtype="bfloat16", gemm="ieee")
        self.assertIsNotNone(rc.not_applicable(case, "fp32-dweight+g-after"))  # g-after: reduction none
        self.assertIsNone(rc.not_applicable(case, "fp32-dweight+fp32-logits"))

    def test_where_a_variant_does_not_apply(self):
        def case(cid, reduction="mean", dtype="bfloat16", gemm="ieee"):
            return types.SimpleNamespace(id=cid, reduction=reduction, dtype=dtype, gemm=gemm)
        self.assertIsNotNone(rc.not_applicable(case(BF16, reduction="none"), "g-after"))
        self.assertIsNone(rc.not_applicable(case(BF16, reduction="sum"), "g-after"))
        for v in ("fp32-logits", "fp32-dlogits", "fp32-dweight"):
            self.assertIsNotNone(rc.not_applicable(case(OK, dtype="float32"), v))
            self.assertIsNone(rc.not_applicable(case(BF16), v))
        self.assertIsNotNone(rc.not_applicable(case(OK, dtype="float32"), "ieee-backward"))
        self.assertIsNone(rc.not_applicable(case(OK, dtype="float32", gemm="tf32"), "ieee-backward"))
        poison = "bf16.tied.tp2.n16.h32.v300.vp384.vc10.sum.ign10.prior.poison.s7293"
        for v in ("zero-ignored-rows", "nan-nonfinite-rows"):
            self.assertIsNotNone(rc.not_applicable(case(BF16), v))
            self.assertIsNone(rc.not_applicable(case(poison), v))

    def test_a_cell_shows_the_metric_that_failed_as_is(self):
        w = {"pass": True, "class": None, "metric": "ulpfrac", "budget_pct": {"ulpfrac": 100.0, "bias": 4.0}}
        self.assertEqual(rc.cell(w, ["bias"]), "4% bias")
        w = {"pass": False, "class": None, "metric": "maxscaled", "budget_pct": {"maxscaled": 437.4, "relerr": 9.0}}
        self.assertEqual(rc.cell(w, ["relerr"]), "437% maxs✗")
        self.assertEqual(rc.cell({"pass": False, "class": "element 0: NaN", "budget_pct": {}}, []), "class✗")
        self.assertEqual(rc.cell(None, []), "-")

    def test_fused_subjects_take_only_the_input_variants(self):
        self.assertTrue(set(rc.FUSED_SUBJECTS) <= set(rc.SUBJECTS))
        self.assertTrue(set(rc.FUSED_VARIANTS) <= set(rc.VARIANTS))
        self.assertNotIn("g-after", rc.FUSED_VARIANTS)  # a rounding inside the library: no switch for it

    @unittest.skipUnless(HAVE_TORCH, "torch not installed")
    def test_nonfinite_input_rows(self):
        import torch
        nan, inf = float("nan"), float("inf")
        h = torch.tensor([[1.0, nan], [inf, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=torch.bfloat16)
        valid = torch.tensor([False, True, False, True])
        z = rc.nonfinite_input_rows(torch, "zero-ignored-rows", h, valid)
        self.assertEqual(z.dtype, torch.bfloat16)
        self.assertEqual(z[0].tolist(), [0.0, 0.0])  # NaN gone: where(), not 0 * NaN
        self.assertEqual(z[2].tolist(), [0.0, 0.0])
        self.assertEqual(z[1, 0].item(), inf)  # a valid token keeps its values
        n = rc.nonfinite_input_rows(torch, "nan-nonfinite-rows", h, valid)
        self.assertTrue(n[:2].isnan().all())  # the +Inf row is all NaN too, as its logits must be
        self.assertEqual(n[2:].tolist(), h[2:].tolist())

    @unittest.skipUnless(HAVE_TORCH, "torch not installed")
    def test_tf32_emulation_is_cvt_rna(self):
        import torch
        rng = random.Random(5)
        xs = [rng.uniform(-4, 4) * 2.0 ** rng.randint(-30, 30) for _ in range(2000)]
        xs += [1 + 2 ** -11, -(1 + 3 * 2 ** -11), 1 + 2 ** -11 + 2 ** -23, 0.0, -0.0, 2.0 ** -130]  # ties, subnormal
        x = torch.tensor(xs, dtype=torch.float32)
        got = rc.Arith(torch, "cpu").tf32(x).tolist()
        want = [lx.round_tf32(lx.to_float32(v)) for v in xs]
        self.assertEqual(got, want)

    @unittest.skipIf(HAVE_TORCH, "torch installed")
    def test_run_without_torch_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            p = self.run_script("run", "--subject", "torch-eager", tmp)
        self.assertEqual(p.returncode, 2)
        self.assertIn("run needs torch", p.stderr)


if __name__ == "__main__":
    unittest.main()
