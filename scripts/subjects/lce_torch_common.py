"""lce_torch_common.py — what every GPU adapter shares: the declared option set and its visible skip
rule, a case loaded into torch tensors, the GEMM mode of fp32 cases, the timed and memory-measured
forward+backward, the outputs (gradient buffers = fp32 prior + the kernel's weight gradient, as a
framework's main_grad accumulation does), meta.json, and the per-case loop over an export (or one
shard of it, so that several processes share it; with --time-limit, the cases not reached are skips
that say so). The seconds in meta.json are measured wherever the process ran: with shards or other
subjects on the same GPU they include the contention.

An adapter script defines an Adapter (name, settings, Supported, version(), run()) and calls
main(adapter). torch is imported only when a case runs, so `--help` works anywhere."""
import argparse
import dataclasses
import importlib
import os
import sys
import time
import traceback
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_exchange as lx  # noqa: E402

TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


def log(msg):
    print(msg, flush=True)


# ---- what an adapter supports, and the skip rule ----------------------------------------------

@dataclasses.dataclass
class Supported:
    """The options of case.json an adapter can express through its library's API. Anything else
    is skipped with the reason written to out/skip.txt."""
    dtypes: tuple = ("bfloat16", "float16", "float32")
    reductions: tuple = ("none", "sum", "mean")
    smoothing: tuple = ()          # "pytorch", "megatron": forms it can express (possibly remapped)
    max_smoothing: float = 1.0     # the largest smoothing parameter its API accepts
    smoothing_param: str = "pytorch"  # which form the API's parameter is: pytorch (e) or megatron (eps)
    z_loss: bool = False
    softcap: bool = False
    class_weights: bool = False
    tf32: bool = True              # gemm tf32 for fp32 inputs
    notes: dict = dataclasses.field(default_factory=dict)  # option -> why it is not supported

    def describe(self):
        s = (f"dtypes {'/'.join(self.dtypes)}; reductions {'/'.join(self.reductions)}; "
             f"label smoothing {'/'.join(self.smoothing) or 'no'}; z-loss {'yes' if self.z_loss else 'no'}; "
             f"softcap {'yes' if self.softcap else 'no'}; class weights {'yes' if self.class_weights else 'no'}; "
             f"tf32 GEMMs {'yes' if self.tf32 else 'no'}")
        return s


def smoothing_param(case, sup):
    """The value of the library's smoothing parameter that gives the case's effective e: PyTorch's
    label_smoothing is e itself, Megatron's alpha gives e = alpha V / (V - 1)."""
    e = case.smoothing
    if sup.smoothing_param == "megatron":
        return e * (case.v - 1) / case.v
    return e


def skip_reason(case, sup, extra=None):
    """Why this adapter cannot run this case, or None. extra(case) adds adapter-specific rules."""
    def why(option, default):
        return sup.notes.get(option, default)
    if case.dtype not in sup.dtypes:
        return why("dtype", f"dtype {case.dtype} not supported (supports {'/'.join(sup.dtypes)})")
    if case.reduction not in sup.reductions:
        return why("reduction", f"reduction {case.reduction} not supported")
    if case.smoothing_form != "none" and case.smoothing_eps != 0:
        if case.smoothing_form not in sup.smoothing:
            return why("smoothing", f"label smoothing ({case.smoothing_form} form) not supported")
        p = smoothing_param(case, sup)
        if not 0 <= p <= sup.max_smoothing:
            return f"label smoothing parameter {p:.6g} for the {case.smoothing_form} form is outside the API's [0, {sup.max_smoothing}]"
    if case.z_loss and not sup.z_loss:
        return why("z_loss", "z-loss not supported")
    if case.softcap and not sup.softcap:
        return why("softcap", "logit softcap not supported")
    if case.class_weights and not sup.class_weights:
        return why("class_weights", "class weights not supported")
    if case.gemm == "tf32" and not sup.tf32:
        return why("tf32", "tf32 GEMMs not supported")
    return extra(case) if extra else None


# ---- torch side --------------------------------------------------------------------------------

