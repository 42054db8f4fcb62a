"""bench_peers.py, the Python side of `lcecheck bench --peers`, where no GPU (nor torch) is: its
argument errors exit 2 naming the problem, and the JSON it writes keeps the contract lcecheck reads
(conformance/cli/cli_bench_report.c): without torch every row is "skipped" saying why; with a stand-in
torch the floor and a peer are "ran" rows with their times and bytes, a peer that does not import or
whose options do not fit is "skipped", one that raises is "error", one out of memory is "skipped"."""
import json
import os
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
SUBJECTS = os.path.dirname(HERE)
sys.path.insert(0, SUBJECTS)
import bench_peers  # noqa: E402

ROW_KEYS = {"n", "h", "v", "subject", "process", "role", "status", "reason", "version", "fwd_ms", "bwd_ms",
            "total_ms", "extra_bytes", "peak_bytes", "output_bytes", "note"}


def run_script(*args):
    return subprocess.run([sys.executable, os.path.join(SUBJECTS, "bench_peers.py"), *args],
                          capture_output=True, text=True)


class UsageTest(unittest.TestCase):
    def test_help(self):
        p = run_script("--help")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("--peers", p.stdout)

    def test_bad_values_exit_2_naming_them(self):
        for args, msg in ((["--shapes", "8x8", "--peers", "cce"], "'8x8' is not NxHxV"),
                          (["--shapes", "8x0x8", "--peers", "cce"], "'8x0x8' is not NxHxV"),
                          (["--shapes", "8x8x8", "--peers", "cce,nosuch"], "unknown peer 'nosuch'"),
                          (["--shapes", "8x8x8", "--peers", "cce,cce"], "a peer named twice"),
                          (["--shapes", "8x8x8", "--peers", "cce", "--reps", "0"], "--reps 0"),
                          (["--shapes", "8x8x8", "--peers", "cce"], "--json")):
            with self.subTest(args):
                p = run_script(*args, *(["--json", "/nonexistent/x.json"] if msg != "--json" else []))
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(msg, p.stderr)

    def test_lcecheck_knows_the_same_peers(self):
        """lcecheck checks --peers before any GPU work, from its own copy of the names."""
        import re
        with open(os.path.join(bench_peers.ROOT, "conformance", "cli", "cli_bench.c")) as f:
            m = re.search(r"PEER_NAMES\[\] = \{([^}]*)\}", f.read())
        self.assertEqual(re.findall(r'"([^"]+)"', m.group(1)), list(bench_peers.PEERS))

    def test_all_is_every_peer(self):
        args = bench_peers.parse_args(["--shapes", "8x8x8,16x64x100", "--peers", "all", "--json", "x"])
        self.assertEqual(args.peers, list(bench_peers.PEERS))
        self.assertEqual(args.shapes, [(8, 8, 8), (16, 64, 100)])


def run_main(*extra, peers="all", shapes="64x32x100,8x8x8"):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "peers.json")
        rc = bench_peers.main(["--shapes", shapes, "--peers", peers, "--reps", "3", "--warmup", "1",
                               "--json", path, *extra])
        with open(path) as f:
            return rc, json.load(f)


class NoTorchTest(unittest.TestCase):
    def test_every_row_skipped_saying_why(self):
        with mock.patch.object(bench_peers.common, "torch_module", side_effect=ImportError("No module named 'torch'")):
            rc, d = run_main()
        self.assertEqual(rc, 0)
        self.assertEqual((d["format"], d["version"]), ("lcecheck-bench-peers", 1))
        names = [bench_peers.FLOOR] + list(bench_peers.PEERS)
        self.assertEqual([(r["n"], r["subject"]) for r in d["rows"]], [(n, s) for n in (64, 8) for s in names])
        for r in d["rows"]:
            self.assertEqual(set(r), ROW_KEYS)
            self.assertEqual((r["status"], r["process"]), ("skipped", "python"))
            self.assertEqual(r["role"], "floor" if r["subject"] == bench_peers.FLOOR else "subject")
            self.assertIn("cannot use torch: ImportError: No module named 'torch'", r["reason"])
            self.assertIsNone(r["total_ms"])


class FakeTensor:
    """Enough of a torch tensor for the bench's arithmetic: shape and bytes (2 per element)."""

    def __init__(self, *shape):
        self.shape = shape
        self.nbytes = 2 * (shape[0] * (shape[1] if len(shape) > 1 else 1))

    def __mul__(self, _):
        return self

    __sub__ = __add__ = __mul__

    def to(self, _):
        return self

    def t(self):
        return FakeTensor(*reversed(self.shape))

    def requires_grad_(self):
        return self


