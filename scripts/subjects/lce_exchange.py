"""lce_exchange.py — the lcecheck exchange format v1 (EXCHANGE.md beside this file), standard library
only: the .npy files (v1.0/v2.0, C order, little endian, descr <u2 <f2 <f4 <i8), the bf16/fp16/fp32
rounding of doubles (straight from the double, never via float: bf16 double rounding is a trap), the
manifest and case.json of an exported directory, the files a runner writes into a case's out/
(outputs, meta.json, skip.txt), and the one case of what `lcecheck check|judge --json` answers about
them. Every reader rejects what it does not understand with the file named.

Used by reference_runner.py (CI, no packages) and lce_torch_common.py (GPU adapters)."""
import array
import ast
import json
import math
import os
import shutil
import struct
import sys
import tempfile

FORMAT_MANIFEST = "lcecheck-exchange"
FORMAT_CASE = "lcecheck-case"
VERSION = 1

OUTPUTS = ("loss", "loss_token", "lse", "d_hidden", "grad_embedding", "grad_weight")
# dtype name in case.json -> (npy descr, array typecode, item size)
DTYPES = {
    "bfloat16": ("<u2", "H", 2),
    "float16": ("<f2", "H", 2),
    "float32": ("<f4", "f", 4),
    "int64": ("<i8", "q", 8),
}
DESCRS = {"<u2": ("H", 2), "<f2": ("H", 2), "<f4": ("f", 4), "<i8": ("q", 8)}
NPY_MAGIC = b"\x93NUMPY"


class ExchangeError(Exception):
    """A malformed exchange file; the message names the file."""


# ---- number formats --------------------------------------------------------------------------

# (significand bits including the implicit one, emin, emax) of each binary format.
FORMATS = {"bfloat16": (8, -126, 127), "float16": (11, -14, 15), "float32": (24, -126, 127)}


def round_to_format(x, fmt, ties_away=False):
    """x (a double) rounded to the binary format fmt ("bfloat16", "float16", "float32", or "tf32"
    for fp32's range with 11 significand bits), to nearest with ties to even (or away from zero),
    returned as the double holding that value; overflow gives a signed infinity. Scaling by a power
    of two is exact, so round() sees the exact quotient."""
    if x == 0.0 or math.isnan(x) or math.isinf(x):
        return x
    p, emin, emax = FORMATS["float32"] if fmt == "tf32" else FORMATS[fmt]
    if fmt == "tf32":
        p = 11
    e = max(math.frexp(x)[1] - 1, emin)  # exponent of x's leading bit, clamped for subnormals
    q = e - (p - 1)                      # the exponent of one unit in the last place
    y = math.ldexp(x, -q)
    r = math.floor(abs(y) + 0.5) if ties_away else round(abs(y))
    r = math.copysign(math.ldexp(float(r), q), x)
    max_finite = math.ldexp(2.0 - math.ldexp(1.0, 1 - p), emax)
    return math.copysign(math.inf, x) if abs(r) > max_finite else r


def round_tf32(x):
    """PTX cvt.rna.tf32.f32: 10 explicit mantissa bits, ties away from zero (lce_round_tf32)."""
    return round_to_format(x, "tf32", ties_away=True)


def float_to_bf16_bits(x):
    if math.isnan(x):
        return 0x7FC0 | (0x8000 if math.copysign(1.0, x) < 0 else 0)
    return struct.unpack("<I", struct.pack("<f", round_to_format(x, "bfloat16")))[0] >> 16


def float_to_fp16_bits(x):
    if math.isnan(x):
        return 0x7E00 | (0x8000 if math.copysign(1.0, x) < 0 else 0)
    return struct.unpack("<H", struct.pack("<e", round_to_format(x, "float16")))[0]


def to_float32(x):
    """x rounded to fp32 (to nearest even), as a double."""
    return round_to_format(x, "float32") if not math.isnan(x) else x


# ---- .npy ------------------------------------------------------------------------------------

