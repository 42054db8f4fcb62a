"""Self-test of reference_runner.py: its gradients against central finite differences of its own
loss over every option (so the forward and backward agree with each other), its forward against a
closed form, the semantics lce_case.h fixes (untouched buffers, padding, ignored tokens, poison, the
empty mean), the export round trip, that the seeded bug really is worse, and its speed."""
import math
import os
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import case_factory  # noqa: E402
import lce_exchange as lx  # noqa: E402
import reference_runner as rr  # noqa: E402


class Export:
    """A temporary export of some cases."""

    def __init__(self, cases):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        case_factory.make_export(self.dir, cases)

    def __del__(self):
        self.tmp.cleanup()

    def case(self, k=0):
        return lx.Case(os.path.join(self.dir, f"case{k}"))

    def output(self, k, name):
        c = self.case(k)
        data = lx.read_npy(os.path.join(c.dir, c.outputs[name]["file"]))[2]
        return lx.decode(c.outputs[name]["dtype"], data)


def one_case(seed=1, poison=None, ignore_frac=0.25, **kw):
    f = case_factory.case_fields(**kw)
    return Export([(f, case_factory.make_inputs(f, seed=seed, poison=poison, ignore_frac=ignore_frac))])


def objective(c, inp):
    """The scalar whose gradient the backward computes: sum_n grad_output[n] loss[n] (none) or
    grad_output[0] * loss."""
    out = rr.flce_reference(c, inp)
    if c.reduction == "none":
        return math.fsum(g * x for g, x in zip(inp.grad_output, out["loss_token"]))
    return inp.grad_output[0] * out["loss"][0]


def rel_max_diff(a, b):
    scale = max(max(abs(x) for x in b), 1e-300)
    return max(abs(x - y) for x, y in zip(a, b)) / scale


class FiniteDifferenceTest(unittest.TestCase):
    OPTIONS = [
        dict(reduction="mean"),
        dict(reduction="sum", tied=True),
        dict(reduction="none", softcap=3),
        dict(reduction="mean", z_loss=0.01, class_weights=True),
        dict(reduction="none", label_smoothing={"form": "pytorch", "eps": 0.2}, class_weights=True),
        dict(reduction="mean", label_smoothing={"form": "megatron", "eps": 0.1}, z_loss=0.003, softcap=5),
        dict(reduction="sum", dtype="float32", gemm="tf32", softcap=2, ignore_index=7),
    ]

    def test_gradients_match_finite_differences(self):
        for opts in self.OPTIONS:
            with self.subTest(**{k: str(v) for k, v in opts.items()}):
                ex = one_case(prior_grad=False, n=5, h=4, v=9, vp=12, seed=7, **opts)
                c = ex.case()
                inp = rr.Inputs(c)
                out = rr.flce_reference(c, inp)
                delta = 1e-5
                fd_h = []
                for i in range(c.n):
                    for k in range(c.h):
                        x = inp.hidden[i][k]
                        inp.hidden[i][k] = x + delta
                        up = objective(c, inp)
                        inp.hidden[i][k] = x - delta
                        down = objective(c, inp)
                        inp.hidden[i][k] = x
                        fd_h.append((up - down) / (2 * delta))
                fd_w = []
                for j in range(c.v):
                    for k in range(c.h):
                        x = inp.w[j][k]
                        inp.w[j][k] = x + delta
                        up = objective(c, inp)
                        inp.w[j][k] = x - delta
                        down = objective(c, inp)
                        inp.w[j][k] = x
                        fd_w.append((up - down) / (2 * delta))
                self.assertGreater(max(map(abs, fd_h)), 1e-3)  # not vacuous
                self.assertLess(rel_max_diff(out["d_hidden"], fd_h), 1e-6)
                got_w = out[c.output_weight_grad][:c.v * c.h]
                self.assertLess(rel_max_diff(got_w, fd_w), 1e-6)

    def test_forward_closed_form(self):
        # One token, h 1, v 2: loss = log(e^a + e^b) - a with a = h w0, b = h w1.
        f = case_factory.case_fields(n=1, h=1, v=2, vp=2, reduction="sum", dtype="float32")
        inputs = case_factory.make_inputs(f, ignore_frac=0.0)
        inputs["hidden"] = ("float32", [1, 1], [2.0])
        inputs["weight"] = ("float32", [2, 1], [0.5, -1.5])
        inputs["labels"] = ("int64", [1], [0])
        ex = Export([(f, inputs)])
        out = rr.flce_reference(ex.case(), rr.Inputs(ex.case()))
        self.assertAlmostEqual(out["loss"][0], math.log1p(math.exp(-4.0)), places=15)
        self.assertAlmostEqual(out["lse"][0], math.log(math.exp(1.0) + math.exp(-3.0)), places=15)
        # p_y -> 1: the loss keeps its relative accuracy instead of cancelling to 0.
        inputs["weight"] = ("float32", [2, 1], [20.0, -20.0])
        ex = Export([(f, inputs)])
        out = rr.flce_reference(ex.case(), rr.Inputs(ex.case()))
        self.assertAlmostEqual(out["loss"][0] / math.exp(-80.0), 1.0, places=12)


