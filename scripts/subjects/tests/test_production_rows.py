"""production_rows.py on synthetic results of gpu_external.sh's production stage: a subject's row takes
its metrics from the judge's JSON and its time and memory from the adapter's meta.json; an unreadable
judge file (a judge stopped at its limit) is an error row unless a later directory judged the subject;
a reference without its error magnitudes is said outright (no_mags) or read from the missing maxscaled;
--version replaces an adapter's version text; no results at all is exit 2; --golden-dir judges a real
judge's JSON (torch eager at 8192 x 4096 x 152064 on an H100, tests/data/) again against another golden,
which can turn its verdict, and refuses a directory without the class's golden."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import production_rows  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TORCH_152064 = os.path.join(HERE, "data", "judge-torch-eager-n8192-v152064.json")

CASE = "bf16.untied.tp1.n16384.h8192.v152064.vp152064.vc4096.mean.ign5.fresh.normal.s1"


def output(relerr, bias, no_mags=None, maxscaled=None):
    o = {"judged": 100, "relerr": relerr, "bias": bias, "maxscaled": maxscaled,
         "budget_pct": {"relerr": 40.0, "bias": 0.0}, "bound": {"relerr": 2 * relerr, "bias": None}}
    if no_mags is not None:
        o["no_mags"] = no_mags
        o["unbounded"] = ["relerr"] if no_mags else []
    return o


def write_judged(d, subject, no_mags=None, maxscaled=None, meta=None, status="pass"):
    case = {"id": CASE, "status": status, "summary": "pass (max 40% d_hidden relerr)",
            "outputs": {"loss": output(4e-6, None, no_mags, maxscaled),
                        "d_hidden": output(2e-3, 1.3e-3, no_mags, maxscaled),
                        "d_weight": output(2.1e-3, 1.2e-3, no_mags, maxscaled)}}
    with open(os.path.join(d, f"prod-1-{subject}.json"), "w") as f:
        json.dump({"verb": "judge", "golden": "/root/work/golden/sm_90/fused-cuda.golden", "cases": [case]}, f)
    if meta:
        m = os.path.join(d, f"meta-prod-1-{subject}", "0000-" + CASE, "out")
        os.makedirs(m)
        with open(os.path.join(m, "meta.json"), "w") as f:
            json.dump(meta, f)


def run(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = production_rows.main(list(argv))
    return rc, out.getvalue()


class ProductionRowsTest(unittest.TestCase):
    def test_rows_from_judges_and_meta(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            write_judged(a, "fused-cuda", maxscaled=1e-3)  # an lcecheck subject: no meta.json, magnitudes
            open(os.path.join(a, "prod-1-liger.json"), "w").close()  # its judge stopped at the limit
            write_judged(b, "liger", no_mags=True,
                         meta={"version": "liger-kernel 0.8.5", "setting": "default", "seconds": 0.1861,
                               "peak_extra_bytes": 3072409600})
            write_judged(b, "megatron-fused-lce", meta={"version": "Megatron-LM unknown", "seconds": 0.2674})
            js = os.path.join(b, "rows.json")
            rc, text = run(a, b, "--version", "megatron-fused-lce=PR 3345 head c55fa113", "--json", js)
            self.assertEqual(rc, 0)
            with open(js) as f:
                rows = {r["subject"]: r for r in json.load(f)}
            self.assertEqual(set(rows), {"fused-cuda", "liger", "megatron-fused-lce"})
            self.assertTrue(rows["fused-cuda"]["reference_magnitudes"])
            self.assertIsNone(rows["fused-cuda"].get("ms"))
            liger = rows["liger"]
            self.assertEqual((liger["status"], liger["ms"], liger["peak_extra_gb"]), ("pass", 186.1, 3.07))
            self.assertEqual((liger["dh_relerr"], liger["dh_bias"], liger["loss_relerr"]), (2e-3, 1.3e-3, 4e-6))
            self.assertFalse(liger["reference_magnitudes"])
            self.assertEqual(liger["unbounded"]["loss"], ["relerr"])
            self.assertEqual(liger["budget"]["d_hidden"], {"relerr": 40.0})
            self.assertFalse(rows["megatron-fused-lce"]["reference_magnitudes"])  # no maxscaled: none
            self.assertEqual(rows["megatron-fused-lce"]["version"], "PR 3345 head c55fa113")
            self.assertIn("liger", text)
            self.assertIn("NO;", text)

    def test_one_row_per_case_and_subject(self):
        global CASE
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            write_judged(a, "liger")
            saved, CASE = CASE, CASE.replace("n16384.h8192.v152064.vp152064", "n4096.h4096.v262144.vp262144")
            try:
                write_judged(b, "liger")
            finally:
                CASE = saved
            js = os.path.join(b, "rows.json")
            rc, text = run(a, b, "--json", js)
            with open(js) as f:
                self.assertEqual(len(json.load(f)), 2)
            self.assertIn("v262144", text)

    def test_a_judged_row_replaces_a_skip_and_an_unreadable_file_with_its_adapter_output(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            write_judged(a, "cce", status="skip")
            open(os.path.join(a, "prod-1-liger.json"), "w").close()  # the only subject of its tag in a
            m = os.path.join(a, "meta-prod-1-liger", "0000-" + CASE, "out")
            os.makedirs(m)
            with open(os.path.join(m, "meta.json"), "w") as f:
                json.dump({"version": "liger-kernel 0.8.5"}, f)
            with open(os.path.join(a, "prod-2-torch-eager.json"), "w") as f:
                json.dump([1, 2], f)  # not a judge's output
            write_judged(b, "cce")
            write_judged(b, "liger", no_mags=False)
            js = os.path.join(b, "rows.json")
            rc, _ = run(a, b, "--note", "an older judge", "--json", js)
            with open(js) as f:
                rows = {(r["case"], r["subject"]): r for r in json.load(f)}
            self.assertEqual(rc, 0)
            self.assertEqual(rows[(CASE, "cce")]["status"], "pass")  # not the skip
            self.assertEqual(rows[(CASE, "liger")]["status"], "pass")  # the error row took its case from meta
            self.assertTrue(rows[(CASE, "liger")]["reference_magnitudes"])
            self.assertEqual(rows[(CASE, "liger")]["golden"], "golden/sm_90/fused-cuda.golden")
            self.assertEqual(rows[(CASE, "liger")]["note"], "an older judge")
            self.assertEqual([r["status"] for k, r in rows.items() if k[1] == "torch-eager"], ["error"])
            self.assertEqual(len(rows), 3)

    def test_unreadable_alone_is_an_error_row_and_nothing_is_exit_2(self):
        with tempfile.TemporaryDirectory() as a:
            open(os.path.join(a, "prod-1-cce.json"), "w").close()
            rc, text = run(a)
            self.assertEqual(rc, 0)
            self.assertIn("unreadable", text)
        with tempfile.TemporaryDirectory() as a:
            with contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(run(a)[0], 2)

    def test_golden_dir_judges_again(self):
        with tempfile.TemporaryDirectory() as res, tempfile.TemporaryDirectory() as loose:
            with open(TORCH_152064) as f, open(os.path.join(res, "prod-1-torch-eager.json"), "w") as g:
                g.write(f.read())
            # the committed golden: the folded mean factor's bias fails, and so does the weight gradient's relerr
            js = os.path.join(res, "rows.json")
            rc, _ = run(res, "--golden-dir", os.path.join(REPO, "golden", "sm_90"), "--json", js)
            self.assertEqual(rc, 0)
            with open(js) as f:
                row = json.load(f)[0]
            self.assertEqual(row["status"], "fail")
            self.assertGreater(row["budget"]["d_weight"]["bias"], 100.0)
            self.assertEqual(row["golden"], "golden/sm_90/fused-cuda.golden")
            self.assertEqual(row["judged_on_device"]["status"], "fail")
            # a golden 1000 times looser in every gradient entry passes the same measurements
            with open(os.path.join(REPO, "golden", "sm_90", "fused-cuda.golden")) as f:
                lines = f.read().split("\n")
            scaled = [" ".join(t.split("=")[0] + "=" + float.hex(1000 * float.fromhex(t.split("=")[1])) if "=" in t else t
                               for t in ln.split(" ")) if " d_" in ln and not ln.startswith("#") else ln for ln in lines]
            with open(os.path.join(loose, "fused-cuda.golden"), "w") as f:
                f.write("\n".join(scaled))
            rc, text = run(res, "--golden-dir", loose, "--json", js)
            with open(js) as f:
                row = json.load(f)[0]
            self.assertEqual((rc, row["status"]), (0, "pass"))
            self.assertEqual(row["judged_on_device"]["status"], "fail")
            self.assertIn("pass (max", row["summary"])
            # no golden of the class there: exit 2, nothing written over
            os.remove(os.path.join(loose, "fused-cuda.golden"))
            with contextlib.redirect_stderr(io.StringIO()) as err:
                self.assertEqual(run(res, "--golden-dir", loose, "--json", js)[0], 2)
            self.assertIn("no golden", err.getvalue())
            with open(js) as f:
                self.assertEqual(json.load(f)[0]["status"], "pass")


if __name__ == "__main__":
    unittest.main()