class FakeEvent:
    count = 0

    def __init__(self, enable_timing):
        self.t = 0.0

    def record(self):
        FakeEvent.count += 1
        self.t = FakeEvent.count * 1.5  # every interval 1.5 ms

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return other.t - self.t


class OOM(RuntimeError):
    pass


def fake_torch():
    cuda = types.SimpleNamespace(
        is_available=lambda: True, get_device_name=lambda: "Fake GPU", Event=FakeEvent, synchronize=lambda: None,
        reset_peak_memory_stats=lambda: None, memory_allocated=lambda: 1000, max_memory_allocated=lambda: 1000 + 50000,
        mem_get_info=lambda: (10**12, 10**12), empty_cache=lambda: None, OutOfMemoryError=OOM)
    gen = types.SimpleNamespace(manual_seed=lambda s: gen)
    return types.SimpleNamespace(
        __version__="0.fake", cuda=cuda, bfloat16="bf16", Generator=lambda device: gen,
        rand=lambda *shape, **kw: FakeTensor(*shape), randint=lambda lo, hi, shape, **kw: FakeTensor(*shape),
        matmul=lambda a, b: FakeTensor(a.shape[0], b.shape[1]),
        autograd=types.SimpleNamespace(grad=lambda loss, xs: tuple(FakeTensor(*x.shape) for x in xs)))


class FakeAdapter:
    """A peer whose loss function behaves as its name says."""
    supported = bench_peers.common.Supported(dtypes=("bfloat16",))

    def __init__(self, behaviour):
        self.behaviour = behaviour

    def prepare(self, ns):
        if self.behaviour == "no-import":
            raise ModuleNotFoundError("No module named 'fakelib'")

    def version(self, ns):
        return "fakelib 1.0"

    def setting(self, ns):
        return getattr(ns, "setting", "default")

    def extra_skip(self, case, ns):
        return f"H {case.h} is not a multiple of 64" if case.h % 64 and self.behaviour == "h64" else None

    def call_lse(self, case, t, ns, h, w, reduction):
        if self.behaviour == "raises":
            raise ZeroDivisionError("division by zero")
        if self.behaviour == "oom":
            raise OOM("CUDA out of memory. Tried to allocate 40.00 GiB")
        return FakeTensor(1), None


class FakeTorchTest(unittest.TestCase):
    def test_rows_of_each_outcome(self):
        behaviours = ("ok", "no-import", "raises", "oom", "h64")
        module = types.ModuleType("fake_peers")
        for b in behaviours:
            setattr(module, b.replace("-", "_"), lambda b=b: FakeAdapter(b))
        peers = {b: ("fake_peers", b.replace("-", "_"), {"setting": "s-" + b}) for b in behaviours}
        with mock.patch.dict(sys.modules, {"fake_peers": module}), \
                mock.patch.dict(bench_peers.PEERS, peers, clear=True), \
                mock.patch.object(bench_peers.common, "torch_module", return_value=fake_torch()):
            rc, d = run_main(peers=",".join(behaviours), shapes="64x32x100")
        self.assertEqual(rc, 0)
        self.assertEqual((d["device"], d["torch"]), ("Fake GPU", "0.fake"))
        rows = {r["subject"]: r for r in d["rows"]}
        self.assertEqual(list(rows), [bench_peers.FLOOR, *behaviours])
        for r in d["rows"]:
            self.assertEqual(set(r), ROW_KEYS)
        floor = rows[bench_peers.FLOOR]
        self.assertEqual((floor["status"], floor["role"], floor["fwd_ms"], floor["bwd_ms"], floor["total_ms"]),
                         ("ran", "floor", 1.5, 1.5, 3.0))
        self.assertIsNone(floor["extra_bytes"])  # the floor's memory is not a kernel's
        ok = rows["ok"]
        self.assertEqual((ok["status"], ok["role"], ok["version"], ok["note"]), ("ran", "subject", "fakelib 1.0", "s-ok"))
        out = 2 * (64 * 32 + 100 * 32)  # the bf16 gradients it returned
        self.assertEqual((ok["peak_bytes"], ok["output_bytes"], ok["extra_bytes"]), (50000, out, 50000 - out))
        self.assertEqual(rows["no-import"]["status"], "skipped")
        self.assertIn("cannot import: ModuleNotFoundError: No module named 'fakelib'", rows["no-import"]["reason"])
        self.assertEqual((rows["raises"]["status"], rows["raises"]["reason"]),
                         ("error", "ZeroDivisionError: division by zero"))
        self.assertEqual(rows["oom"]["status"], "skipped")
        self.assertIn("out of device memory (931.3 GiB device): CUDA out of memory", rows["oom"]["reason"])
        self.assertEqual((rows["h64"]["status"], rows["h64"]["reason"]), ("skipped", "H 32 is not a multiple of 64"))


if __name__ == "__main__":
    unittest.main()