def parse_npy(blob, name="<bytes>"):
    """(descr, shape, data bytes) of a .npy file's bytes; rejects anything but a C-order array of a
    supported descr whose data has exactly the size its shape says."""
    if len(blob) < 10 or blob[:6] != NPY_MAGIC:
        raise ExchangeError(f"{name}: not a .npy file (bad magic)")
    major, minor = blob[6], blob[7]
    if (major, minor) == (1, 0):
        hlen, start = struct.unpack("<H", blob[8:10])[0], 10
    elif (major, minor) in ((2, 0), (3, 0)):
        if len(blob) < 12:
            raise ExchangeError(f"{name}: truncated .npy header")
        hlen, start = struct.unpack("<I", blob[8:12])[0], 12
    else:
        raise ExchangeError(f"{name}: unsupported .npy version {major}.{minor}")
    if start + hlen > len(blob):
        raise ExchangeError(f"{name}: .npy header length {hlen} runs past the end of the file")
    try:
        text = blob[start:start + hlen].decode("latin1" if major < 3 else "utf8")
    except UnicodeDecodeError:
        raise ExchangeError(f"{name}: .npy header is not text")
    if not text.endswith("\n"):
        raise ExchangeError(f"{name}: .npy header does not end with a newline")
    try:
        header = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ExchangeError(f"{name}: .npy header is not a Python literal: {text.strip()[:80]!r}")
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ExchangeError(f"{name}: .npy header must hold exactly descr, fortran_order, shape")
    descr, shape = header["descr"], header["shape"]
    if header["fortran_order"] is not False:
        raise ExchangeError(f"{name}: fortran_order must be False")
    if descr not in DESCRS:
        raise ExchangeError(f"{name}: unsupported descr {descr!r} (want one of {', '.join(DESCRS)})")
    if not isinstance(shape, tuple) or not all(type(d) is int and d >= 0 for d in shape):
        raise ExchangeError(f"{name}: shape must be a tuple of non-negative ints, got {shape!r}")
    data = blob[start + hlen:]
    want = math.prod(shape) * DESCRS[descr][1]
    if len(data) != want:
        raise ExchangeError(f"{name}: {len(data)} data bytes, shape {shape} of {descr} needs {want}")
    return descr, shape, bytes(data)


def read_npy(path):
    with open(path, "rb") as f:
        return parse_npy(f.read(), path)


def npy_bytes(descr, shape, data):
    """A .npy v1.0 file (header padded to 64 bytes) around raw little-endian data."""
    if descr not in DESCRS:
        raise ExchangeError(f"cannot write descr {descr!r}")
    shape = tuple(int(d) for d in shape)
    if len(data) != math.prod(shape) * DESCRS[descr][1]:
        raise ExchangeError(f"{len(data)} bytes do not fill shape {shape} of {descr}")
    text = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(shape))
    pad = 64 - (10 + len(text) + 1) % 64
    text = text + " " * (pad % 64) + "\n"
    return NPY_MAGIC + b"\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1") + bytes(data)


def _atomic_write(path, blob):
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_npy(path, descr, shape, data):
    _atomic_write(path, npy_bytes(descr, shape, data))


def _typed(typecode, data):
    a = array.array(typecode)
    a.frombytes(data)
    if sys.byteorder == "big":
        a.byteswap()
    return a


def _raw(a):
    if sys.byteorder == "big":
        a = array.array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def decode(dtype, data):
    """The values (floats, or ints for int64) of raw little-endian data of a case.json dtype."""
    typecode = DTYPES[dtype][1]
    a = _typed(typecode, data)
    if dtype == "bfloat16":
        return _typed("f", _raw(array.array("I", (u << 16 for u in a)))).tolist()
    if dtype == "float16":
        return list(struct.unpack("<%de" % len(a), data))
    return a.tolist()


def encode(dtype, values):
    """Raw little-endian data of values in a case.json dtype, each rounded to nearest even straight
    from the double (int64: the ints themselves)."""
    if dtype == "bfloat16":
        return _raw(array.array("H", (float_to_bf16_bits(x) for x in values)))
    if dtype == "float16":
        return _raw(array.array("H", (float_to_fp16_bits(x) for x in values)))
    if dtype == "float32":
        return _raw(array.array("f", (to_float32(x) for x in values)))
    if dtype == "int64":
        return _raw(array.array("q", values))
    raise ExchangeError(f"unknown dtype {dtype!r}")