class SemanticsTest(unittest.TestCase):
    def run_export(self, ex, *extra):
        self.assertEqual(rr.main(list(extra) + [ex.dir]), 0)

    def test_untied_embedding_and_padding_untouched(self):
        for tied in (False, True):
            ex = one_case(tied=tied)
            self.run_export(ex)
            c = ex.case()
            prior_e = c.input_values("grad_embedding_prior")
            got_e = ex.output(0, "grad_embedding")
            pad = slice(c.v * c.h, c.vp * c.h)
            if tied:
                self.assertEqual(got_e[pad], prior_e[pad])
                self.assertNotEqual(got_e[:c.v * c.h], prior_e[:c.v * c.h])
            else:
                self.assertEqual(got_e, prior_e)  # bit for bit
                prior_w, got_w = c.input_values("grad_weight_prior"), ex.output(0, "grad_weight")
                self.assertEqual(got_w[pad], prior_w[pad])
                self.assertNotEqual(got_w[:c.v * c.h], prior_w[:c.v * c.h])

    def test_ignored_tokens_and_empty_mean(self):
        ex = one_case(reduction="mean", ignore_frac=1.0)
        self.run_export(ex)
        self.assertEqual(ex.output(0, "loss"), [0.0])
        self.assertEqual(set(ex.output(0, "d_hidden")), {0.0})
        self.assertEqual(ex.output(0, "grad_weight"), ex.case().input_values("grad_weight_prior"))
        ex = one_case(reduction="none", ignore_frac=0.5, seed=3)
        self.run_export(ex)
        c, lt, dh = ex.case(), ex.output(0, "loss_token"), ex.output(0, "d_hidden")
        labels = c.input_values("labels")
        self.assertIn(c.ignore_index, labels)
        for i, y in enumerate(labels):
            if y == c.ignore_index:
                self.assertEqual(lt[i], 0.0)
                self.assertEqual(set(dh[i * c.h:(i + 1) * c.h]), {0.0})
            else:
                self.assertGreater(lt[i], 0.0)
        self.assertAlmostEqual(ex.output(0, "loss")[0], math.fsum(lt), delta=1e-5 * math.fsum(lt))

    def test_poison_propagates_as_lce_oracle(self):
        ex = one_case(poison="hidden", ignore_frac=0.0, n=6)
        self.run_export(ex)
        c, dh, lse = ex.case(), ex.output(0, "d_hidden"), ex.output(0, "lse")
        self.assertTrue(math.isnan(lse[1]) and math.isnan(lse[2]) and not math.isnan(lse[0]))
        self.assertTrue(all(math.isnan(x) for x in dh[c.h:3 * c.h]))
        self.assertFalse(any(math.isnan(x) for x in dh[:c.h]))
        self.assertTrue(math.isnan(ex.output(0, "loss")[0]))
        gw = ex.output(0, "grad_weight")
        self.assertTrue(all(math.isnan(x) for x in gw[:c.v * c.h]))
        self.assertEqual(gw[c.v * c.h:], c.input_values("grad_weight_prior")[c.v * c.h:])
        # A poisoned ignored token contributes exactly nothing.
        ex = one_case(poison="hidden", ignore_frac=0.0, n=6)
        c = ex.case()
        labels = c.input_values("labels")
        labels[1] = labels[2] = c.ignore_index
        lx.write_npy(os.path.join(c.dir, "labels.npy"), "<i8", [c.n], lx.encode("int64", labels))
        self.run_export(ex)
        self.assertFalse(math.isnan(ex.output(0, "loss")[0]))
        self.assertEqual(ex.output(0, "loss_token")[1:3], [0.0, 0.0])
        self.assertTrue(math.isnan(ex.output(0, "lse")[1]))

    def test_outputs_are_rounded_once_and_meta_written(self):
        ex = one_case(dtype="float16")
        self.run_export(ex)
        c = ex.case()
        exact = rr.flce_reference(c, rr.Inputs(c))
        self.assertEqual(ex.output(0, "d_hidden"), [lx.round_to_format(x, "float16") for x in exact["d_hidden"]])
        self.assertEqual(ex.output(0, "lse"), [lx.to_float32(x) for x in exact["lse"]])
        self.assertTrue(os.path.exists(os.path.join(c.out_dir, "meta.json")))
        self.assertEqual(rr.main(["--case", "nope", ex.dir]), 2)


