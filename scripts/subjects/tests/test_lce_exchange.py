"""Unit tests of lce_exchange.py: .npy reading and writing (and rejection of malformed files), the
number formats, case.json and manifest validation, and the files a runner writes."""
import json
import math
import os
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import case_factory  # noqa: E402
import lce_exchange as lx  # noqa: E402


def npy_with_header(text, data=b"", version=b"\x01\x00"):
    raw = text.encode("latin1")
    return lx.NPY_MAGIC + version + struct.pack("<H", len(raw)) + raw + data


class NpyTest(unittest.TestCase):
    def test_round_trip_every_descr(self):
        for dtype, values in (("float32", [1.5, -2.25, 0.0, 2.0 ** 127]), ("int64", [-100, 0, 2 ** 40, -(2 ** 63)]),
                              ("bfloat16", [1.0, -0.5, 3.140625, 2.0 ** -133]), ("float16", [1.0, -65504.0, 2 ** -24, 0.0999755859375])):
            descr = lx.DTYPES[dtype][0]
            blob = lx.npy_bytes(descr, (2, 2), lx.encode(dtype, values))
            got_descr, shape, data = lx.parse_npy(blob)
            self.assertEqual((got_descr, shape), (descr, (2, 2)))
            self.assertEqual(lx.decode(dtype, data), values)

    def test_header_is_numpy_shaped(self):
        blob = lx.npy_bytes("<f4", (3,), b"\0" * 12)
        hlen = struct.unpack("<H", blob[8:10])[0]
        self.assertEqual((10 + hlen) % 64, 0)
        self.assertTrue(blob[10:10 + hlen].decode().startswith("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"))
        self.assertEqual(lx.parse_npy(lx.npy_bytes("<i8", (), b"\0" * 8))[1], ())

    def test_version_2_header(self):
        text = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n"
        blob = lx.NPY_MAGIC + b"\x02\x00" + struct.pack("<I", len(text)) + text.encode() + b"\0\0\x80\x3f"
        self.assertEqual(lx.decode("float32", lx.parse_npy(blob)[2]), [1.0])

    def test_malformed_files_are_rejected(self):
        ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n"
        cases = {
            "bad magic": b"\x93NUMPX\x01\x00" + b"\0" * 20,
            "too short": b"\x93NUM",
            "version": npy_with_header(ok, b"\0" * 8, version=b"\x04\x00"),
            "past the end": lx.NPY_MAGIC + b"\x01\x00" + struct.pack("<H", 500) + ok.encode(),
            "newline": npy_with_header(ok.strip() + " ", b"\0" * 8),
            "literal": npy_with_header("{'descr': <f4}\n", b"\0" * 8),
            "exactly": npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n", b"\0" * 8),
            "fortran_order": npy_with_header(ok.replace("False", "True"), b"\0" * 8),
            "unsupported descr": npy_with_header(ok.replace("<f4", "<f8"), b"\0" * 16),
            "big endian": npy_with_header(ok.replace("<f4", ">f4"), b"\0" * 8),
            "non-negative": npy_with_header(ok.replace("(2,)", "(-2,)"), b""),
            "tuple": npy_with_header(ok.replace("(2,)", "[2]"), b"\0" * 8),
            "needs 8": npy_with_header(ok, b"\0" * 7),
            "needs 8 ": npy_with_header(ok, b"\0" * 9),
            "not a Python literal": npy_with_header("__import__('os')\n", b""),
            "must hold exactly": npy_with_header("[1, 2]\n", b""),
        }
        for what, blob in cases.items():
            with self.subTest(what):
                with self.assertRaises(lx.ExchangeError) as cm:
                    lx.parse_npy(blob, "f.npy")
                self.assertIn("f.npy", str(cm.exception))

    def test_writer_refuses_wrong_size(self):
        with self.assertRaises(lx.ExchangeError):
            lx.npy_bytes("<f4", (2,), b"\0" * 4)
        with self.assertRaises(lx.ExchangeError):
            lx.npy_bytes("<f8", (1,), b"\0" * 8)


class FormatTest(unittest.TestCase):
    def test_bf16_rounds_to_nearest_even_from_double(self):
        r = lx.round_to_format
        self.assertEqual(r(1 + 2 ** -8, "bfloat16"), 1.0)                 # tie to even (down)
        self.assertEqual(r(1 + 3 * 2 ** -8, "bfloat16"), 1 + 2 ** -6)     # tie to even (up)
        self.assertEqual(r(1 + 2 ** -8 + 2 ** -30, "bfloat16"), 1 + 2 ** -7)
        # Via float32 first this would round twice: 1 + 2^-8 + 2^-40 -> 1 + 2^-8 -> 1.
        self.assertEqual(r(1 + 2 ** -8 + 2 ** -40, "bfloat16"), 1 + 2 ** -7)
        self.assertEqual(r(3.5e38, "bfloat16"), math.inf)
        self.assertEqual(r(-2 ** -133, "bfloat16"), -2 ** -133)           # smallest subnormal
        self.assertEqual(r(2 ** -134, "bfloat16"), 0.0)                   # tie to even: 0
        self.assertEqual(lx.float_to_bf16_bits(-2.0), 0xC000)
        self.assertEqual(lx.float_to_bf16_bits(math.nan) & 0x7FC0, 0x7FC0)
        self.assertEqual(lx.decode("bfloat16", struct.pack("<H", 0x3F80)), [1.0])

    def test_fp16_and_fp32(self):
        for x in (1.0, 65504.0, 2 ** -24, -3.1415926, 1e-6):
            self.assertEqual(lx.round_to_format(x, "float16"), struct.unpack("<e", struct.pack("<e", x))[0])
        self.assertEqual(lx.round_to_format(65520.0, "float16"), math.inf)
        self.assertEqual(lx.round_to_format(65519.0, "float16"), 65504.0)
        self.assertEqual(lx.to_float32(1 + 2 ** -24), 1.0)
        self.assertEqual(lx.to_float32(2 ** -150 * 3), 2 ** -149 * 2)
        self.assertEqual(lx.decode("float16", struct.pack("<H", lx.float_to_fp16_bits(0.333))),
                         [lx.round_to_format(0.333, "float16")])

    def test_tf32_ties_away_from_zero(self):
        self.assertEqual(lx.round_tf32(1 + 2 ** -11), 1 + 2 ** -10)
        self.assertEqual(lx.round_tf32(-(1 + 2 ** -11)), -(1 + 2 ** -10))
        self.assertEqual(lx.round_tf32(1 + 2 ** -12), 1.0)
        self.assertEqual(lx.round_tf32(3 * 2 ** -137), 2 ** -135)        # fp32 subnormal: quantum 2^-136, tie away
        self.assertEqual(lx.round_tf32(3 * 2 ** -140), 0.0)
        self.assertTrue(math.isnan(lx.round_tf32(math.nan)))
        self.assertEqual(lx.round_tf32(3.4028234663852886e38), math.inf)


class CaseTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def export(self, **kw):
        f = case_factory.case_fields(**kw)
        case_factory.make_export(self.dir, [(f, case_factory.make_inputs(f))])
        return lx.Case(os.path.join(self.dir, "case0"))

    def edit_case(self, fn):
        path = os.path.join(self.dir, "case0", "case.json")
        with open(path) as f:
            j = json.load(f)
        fn(j)
        with open(path, "w") as f:
            json.dump(j, f)

    def test_load_and_inputs(self):
        c = self.export(class_weights=True, label_smoothing={"form": "megatron", "eps": 0.1})
        self.assertEqual([cid for cid, _ in lx.load_manifest(self.dir)], ["test"])
        self.assertEqual(len(c.input_values("hidden")), c.n * c.h)
        self.assertAlmostEqual(c.smoothing, 0.1 * 20 / 19)
        self.assertEqual(sorted(c.outputs), sorted(["loss", "loss_token", "lse", "d_hidden", "grad_embedding", "grad_weight"]))
        self.assertNotIn("grad_weight", self.export(tied=True).outputs)

    def test_malformed_case_json(self):
        edits = {
            "format": lambda j: j.update(format="x"),
            "field n": lambda j: j.pop("n"),
            "not bool": lambda j: j.update(tied=1),
            "dtype": lambda j: j.update(dtype="float64"),
            "disagrees": lambda j: j.update(output_weight="embedding"),
            "relative path": lambda j: j["inputs"]["hidden"].update(file="../x.npy"),
            "input weight missing": lambda j: j["inputs"].pop("weight"),
            "label_smoothing": lambda j: j.update(label_smoothing={"form": "nemo"}),
            "bad shape": lambda j: j.update(vp=3),
        }
        for what, fn in edits.items():
            with self.subTest(what):
                self.export()
                self.edit_case(fn)
                with self.assertRaises(lx.ExchangeError) as cm:
                    lx.Case(os.path.join(self.dir, "case0"))
                self.assertIn("case.json", str(cm.exception))

    def test_input_must_match_case_json(self):
        c = self.export()
        lx.write_npy(os.path.join(c.dir, "hidden.npy"), "<f4", (c.n, c.h), b"\0" * (4 * c.n * c.h))
        with self.assertRaises(lx.ExchangeError):
            c.input_values("hidden")

    def test_malformed_manifest(self):
        self.export()
        path = os.path.join(self.dir, "manifest.json")
        for text in ('{"format": "lcecheck-exchange", "version": 2, "cases": []}', "not json",
                     '{"format": "lcecheck-exchange", "version": 1, "cases": [{"id": "a", "dir": "/abs"}]}',
                     '{"format": "lcecheck-exchange", "version": 1, "cases": [{"id": "a", "dir": "x"}, {"id": "a", "dir": "y"}]}'):
            with open(path, "w") as f:
                f.write(text)
            with self.assertRaises(lx.ExchangeError):
                lx.load_manifest(self.dir)

    def test_outputs_meta_skip(self):
        c = self.export()
        c.write_output("loss_token", [0.1] * c.n)
        c.write_output("d_hidden", [0.5] * (c.n * c.h))
        descr, shape, data = lx.read_npy(os.path.join(c.dir, "out", "d_hidden.npy"))
        self.assertEqual((descr, shape), ("<u2", (c.n, c.h)))
        self.assertEqual(set(lx.decode("bfloat16", data)), {0.5})
        with self.assertRaises(lx.ExchangeError):
            c.write_meta({"subject": "x"})
        with self.assertRaises(lx.ExchangeError):
            c.write_meta({"subject": "x", "version": "1", "setting": "default", "device": "cpu", "seconds": 0,
                          "peak_extra_bytes": 0, "missing": ["logits"]})
        c.write_meta({"subject": "x", "version": "1", "setting": "default", "device": "cpu", "seconds": 0.1,
                      "peak_extra_bytes": 0, "missing": ["lse"]})
        with open(os.path.join(c.out_dir, "meta.json")) as f:
            self.assertEqual(json.load(f)["missing"], ["lse"])
        c.write_skip("no class\nweights")
        self.assertEqual(case_factory.read_skip(c.dir), "no class weights")
        c.clear_out()
        self.assertFalse(os.path.exists(c.out_dir))
        self.assertIsNone(case_factory.read_skip(c.dir))


if __name__ == "__main__":
    unittest.main()
