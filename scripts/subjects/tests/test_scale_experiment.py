"""The scalar part of scale_experiment.py: bf16 rounding and the choice of a go' whose mean scale is
bf16-exact (the GPU part needs torch and a GPU and is not run here)."""
import importlib.util
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import scale_experiment as se  # noqa: E402


class ScaleExperimentScalars(unittest.TestCase):
    def test_bf16_rounds_to_nearest_even(self):
        self.assertEqual(se.bf16(1.0), 1.0)
        self.assertEqual(se.bf16(1.0 + 2.0 ** -8), 1.0)  # tie: to even
        self.assertEqual(se.bf16(1.0 + 3 * 2.0 ** -9), 1.0 + 2.0 ** -7)
        self.assertEqual(se.bf16(1.0 + 2.0 ** -9 + 2.0 ** -20), 1.0)

    def test_scale_errors_of_the_production_case(self):
        n = 7782
        g = se.f32(se.GO_DRAWN / n)
        self.assertAlmostEqual(se.bf16(g) / g - 1, 1.2849e-3, delta=1e-7)
        self.assertAlmostEqual(se.bf16(1.0 / n) * n - 1, 1.9016e-3, delta=1e-7)

    def test_exact_go_makes_the_scale_bf16_exact(self):
        for n in (7782, 8191, 1000, 3):
            go = se.exact_go(se.GO_DRAWN, n)
            g = se.f32(go / n)
            self.assertEqual(se.bf16(g), g)
            self.assertLess(abs(go / se.GO_DRAWN - 1), 2 ** -7)

    def test_go_values(self):
        gos = se.go_values("drawn,exact,one,0.5", 7782)
        self.assertEqual([t for t, _ in gos], ["drawn", "bf16-exact g", "one", "0.5"])
        self.assertEqual(gos[0][1], se.f32(se.GO_DRAWN))
        self.assertEqual(gos[1][1], se.exact_go(se.GO_DRAWN, 7782))
        self.assertEqual((gos[2][1], gos[3][1]), (1.0, 0.5))
        with self.assertRaises(SystemExit):
            se.go_values("drawn,nonsense", 7782)

    @unittest.skipUnless(importlib.util.find_spec("torch"), "torch not installed")
    def test_double_rounding(self):
        import torch
        w = torch.randn(200000, generator=torch.Generator().manual_seed(3)).bfloat16()
        for go in (1.0, 0.5, 2.0 ** -7):
            self.assertEqual(se.double_rounding(torch, w, go), 0.0)  # a power of two: exact
        self.assertAlmostEqual(se.double_rounding(torch, w, 0.9804795980453491), -3.2e-4, delta=2e-5)


if __name__ == "__main__":
    unittest.main()