class SeededBugTest(unittest.TestCase):
    def test_bf16_accumulation_is_worse(self):
        # The default matrix's shape at 150 chunks of 2 rows.
        f = case_factory.case_fields(n=16, h=32, v=300, vp=384, vocab_chunk=2, reduction="sum")
        ex = Export([(f, case_factory.make_inputs(f, seed=5, scale=2.0, ignore_frac=0.1))])
        c = ex.case()
        inp = rr.Inputs(c)
        exact = rr.flce_reference(c, inp)["d_hidden"]
        plain = [lx.round_to_format(x, "bfloat16") for x in exact]
        buggy = rr.flce_reference(c, inp, bug="bf16-dhidden-accum")["d_hidden"]
        norm = math.sqrt(math.fsum(x * x for x in exact))
        err_plain = math.sqrt(math.fsum((a - b) ** 2 for a, b in zip(plain, exact))) / norm
        err_bug = math.sqrt(math.fsum((a - b) ** 2 for a, b in zip(buggy, exact))) / norm
        self.assertGreater(err_bug, 2 * err_plain)  # ~2.8x here; the judge's bound decides the verdict
        # fp32 cases: the running sum rounded to fp32 is harmless.
        f32 = case_factory.case_fields(dtype="float32", vocab_chunk=2)
        ex32 = Export([(f32, case_factory.make_inputs(f32))])
        c32 = ex32.case()
        a = rr.flce_reference(c32, rr.Inputs(c32), bug="bf16-dhidden-accum")["d_hidden"]
        b = rr.flce_reference(c32, rr.Inputs(c32))["d_hidden"]
        self.assertLess(rel_max_diff(a, b), 1e-5)


class SpeedTest(unittest.TestCase):
    def test_ten_default_sized_cases_in_seconds(self):
        cases = []
        for k in range(10):
            f = case_factory.case_fields(id=f"c{k}", n=16, h=32, v=300, vp=384, vocab_chunk=50,
                                         reduction=("none", "sum", "mean")[k % 3], tied=bool(k % 2))
            cases.append((f, case_factory.make_inputs(f, seed=k)))
        ex = Export(cases)
        start = time.perf_counter()
        self.assertEqual(rr.main([ex.dir]), 0)
        self.assertLess(time.perf_counter() - start, 20.0)


if __name__ == "__main__":
    unittest.main()
