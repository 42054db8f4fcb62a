"""bias_table.py on synthetic results of gpu_external.sh's bias stage: check/judge --json files per tag
and subject and each tag's grad_output. The table shows every subject at each n_valid with its metrics,
a subject whose judge errored says why, the folded-factor roundings are those of bf16 arithmetic, and
the --json it writes is scripts/tests/data/bias-synthetic.json, which the plot test draws
(scripts/CMakeLists.txt: plots_bias)."""
import contextlib
import io
import json
import os
import struct
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import bias_table  # noqa: E402
import lce_exchange as lx  # noqa: E402

SYNTHETIC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "data", "bias-synthetic.json")
GO = 0.9804795980453491  # an fp32 number: go/8192 is within 1.1e-5 of a bf16 number
CASE = "bf16.untied.tp1.n8192.h4096.v128256.vp128256.vc4096.mean.ign{}.fresh.normal.s98"
# subject -> tag -> (d_hidden relerr, bias, d_weight relerr, bias)
METRICS = {"fused-cuda": {"ign0": (1.7e-3, -4e-6, 1.3e-3, -8e-6), "ign5": (2.0e-3, -8.6e-4, 1.5e-3, -8.6e-4)},
           "liger": {"ign0": (1.8e-3, -5e-5, 1.7e-3, -2e-5), "ign5": (3.5e-3, 1.9e-3, 4.7e-3, 1.8e-3)}}


def write_results(d):
    for subject, per_tag in METRICS.items():
        for tag, (dhr, dhb, dwr, dwb) in per_tag.items():
            n_valid = 8192 if tag == "ign0" else 7782
            case = {"id": CASE.format(tag[3:]), "dtype": "bf16", "status": "pass", "n_valid": n_valid,
                    "outputs": {"loss": {"relerr": 1e-7, "bias": None},
                                "d_hidden": {"relerr": dhr, "bias": dhb}, "d_weight": {"relerr": dwr, "bias": dwb}}}
            with open(os.path.join(d, f"bias-{tag}-{subject}.json"), "w") as f:
                json.dump({"verb": "judge", "subject": subject, "cases": [case]}, f)
    with open(os.path.join(d, "bias-ign5-cce.json"), "w") as f:
        json.dump({"verb": "judge", "status": "error", "exit": 1, "message": "ZeroDivisionError in the runner"}, f)
    for tag in ("ign0", "ign5"):
        lx.write_npy(os.path.join(d, f"bias-{tag}-grad_output.npy"), "<f4", (1,), struct.pack("<f", GO))


def run(d, *extra):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = bias_table.main([d, *extra])
    return rc, out.getvalue()


class BiasTableTest(unittest.TestCase):
    def test_table_and_json(self):
        with tempfile.TemporaryDirectory() as d:
            write_results(d)
            path = os.path.join(d, "bias.json")
            rc, text = run(d, "--json", path)
            with open(path) as f:
                got = json.load(f)
        self.assertEqual(rc, 0)
        self.assertIn("ign0: " + CASE.format(0) + ": n_valid 8192 (a power of two); go 0.980479598: "
                      "bf16(go/n)/(go/n) - 1 = -1.106e-05, bf16(1/n)·n - 1 = +0.000e+00", text)
        self.assertIn("n_valid 7782 (not a power of two)", text)
        self.assertIn("bf16(go/n)/(go/n) - 1 = -8.592e-04, bf16(1/n)·n - 1 = +1.902e-03", text)
        lines = [ln.split() for ln in text.splitlines() if ln.startswith(("fused-cuda", "liger", "cce"))]
        self.assertEqual([ln[:2] for ln in lines], [["cce", "ign5"], ["fused-cuda", "8192"], ["fused-cuda", "7782"],
                                                    ["liger", "8192"], ["liger", "7782"]])
        self.assertEqual(lines[2][2:6], ["2.000e-03", "-8.600e-04", "1.500e-03", "-8.600e-04"])
        self.assertIn("no case in bias-ign5-cce.json: ZeroDivisionError in the runner", text)
        self.assertEqual([c["n_valid"] for c in got["cases"]], [8192, 7782])
        with open(SYNTHETIC) as f:
            self.assertEqual(got, json.load(f), "scripts/tests/data/bias-synthetic.json is what bias_table.py writes")

    def test_no_results_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(bias_table.main([d]), 2)
            self.assertIn("no bias-TAG-SUBJECT.json files", err.getvalue())

    def test_mixed_cases_under_one_tag_refused(self):
        with tempfile.TemporaryDirectory() as d:
            write_results(d)
            p = os.path.join(d, "bias-ign0-liger.json")
            with open(p) as f:
                j = json.load(f)
            j["cases"][0]["n_valid"] = 8000
            with open(p, "w") as f:
                json.dump(j, f)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(bias_table.main([d]), 2)
            self.assertIn("n_valid 8000 differs from", err.getvalue())


if __name__ == "__main__":
    unittest.main()