# ---- manifest and case.json ------------------------------------------------------------------

def _load_json(path):
    try:
        with open(path, encoding="utf8") as f:
            return json.load(f)
    except OSError as e:
        raise ExchangeError(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise ExchangeError(f"{path}: invalid JSON: {e}")


def _relative_subdir(path, sub):
    if not isinstance(sub, str) or not sub or os.path.isabs(sub) or ".." in sub.replace("\\", "/").split("/"):
        raise ExchangeError(f"{path}: case dir {sub!r} must be a relative path inside the export")
    return sub


def load_manifest(export_dir):
    """[(case id, absolute case dir)] of an exported directory, in manifest order."""
    path = os.path.join(export_dir, "manifest.json")
    m = _load_json(path)
    if not isinstance(m, dict) or m.get("format") != FORMAT_MANIFEST or m.get("version") != VERSION:
        raise ExchangeError(f"{path}: not a {FORMAT_MANIFEST} version {VERSION} manifest")
    if not isinstance(m.get("cases"), list):
        raise ExchangeError(f"{path}: cases must be a list")
    cases, seen = [], set()
    for entry in m["cases"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise ExchangeError(f"{path}: every case needs a string id and a dir")
        if entry["id"] in seen:
            raise ExchangeError(f"{path}: case {entry['id']} listed twice")
        seen.add(entry["id"])
        cases.append((entry["id"], os.path.join(export_dir, _relative_subdir(path, entry.get("dir")))))
    return cases


_CASE_FIELDS = {
    "id": str, "n": int, "h": int, "v": int, "vp": int, "tp": int, "vocab_chunk": int, "token_chunk": int,
    "dtype": str, "gemm": str, "tied": bool, "prior_grad": bool, "reduction": str, "ignore_index": int,
    "label_smoothing": dict, "z_loss": (int, float), "softcap": (int, float), "class_weights": bool,
    "output_weight": str, "output_weight_grad": str, "inputs": dict, "outputs": dict,
}
_CHOICES = {
    "dtype": ("bfloat16", "float16", "float32"), "gemm": ("ieee", "tf32"),
    "reduction": ("none", "sum", "mean"), "output_weight": ("embedding", "weight"),
    "output_weight_grad": ("grad_embedding", "grad_weight"),
}


class Case:
    """One exported case: its case.json fields as attributes, its inputs on demand."""

    def __init__(self, case_dir):
        self.dir = case_dir
        self.path = os.path.join(case_dir, "case.json")
        j = _load_json(self.path)
        if not isinstance(j, dict) or j.get("format") != FORMAT_CASE or j.get("version") != VERSION:
            raise ExchangeError(f"{self.path}: not a {FORMAT_CASE} version {VERSION} file")
        for key, kind in _CASE_FIELDS.items():
            val = j.get(key)
            if not isinstance(val, kind) or (kind in (int, (int, float)) and isinstance(val, bool)):
                raise ExchangeError(f"{self.path}: field {key} missing or not {getattr(kind, '__name__', 'a number')}")
            if key in _CHOICES and val not in _CHOICES[key]:
                raise ExchangeError(f"{self.path}: {key} {val!r} is not one of {', '.join(_CHOICES[key])}")
            setattr(self, key, val)
        self.json = j
        ls = self.label_smoothing
        if ls.get("form") not in ("none", "pytorch", "megatron") or not isinstance(ls.get("eps", 0), (int, float)):
            raise ExchangeError(f"{self.path}: label_smoothing needs form none|pytorch|megatron and a number eps")
        self.smoothing_form, self.smoothing_eps = ls["form"], float(ls.get("eps", 0.0))
        if not (self.n >= 1 and self.h >= 1 and self.v >= 1 and self.vp >= self.v and self.tp >= 1):
            raise ExchangeError(f"{self.path}: bad shape n {self.n} h {self.h} v {self.v} vp {self.vp} tp {self.tp}")
        if self.tied != (self.output_weight == "embedding") or self.tied != (self.output_weight_grad == "grad_embedding"):
            raise ExchangeError(f"{self.path}: tied {self.tied} disagrees with output_weight/output_weight_grad")
        for kind in ("inputs", "outputs"):
            for name, spec in getattr(self, kind).items():
                if (not isinstance(spec, dict) or not isinstance(spec.get("file"), str)
                        or spec.get("dtype") not in DTYPES or not isinstance(spec.get("shape"), list)):
                    raise ExchangeError(f"{self.path}: {kind} entry {name} needs file, dtype and shape")
                _relative_subdir(self.path, spec["file"])
        for name in self.expected_inputs():
            if name not in self.inputs:
                raise ExchangeError(f"{self.path}: input {name} missing")

    def expected_inputs(self):
        names = ["hidden", "embedding", "labels", "grad_output", "grad_embedding_prior"]
        if not self.tied:
            names += ["weight", "grad_weight_prior"]
        if self.class_weights:
            names.append("class_weight")
        return names

    @property
    def smoothing(self):
        """The effective e of lce_case.h: eps (pytorch), eps V/(V-1) (megatron), 0 (none)."""
        if self.smoothing_form == "pytorch":
            return self.smoothing_eps
        if self.smoothing_form == "megatron":
            return self.smoothing_eps * self.v / (self.v - 1)
        return 0.0

    @property
    def out_dir(self):
        return os.path.join(self.dir, "out")

    def input_raw(self, name):
        """(dtype, shape, raw little-endian bytes) of an input, checked against case.json."""
        spec = self.inputs[name]
        path = os.path.join(self.dir, spec["file"])
        descr, shape, data = read_npy(path)
        if descr != DTYPES[spec["dtype"]][0] or list(shape) != spec["shape"]:
            raise ExchangeError(f"{path}: {descr} {list(shape)} where case.json says "
                                f"{spec['dtype']} {spec['shape']}")
        return spec["dtype"], tuple(shape), data

    def input_values(self, name):
        dtype, _, data = self.input_raw(name)
        return decode(dtype, data)

    def clear_out(self):
        """Removes out/ left by an earlier run, so that nothing stale is judged."""
        if os.path.isdir(self.out_dir):
            shutil.rmtree(self.out_dir)

    def write_output_raw(self, name, data):
        spec = self.outputs[name]
        write_npy(os.path.join(self.dir, spec["file"]), DTYPES[spec["dtype"]][0], spec["shape"], data)

    def write_output(self, name, values):
        self.write_output_raw(name, encode(self.outputs[name]["dtype"], values))

    def write_meta(self, meta):
        for key in ("subject", "version", "setting", "device", "seconds", "peak_extra_bytes", "missing"):
            if key not in meta:
                raise ExchangeError(f"meta.json for {self.id}: key {key} missing")
        bad = [m for m in meta["missing"] if m not in self.outputs]
        if bad:
            raise ExchangeError(f"meta.json for {self.id}: missing names unknown outputs {bad}")
        _atomic_write(os.path.join(self.out_dir, "meta.json"), (json.dumps(meta, indent=1) + "\n").encode())

    def write_skip(self, reason):
        reason = " ".join(str(reason).split())
        _atomic_write(os.path.join(self.out_dir, "skip.txt"), (reason + "\n").encode())


# ---- lcecheck's answer -------------------------------------------------------------------------

def judged_case(doc, name):
    """(case, None): the one case record of a `check` or `judge --json` output doc (file name: name), or
    (None, why) where doc holds none (an error object's message, or anything else)."""
    cases = doc.get("cases") if isinstance(doc, dict) else None
    if isinstance(cases, list) and len(cases) == 1:
        return cases[0], None
    status = doc.get("message", "") if isinstance(doc, dict) else ""
    return None, f"no case in {name}{': ' + status if status else ''}"