def torch_module():
    import torch
    return torch


class Tensors:
    """A case's inputs on the device. w is the output weight's real rows [0, v) (a view: padded rows
    never reach a kernel), labels int64, priors and class weights fp32."""

    def __init__(self, case, device):
        torch = torch_module()
        self.case = case

        def load(name):
            dtype, shape, data = case.input_raw(name)
            code = {"bfloat16": torch.int16, "float16": torch.float16, "float32": torch.float32,
                    "int64": torch.int64}[dtype]
            t = torch.frombuffer(bytearray(data), dtype=code).reshape(shape)
            if dtype == "bfloat16":
                t = t.view(torch.bfloat16)
            return t.to(device)

        self.hidden = load("hidden")
        self.w_full = load(case.output_weight)
        self.w = self.w_full[:case.v]
        self.labels = load("labels")
        self.grad_output = load("grad_output")
        self.priors = {"grad_embedding": load("grad_embedding_prior")}
        if not case.tied:
            self.priors["grad_weight"] = load("grad_weight_prior")
        self.class_weight = load("class_weight") if case.class_weights else None
        self.valid = self.labels != case.ignore_index

    def grad_output_for(self, loss):
        """The upstream gradient in the shape of the kernel's loss."""
        return self.grad_output.reshape(loss.shape)  # [n] for none; one element for sum and mean


def set_gemm_mode(case, tf32):
    """fp32 GEMMs as the case says (tf32: 'case'), or forced 'on'/'off'. Returns the setting's
    suffix for meta.json ('' when following the case)."""
    torch = torch_module()
    on = case.gemm == "tf32" if tf32 == "case" else tf32 == "on"
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")
    return "" if tf32 == "case" else f"tf32-{tf32}"


@dataclasses.dataclass
class RunResult:
    loss: object                 # the kernel's loss: scalar (sum/mean) or [n] (none)
    d_hidden: object
    d_weight: object             # gradient of the real rows [0, v) of the output weight
    loss_token: object = None    # [n], when the kernel gives per-token losses
    lse: object = None           # [n], when the kernel exposes it


def timed(device, fn):
    """(result, seconds, peak extra bytes) of fn() between two synchronizations; the peak counts
    what fn allocates beyond what was allocated before it (the inputs)."""
    torch = torch_module()
    cuda = str(device).startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    start = time.perf_counter()
    result = fn()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() - base if cuda else None
    return result, seconds, peak


def tensor_bytes(t, dtype):
    """Raw little-endian bytes of t in the exchange dtype (bf16/fp16 as their bit patterns)."""
    torch = torch_module()
    want = getattr(torch, TORCH_DTYPES.get(dtype, "float32"))
    t = t.detach()
    if t.dtype != want:
        t = t.to(want)
    t = t.contiguous().cpu()
    if dtype in ("bfloat16", "float16"):
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_outputs(case, t, res):
    """Writes every output the run produced; returns the names of those it did not."""
    torch = torch_module()
    missing = []
    n = case.n
    loss_token = res.loss_token
    if case.reduction == "none":
        loss_token = res.loss.reshape(n) if loss_token is None else loss_token
        loss = loss_token.double().sum().float().reshape(1)
    else:
        loss = res.loss.float().reshape(1)
    case.write_output_raw("loss", tensor_bytes(loss, "float32"))
    if loss_token is not None:
        case.write_output_raw("loss_token", tensor_bytes(loss_token.float().reshape(n), "float32"))
    else:
        missing.append("loss_token")
    if res.lse is not None:
        case.write_output_raw("lse", tensor_bytes(res.lse.float().reshape(n), "float32"))
    else:
        missing.append("lse")
    case.write_output_raw("d_hidden", tensor_bytes(res.d_hidden.reshape(n, case.h), case.dtype))
    for name, prior in t.priors.items():
        buf = prior.clone()
        if name == case.output_weight_grad and res.d_weight is not None:
            buf[:case.v] += res.d_weight.reshape(case.v, case.h).float()  # main_grad += grad, in fp32
        case.write_output_raw(name, tensor_bytes(buf, "float32"))
    if res.d_weight is None:
        missing.append(case.output_weight_grad)
    return missing


