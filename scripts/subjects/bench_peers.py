#!/usr/bin/env python3
"""bench_peers.py — the Python side of `lcecheck bench --peers`: times the external FLCE kernels, each
through its adapter's loss function (torch_eager.py, torch_compile.py, liger.py, cce.py,
megatron_fused_lce.py, te_parallel_ce.py), beside torch.matmul's three GEMMs (logits = h·Wᵀ, d_hidden = d_logits·W,
d_weight = d_logitsᵀ·h; bf16 in and out), all in this one process, at the shapes and seeds lcecheck
gives it. bf16, untied, reduction mean, no ignored label; every repetition draws fresh inputs (hidden
uniform in [-1, 1), W in [-0.15, 0.15), uniform labels, as fused/cuda/fused_cuda_bench.cu does), warm-up
repetitions are dropped, medians are reported; forward and backward are timed apart with CUDA events.
Extra memory: the peak of torch's allocator during forward+backward beyond what was allocated before
(the inputs), less the gradients the kernel returns (its outputs). Glue only: no threshold, no verdict.

    python3 scripts/subjects/bench_peers.py --shapes 8192x4096x128256[,...] --peers torch-eager,liger|all
        [--reps 20] [--warmup 3] [--seed 0] [--megatron PATH] [--te PATH] [--device cuda] --json FILE

Rows, one per shape and peer (the floor first), in FILE (rewritten after every row, so that a crash
keeps the rows before it): {"n","h","v","subject","process":"python","role":"floor"|"subject",
"status":"ran"|"skipped"|"error","reason","version","fwd_ms","bwd_ms","total_ms","extra_bytes",
"peak_bytes","output_bytes","note"} (null where not measured). A peer whose library does not import,
whose options do not fit the case, or that runs out of device memory is a row "skipped" saying why;
one that raises is a row "error". Exit status: 0 when FILE was written, 2 on bad usage."""
import argparse
import dataclasses
import json
import os
import statistics
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lce_torch_common as common  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
FORMAT = "lcecheck-bench-peers"
VERSION = 1
# name -> (adapter module, adapter class, the adapter's settings as its own command line would give them)
PEERS = {
    "torch-eager": ("torch_eager", "TorchEager", {}),
    "torch-compile": ("torch_compile", "TorchCompile", {"mode": "default", "dynamic": "false"}),
    "liger": ("liger", "Liger", {"setting": "default"}),
    "cce": ("cce", "CutCrossEntropy", {"setting": "default"}),
    "megatron-fused-lce": ("megatron_fused_lce", "MegatronFusedLCE", {}),
    "te-parallel-ce": ("te_parallel_ce", "TEParallelCE", {}),
}
FLOOR = "three-GEMM floor"


@dataclasses.dataclass
class BenchCase:
    """The case fields the adapters' loss functions and skip rule read, for the bench's problem."""
    n: int
    h: int
    v: int
    dtype: str = "bfloat16"
    reduction: str = "mean"
    ignore_index: int = -100
    smoothing_form: str = "none"
    smoothing_eps: float = 0.0
    smoothing: float = 0.0
    z_loss: float = 0.0
    softcap: float = 0.0
    class_weights: bool = False
    gemm: str = "ieee"
    tied: bool = False


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        parts = item.split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) >= 1 for p in parts):
            raise argparse.ArgumentTypeError(f"'{item}' is not NxHxV (positive integers)")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def parse_peers(text):
    names = list(PEERS) if text == "all" else text.split(",")
    for name in names:
        if name not in PEERS:
            raise argparse.ArgumentTypeError(f"unknown peer '{name}' (known: {', '.join(PEERS)}, or all)")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a peer named twice in '{text}'")
    return names