def device_name(device):
    torch = torch_module()
    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return "cpu"


# ---- Triton's interpreter (TRITON_INTERPRET=1: the Triton adapters on a machine without a GPU) --------

def triton_interpreter_shims():
    """Under Triton's interpreter (TRITON_INTERPRET=1; a no-op otherwise), two things made as the compiled
    kernel has them (triton/runtime/interpreter.py gets them otherwise):
    - an fp32 value cast or stored to bf16 is rounded to nearest even, as cvt.rn.bf16.f32 does: the
      interpreter (_convert_float) truncates the significand where no rounding mode is named (tl.store
      into a bf16 buffer), and with round-to-nearest rounds ties up and drops the carry into the
      exponent: a truncation bias in every bf16 d_logit (conformance/EXTERNAL.md says how large on Liger).
      Explicit round-toward-zero casts keep the interpreter's own conversion.
    - a Python float kernel argument is an fp32 scalar, as the compiled kernel's specialization makes it
      (the interpreter leaves a Python float: double arithmetic, and no .to(), which Liger's kernel calls
      on its softcap and class-weight sums)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import numpy as np
    import triton.language as tl
    from triton._C.libtriton import ir
    import triton.runtime.interpreter as interp
    if getattr(interp._convert_float, "lce_shim", False):
        return
    convert_float, implicit_cvt = interp._convert_float, interp._implicit_cvt

    def convert(x, input_dtype, output_dtype, rounding_mode):
        if input_dtype == tl.float32 and output_dtype == tl.bfloat16 and rounding_mode in (None, ir.ROUNDING_MODE.RTNE):
            return bf16_bits_rne(np.asarray(x, dtype=np.float32))
        return convert_float(x, input_dtype, output_dtype, rounding_mode)

    def cvt(arg):
        if isinstance(arg, float):
            return tl.tensor(interp.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return implicit_cvt(arg)

    convert.lce_shim = True
    interp._convert_float, interp._implicit_cvt = convert, cvt


def bf16_bits_rne(x):
    """The bf16 bit patterns (uint16) nearest the float32 array x, ties to even; NaN stays a quiet NaN of
    its sign, and values beyond bf16's largest round to infinity as IEEE's do."""
    import numpy as np
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    r[nan] = ((b[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return r.reshape(np.shape(x))


# ---- importing a subtree of a package from a source tree ----------------------------------------

def import_from_checkout(root, module, light_packages):
    """Imports `module` from the source tree `root` (a Megatron-LM checkout, the files extracted from
    a wheel) without running the __init__.py of the packages in light_packages
    (megatron/core/__init__.py pulls in the whole framework, transformer_engine/__init__.py a compiled
    library): they become empty packages whose __path__ points into root."""
    root = os.path.abspath(root)
    top = module.split(".")[0]
    if not os.path.isdir(os.path.join(root, top)):
        raise ImportError(f"{root} holds no {top}/ package")
    for pkg in light_packages:
        if pkg in sys.modules:
            continue
        m = types.ModuleType(pkg)
        m.__path__ = [os.path.join(root, *pkg.split("."))]
        m.__package__ = pkg
        sys.modules[pkg] = m
        parent, _, leaf = pkg.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], leaf, m)
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module(module)


def checkout_revision(root):
    """The git commit of a checkout, or the REVISION file an extracted tree carries, or 'unknown'."""
    for path in (os.path.join(root, "REVISION"),):
        if os.path.exists(path):
            with open(path) as f:
                return f.read().strip()
    head = os.path.join(root, ".git", "HEAD")
    if os.path.exists(head):
        with open(head) as f:
            ref = f.read().strip()
        if ref.startswith("ref: "):
            p = os.path.join(root, ".git", ref[5:])
            if os.path.exists(p):
                with open(p) as f:
                    return f.read().strip()
        return ref
    return "unknown"


# ---- the per-case loop -------------------------------------------------------------------------

class Adapter:
    """Base of an adapter: override name, settings, supported, version(), prepare() and run()."""
    name = "adapter"
    settings = ("default",)
    supported = Supported()
    description = ""
    prog = None  # argparse's program name; default: the script's file name

    def add_args(self, ap):
        pass

    def prepare(self, args):
        """Imports the library (after argument parsing, so --help needs nothing)."""

    def version(self, args):
        return "unknown"

    def setting(self, args):
        return getattr(args, "setting", "default")

    def extra_skip(self, case, args):
        return None

    def run(self, case, t, args):
        """Forward and backward once; returns a RunResult."""
        raise NotImplementedError

    def per_token(self, case, t, args):
        """Per-token losses [n] from a forward with reduction none (untimed), or None."""
        return None


class LossFunctionAdapter(Adapter):
    """An adapter whose kernel is one loss function of (hidden, W, labels): call() invokes it with a
    reduction and returns the loss, or (loss, lse) where the kernel gives lse too; run()
    differentiates it once, per_token() calls it with reduction none."""

    def call(self, case, t, args, h, w, reduction):
        raise NotImplementedError

    def run(self, case, t, args):
        h = t.hidden.detach().requires_grad_()
        w = t.w.detach().requires_grad_()
        loss, lse = self.call_lse(case, t, args, h, w, case.reduction)
        d_hidden, d_weight = torch_module().autograd.grad(loss, (h, w), t.grad_output_for(loss))
        return RunResult(loss=loss.detach(), d_hidden=d_hidden, d_weight=d_weight,
                         lse=None if lse is None else lse.detach())

    def per_token(self, case, t, args):
        return self.call_lse(case, t, args, t.hidden, t.w, "none")[0]

    def call_lse(self, case, t, args, h, w, reduction):
        r = self.call(case, t, args, h, w, reduction)
        return r if isinstance(r, tuple) else (r, None)


def parse_shard(text):
    i, _, n = text.partition("/")
    if not (i.isdigit() and n.isdigit() and 0 <= int(i) < int(n)):
        raise argparse.ArgumentTypeError(f"'{text}' is not I/N with 0 <= I < N")
    return int(i), int(n)


def parse_seconds(text):
    """--time-limit: a number of seconds, 0 or more (a negative limit would skip every case, NaN none)."""
    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not s >= 0 or s == float("inf"):
        raise argparse.ArgumentTypeError(f"'{text}' is not a finite number of seconds >= 0")
    return s


def build_parser(adapter):
    ap = argparse.ArgumentParser(
        prog=adapter.prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=adapter.description + "\n\nSupported: " + adapter.supported.describe() + ".",
        epilog="Runner protocol (scripts/subjects/EXCHANGE.md): runs every case of EXPORT_DIR/manifest.json, writes "
               "out/ per case (or out/skip.txt), exit 0 unless the runner itself fails.")
    ap.add_argument("export_dir", help="a directory written by `lcecheck export` (holds manifest.json)")
    if len(adapter.settings) > 1:
        ap.add_argument("--setting", choices=adapter.settings, default=adapter.settings[0],
                        help="library configuration to run (default %(default)s)")
    ap.add_argument("--case", action="append", metavar="ID", help="run only this case (repeatable)")
    ap.add_argument("--shard", type=parse_shard, metavar="I/N",
                    help="only the cases whose manifest index is I modulo N, so that N processes share an export "
                         "(the others' out/ is left alone)")
    ap.add_argument("--time-limit", type=parse_seconds, metavar="S",
                    help="start no case after S seconds of this runner; the cases not reached get a skip.txt "
                         "that says so (a matrix run within a device call's deadline)")
    ap.add_argument("--device", default="cuda", help="torch device (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed forward+backward runs before the timed one (compilation, autotuning; default %(default)s)")
    ap.add_argument("--tf32", choices=("case", "on", "off"), default="case",
                    help="fp32 GEMM mode: as the case's gemm field says, or forced (default %(default)s)")
    adapter.add_args(ap)
    return ap


def run_one(adapter, case, args):
    """Runs one case; returns 'ran', 'skipped' or 'error'."""
    reason = skip_reason(case, adapter.supported, lambda c: adapter.extra_skip(c, args))
    if reason:
        case.write_skip(reason)
        log(f"  skip: {reason}")
        return "skipped"
    torch = torch_module()
    tf32_suffix = set_gemm_mode(case, args.tf32)
    setting = "+".join(s for s in (adapter.setting(args), tf32_suffix) if s)
    meta = {"subject": adapter.name, "version": adapter.version(args), "setting": setting,
            "device": device_name(args.device), "seconds": None, "peak_extra_bytes": None,
            "missing": list(case.outputs)}
    try:
        t = Tensors(case, args.device)
        for _ in range(max(0, args.warmup)):
            adapter.run(case, t, args)
        res, seconds, peak = timed(args.device, lambda: adapter.run(case, t, args))
        if case.reduction != "none" and res.loss_token is None:
            with torch.no_grad():
                res.loss_token = adapter.per_token(case, t, args)
        meta["missing"] = write_outputs(case, t, res)
        meta["seconds"], meta["peak_extra_bytes"] = seconds, peak
        status = "ran"
        log(f"  ran: {seconds * 1e3:.2f} ms fwd+bwd, peak extra {peak} bytes"
            + (f", missing {', '.join(meta['missing'])}" if meta["missing"] else ""))
    except Exception as e:  # the kernel failed this case: every output missing, the error recorded
        meta["error"] = f"{type(e).__name__}: {e}"[:2000]
        status = "error"
        log(f"  error: {meta['error'].splitlines()[0] if meta['error'] else type(e).__name__}")
        traceback.print_exc(file=sys.stdout)
    case.write_meta(meta)
    return status


def main(adapter, argv=None):
    start = time.monotonic()
    args = build_parser(adapter).parse_args(argv)
    try:
        cases = lx.load_manifest(args.export_dir)
    except lx.ExchangeError as e:
        print(f"{adapter.name}: {e}", file=sys.stderr)
        return 2
    if args.case:
        cases = [(cid, d) for cid, d in cases if cid in args.case]
    if args.shard:
        cases = cases[args.shard[0]::args.shard[1]]
    shard = f" (shard {args.shard[0]}/{args.shard[1]})" if args.shard else ""
    log(f"{adapter.name}: {len(cases)} case(s) in {args.export_dir}{shard}; setting {adapter.setting(args)}")
    log(f"{adapter.name}: supports {adapter.supported.describe()}")
    loaded = []
    for cid, d in cases:
        try:
            c = lx.Case(d)
        except lx.ExchangeError as e:
            print(f"{adapter.name}: {e}", file=sys.stderr)
            return 2
        c.clear_out()
        loaded.append(c)
    need_library = any(skip_reason(c, adapter.supported, lambda x: adapter.extra_skip(x, args)) is None for c in loaded)
    if need_library:
        try:
            adapter.prepare(args)
        except Exception as e:
            print(f"{adapter.name}: cannot load the library: {type(e).__name__}: {e}", file=sys.stderr)
            traceback.print_exc()
            return 2
        log(f"{adapter.name}: version {adapter.version(args)}")
    counts = {"ran": 0, "skipped": 0, "error": 0}
    reached = len(loaded)
    for k, c in enumerate(loaded, 1):
        if args.time_limit is not None and time.monotonic() - start > args.time_limit:
            reached = k - 1
            break
        log(f"[{k}/{len(loaded)}] {c.id}")
        counts[run_one(adapter, c, args)] += 1
    for c in loaded[reached:]:
        c.write_skip(f"not reached: the runner's --time-limit of {args.time_limit:g} s ran out after "
                     f"{reached} of {len(loaded)} cases{shard}")
    log(f"{adapter.name}: reached {reached} of {len(loaded)} cases{shard} in {time.monotonic() - start:.0f} s: "
        f"{counts['ran']} ran, {counts['skipped']} skipped, {counts['error']} failed in the kernel")
    return 0