def default_megatron():
    """PR 3345's tree, where scripts/subjects/run_all.sh looks for it."""
    fused = os.path.join(ROOT, ".subjects", "megatron-fusions")
    return fused if os.path.isdir(fused) else os.path.join(ROOT, ".subjects", "megatron")


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", type=parse_shapes, required=True, metavar="NxHxV[,...]")
    ap.add_argument("--peers", type=parse_peers, required=True, metavar="LIST|all",
                    help="comma list from: " + ", ".join(PEERS))
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions, >= 1 (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=3,
                    help="untimed repetitions first, >= 1: compilation and autotuning (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="shape i, repetition r draws seed + 1000 (i + 1) + r")
    ap.add_argument("--megatron", default=default_megatron(), metavar="PATH",
                    help="Megatron-LM tree of PR 3345 for megatron-fused-lce (default %(default)s)")
    ap.add_argument("--te", default=os.path.join(ROOT, ".subjects", "transformer-engine"), metavar="PATH",
                    help="TransformerEngine files for te-parallel-ce (te_parallel_ce.py --help; default %(default)s)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", required=True, metavar="FILE", help="where the rows go")
    return ap


def parse_args(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.reps < 1 or args.warmup < 1 or args.seed < 0:
        ap.error(f"--reps {args.reps} and --warmup {args.warmup} must be >= 1, --seed {args.seed} >= 0")
    return args


def row(shape, subject, role, status, **fields):
    n, h, v = shape
    r = {"n": n, "h": h, "v": v, "subject": subject, "process": "python", "role": role, "status": status,
         "reason": "", "version": "", "fwd_ms": None, "bwd_ms": None, "total_ms": None, "extra_bytes": None,
         "peak_bytes": None, "output_bytes": None, "note": ""}
    r.update(fields)
    return r


class Report:
    """The rows so far and the process's facts, written to the JSON file after every row."""

    def __init__(self, path):
        self.path, self.rows = path, []
        self.head = {"format": FORMAT, "version": VERSION, "device": "", "torch": "", "python": sys.version.split()[0]}
        self.write()

    def add(self, r):
        self.rows.append(r)
        what = r["reason"] if r["status"] != "ran" else \
            f"fwd {r['fwd_ms']} ms, bwd {r['bwd_ms']} ms, total {r['total_ms']:.3f} ms, extra {r['extra_bytes']} bytes"
        common.log(f"bench_peers: {r['n']}x{r['h']}x{r['v']} {r['subject']}: {r['status']}: {what}")
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dict(self.head, rows=self.rows), f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)


def load_adapter(name, args):
    """(adapter, its argument namespace) with the library imported; raises when it cannot import."""
    module, cls, settings = PEERS[name]
    adapter = getattr(__import__(module), cls)()
    ns = types.SimpleNamespace(tf32="case", device=args.device, megatron=args.megatron, te=args.te, **settings)
    adapter.prepare(ns)
    return adapter, ns


class Inputs:
    """Fresh bf16 inputs of one repetition, drawn from its own seed."""

    def __init__(self, torch, shape, seed, device, d_logits=False):
        n, h, v = shape
        g = torch.Generator(device=device).manual_seed(seed)
        bf16 = torch.bfloat16
        self.hidden = (torch.rand(n, h, device=device, generator=g) * 2 - 1).to(bf16)
        self.w = ((torch.rand(v, h, device=device, generator=g) * 2 - 1) * 0.15).to(bf16)
        self.labels = torch.randint(0, v, (n,), device=device, generator=g)
        self.class_weight = None
        if d_logits:  # the floor's backward operand
            self.d_logits = ((torch.rand(n, v, device=device, generator=g) * 2 - 1) * 1e-4).to(bf16)


def timed_reps(torch, shape, args, i_shape, step):
    """Medians (fwd ms, bwd ms, total ms) and the largest (peak, output) bytes of step(inputs, events)
    over the timed repetitions; step records events[0..2] around its forward and backward and returns
    the bytes of the outputs it made."""
    fwd, bwd, tot, peak, out_bytes = [], [], [], 0, 0
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    for rep in range(args.warmup + args.reps):
        inp = Inputs(torch, shape, args.seed + 1000 * (i_shape + 1) + rep, args.device, d_logits=step.floor)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        nbytes = step(inp, ev)
        ev[2].synchronize()
        del inp  # before the next repetition draws its own
        if rep < args.warmup:
            continue
        peak = max(peak, torch.cuda.max_memory_allocated() - base)
        out_bytes = max(out_bytes, nbytes)
        f, b = ev[0].elapsed_time(ev[1]), ev[1].elapsed_time(ev[2])
        fwd.append(f), bwd.append(b), tot.append(f + b)
    return statistics.median(fwd), statistics.median(bwd), statistics.median(tot), peak, out_bytes


def floor_step(torch):
    def step(inp, ev):
        ev[0].record()
        logits = torch.matmul(inp.hidden, inp.w.t())
        ev[1].record()
        dh = torch.matmul(inp.d_logits, inp.w)
        dw = torch.matmul(inp.d_logits.t(), inp.hidden)
        ev[2].record()
        return logits.nbytes + dh.nbytes + dw.nbytes
    step.floor = True
    return step


def peer_step(torch, adapter, ns, case):
    def step(inp, ev):
        h = inp.hidden.requires_grad_()
        w = inp.w.requires_grad_()
        ev[0].record()
        loss = adapter.call_lse(case, inp, ns, h, w, "mean")[0]
        ev[1].record()
        dh, dw = torch.autograd.grad(loss, (h, w))
        ev[2].record()
        return dh.nbytes + dw.nbytes
    step.floor = False
    return step


def measure_row(torch, report, shape, i_shape, subject, role, step, args, **fields):
    """One row: the step timed at the shape, or skipped (out of memory) or an error, saying why."""
    try:
        f, b, t, peak, out = timed_reps(torch, shape, args, i_shape, step)
        extra = None if role == "floor" else peak - out
        report.add(row(shape, subject, role, "ran", fwd_ms=f, bwd_ms=b, total_ms=t, extra_bytes=extra,
                       peak_bytes=None if role == "floor" else peak, output_bytes=out, **fields))
    except torch.cuda.OutOfMemoryError as e:
        free, total = torch.cuda.mem_get_info()
        report.add(row(shape, subject, role, "skipped", reason=f"out of device memory ({total / 2**30:.1f} GiB "
                       f"device): {str(e).splitlines()[0][:200]}", **fields))
    except Exception as e:  # the peer's kernel failed at this shape: a row that says so
        report.add(row(shape, subject, role, "error", reason=f"{type(e).__name__}: {str(e)[:300]}", **fields))
    torch.cuda.empty_cache()


def run(args):
    report = Report(args.json)
    names = [FLOOR] + args.peers
    try:
        torch = common.torch_module()
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        report.head.update(device=torch.cuda.get_device_name(), torch=torch.__version__)
    except Exception as e:  # no torch or no device: every row says so
        for shape in args.shapes:
            for name in names:
                report.add(row(shape, name, "floor" if name == FLOOR else "subject", "skipped",
                               reason=f"cannot use torch: {type(e).__name__}: {e}"))
        return 0
    loaded = {}
    for name in args.peers:
        try:
            loaded[name] = load_adapter(name, args)
        except Exception as e:  # the library does not import: a row per shape says why
            loaded[name] = f"cannot import: {type(e).__name__}: {str(e)[:300]}"
    for i, shape in enumerate(args.shapes):
        measure_row(torch, report, shape, i, FLOOR, "floor", floor_step(torch), args,
                    note="torch.matmul x3, bf16 in and out")
        case = BenchCase(*shape)
        for name in args.peers:
            if isinstance(loaded[name], str):
                report.add(row(shape, name, "subject", "skipped", reason=loaded[name]))
                continue
            adapter, ns = loaded[name]
            version = adapter.version(ns)
            why = common.skip_reason(case, adapter.supported, lambda c: adapter.extra_skip(c, ns))
            need = 2 * 2 * (shape[0] * shape[1] + shape[2] * shape[1])  # bf16 inputs and their gradients
            free = torch.cuda.mem_get_info()[0]
            if why is None and need > free:
                why = f"needs {need / 1e9:.1f} GB for its bf16 inputs and gradients alone, {free / 1e9:.1f} GB free"
            if why:
                report.add(row(shape, name, "subject", "skipped", reason=why, version=version))
                continue
            measure_row(torch, report, shape, i, name, "subject", peer_step(torch, adapter, ns, case), args,
                        version=version, note=adapter.setting(ns))
    return 0


def main(argv=None):
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
