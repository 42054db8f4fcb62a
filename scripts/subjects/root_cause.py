#!/usr/bin/env python3
"""root_cause.py — the measured root causes of the unfused peers' gradient failures
(conformance/EXTERNAL.md, "Root causes of the default-matrix gradient failures").

torch eager and torch.compile (torch_eager.py), Megatron-core's vocab_parallel_cross_entropy
(megatron_vocab_parallel.py) and TransformerEngine's parallel_cross_entropy (te_parallel_ce.py) share
one LM head and differ only in the loss function after it:
  R1  logits = F.linear(hidden, W) in the input dtype (fp32 accumulation, output rounded to the dtype);
  R2  the loss function's fp32 gradient of the logits cast to the input dtype by autograd
      (ToCopyBackward of torch's `.float()`; the engine's cast of a custom Function's fp32 gradient for
      Megatron and TE), with the scale g folded in before that cast (g = grad_output for sum,
      grad_output / total weight for mean, the token's grad_output for none);
  R3  LinearBackward's weight GEMM in the input dtype: the weight gradient returned in the dtype, then
      added to the fp32 gradient buffer (lce_torch_common.write_outputs);
  R4  for fp32 inputs with gemm tf32, the backward GEMMs in TF32: the fp32 gradient of the logits (g
      folded in) rounded to tf32 as a GEMM operand.
Here that head is one autograd Function whose roundings are switches; the loss function is the peer's
own (torch_eager.loss_from_logits, the adapters' loss_from_logits: Megatron's and TE's real code;
--subject torch-compile compiles torch_eager's as torch_compile.py does, mode default and dynamic False,
the head staying eager: one compilation per case and reduction, tens of seconds each on a CPU).
Each variant removes one rounding or moves g; the judge then says which removal makes a failing metric
pass: that rounding is the measured cause.

Variants (--variants; a variant that does not apply to a case is skipped there, saying why):
  as-is          the peer's arithmetic; checked bit for bit against the adapter's own run on the same
                 device (on the CPU, tf32 cases emulate TF32 by rounding every GEMM operand with
                 cvt.rna, and are not compared: the CPU has no TF32)
  fp32-logits    R1 removed: the logits GEMM's fp32 result is not rounded to the dtype
  fp32-dlogits   R2 removed: the gradient of the logits stays fp32; the backward GEMMs run on it in fp32
                 (IEEE; d_hidden rounded once to the dtype, the weight gradient as in as-is)
  fp32-dweight   R3 removed: the weight gradient is the GEMM's fp32 result, not rounded to the dtype
  g-after        g moved out of R2 (sum, mean): the loss differentiated with reduction sum and
                 grad_output 1, so the rounded gradient of the logits is p - y; g multiplies the GEMMs'
                 fp32 results (fused-cuda's arithmetic: fused/plan/lce_fused_plan.h, lce_fused_grad_split)
  ieee-backward  R4 removed (gemm tf32): the backward GEMMs in IEEE fp32 on the tf32 hidden and W that
                 the case defines, so that only the gradient of the logits is no longer rounded to tf32
  exact          all of them at once: a correct fp32-logit FLCE, which must pass every gradient metric
                 (a check of this script: only class failures may remain)
Roundings joined by + remove several at once (fp32-dweight+g-after: the fp16 weight gradients whose size
and bias both fail). Two more are not roundings but the two rules of lce_case.h for non-finite inputs that the peers do not
follow, for the class failures of the poison cases (NaN and +Inf in two tokens' hidden values):
  zero-ignored-rows   the hidden rows of ignored tokens replaced by 0 before the head (fused-cuda zeroes
                      them: fused/cuda/fused_cuda_kernels.cu, "zero ignored hidden rows"), so an ignored
                      token contributes nothing even when its hidden values are NaN or Inf
  nan-nonfinite-rows  the logits of a token with a NaN or Inf hidden value made NaN (lce_case.h: such a
                      token's logits are NaN, as a fused kernel's online softmax makes them), where
                      softcap's tanh would otherwise saturate +-Inf to +-c

Fused subjects (--subject liger, liger-fp32-accum: Liger-Kernel's fused linear cross-entropy, liger.py)
keep their roundings inside the library, so only the variants on their inputs apply: as-is (the adapter's
own run), zero-ignored-rows as above, and nan-nonfinite-rows as a whole NaN hidden row for such a token
(its logits are then NaN in any kernel). On the CPU they run under Triton's interpreter
(TRITON_INTERPRET=1, liger.py's shims).

    python3 scripts/subjects/root_cause.py failing JUDGE.json... [--json F]
    python3 scripts/subjects/root_cause.py run --subject S EXPORT [--case ID | --cases-from F]
        [--variants a,b] [--device cpu|cuda] [--out DIR] [--lcecheck PATH] [--recorded F] [--json F]
    python3 scripts/subjects/root_cause.py collect FILE --label L [--failing F] [--run RUN.json]...

`failing` lists, from `lcecheck judge --json` files named <matrix>-<subject>.json (gpu_external.sh's),
every failing gradient output per case with each metric's % of budget, grouped by the case's options.
`run` answers each case of EXPORT (`lcecheck export`) once per variant into OUT/<subject>/<variant>/
(an exchange result directory: EXCHANGE.md), judges each with `lcecheck judge` against
golden/sm_90/fused-cuda.golden, and prints, per case and gradient output, the worst metric's % of
budget per variant. `collect` keeps both in one file (conformance/external-rootcause.json). Needs torch;
te-parallel-ce needs triton and a GPU, or on the CPU Triton's interpreter (TRITON_INTERPRET=1, numpy < 2.4)."""
import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import lce_exchange as lx  # noqa: E402
import lce_torch_common as common  # noqa: E402

VARIANTS = ("as-is", "fp32-logits", "fp32-dlogits", "fp32-dweight", "g-after", "ieee-backward", "exact",
            "zero-ignored-rows", "nan-nonfinite-rows")
# run's default: every variant, and the pair that fp16 weight gradients failing on both their size and
# their bias need (any roundings joined by + make a variant).
DEFAULT_VARIANTS = VARIANTS + ("fp32-dweight+g-after",)
# The fused subjects: the adapter's own run on transformed inputs (run_fused_variant).
FUSED_SUBJECTS = {"liger": "default", "liger-fp32-accum": "fp32-accum"}
FUSED_VARIANTS = ("as-is", "zero-ignored-rows", "nan-nonfinite-rows")
SUBJECTS = ("torch-eager", "torch-compile", "megatron-vocab-parallel", "te-parallel-ce") + tuple(FUSED_SUBJECTS)
GRAD_OUTPUTS = ("d_hidden", "d_weight", "d_embedding")
# The failing lists a results file may hold: the recorded H200 run's, and the CPU's as-is run under the
# tree's golden (which may differ from the golden the recorded run was judged by).
FAILING_KEYS = ("failing", "failing_now")
METRICS = ("relerr", "bias", "ulpfrac", "maxscaled")


def log(msg):
    print(msg, flush=True)


# ---- which gradient outputs fail, grouped ----------------------------------------------------

def case_features(cid, n_valid=None):
    """The options a case id names (reference/case/lce_case_id.c's tokens), as short labels."""
    tok = cid.split(".")
    f = {"dtype": tok[0], "emb": tok[1], "tp": tok[2], "reduction": next(t for t in tok if t in ("none", "sum", "mean")),
         "dist": tok[-2], "prior": "prior" if "prior" in tok else "fresh"}
    opts = [t for t in tok if re.fullmatch(r"(ls|lsm|zl|sc)\d+|cw|tf32|tc\d+", t)]
    f["options"] = " ".join(opts)
    ign = next(t for t in tok if t.startswith("ign"))
    f["ignored"] = ign[3:] + "%"
    if n_valid is not None:
        f["n_valid"] = n_valid
    return f


def failing_outputs(case):
    """{output: {metric: % of budget over 100, 'class': message}} of a judged case's failing gradient outputs."""
    out = {}
    for name in GRAD_OUTPUTS:
        o = case.get("outputs", {}).get(name)
        if not o or o.get("pass", True):
            continue
        m = {k: round(v, 1) for k, v in o.get("budget_pct", {}).items() if v is not None and v > 100}
        if not o.get("class_ok", True):
            m["class"] = o.get("class_msg", "")
        out[name] = m
    return out


def cmd_failing(args):
    table = {}
    for path in args.judge_json:
        subject = re.sub(r"^[a-z0-9_]+-", "", os.path.basename(path)[:-5])  # <matrix or variant>-<subject>.json
        with open(path) as f:
            j = json.load(f)
        for c in j.get("cases", []):
            fo = failing_outputs(c)
            if fo:
                row = table.setdefault(c["id"], {"features": case_features(c["id"], c.get("n_valid")), "subjects": {}})
                row["subjects"][subject] = fo
    subjects = sorted({s for r in table.values() for s in r["subjects"]})
    kind = lambda fo: ("class" if any("class" in m for m in fo.values()) else "rounding")  # noqa: E731
    for cid in sorted(table, key=lambda i: (kind(next(iter(table[i]["subjects"].values()))), i)):
        row = table[cid]
        f = row["features"]
        log(f"{cid}\n    {f['dtype']} {f['reduction']} {f['tp']} {f['dist']} ign {f['ignored']} n_valid {f.get('n_valid')}"
            f" {f['options']}  shared by {len(row['subjects'])}/{len(subjects)}")
        for s, fo in sorted(row["subjects"].items()):
            log(f"    {s:24s} " + "; ".join(f"{o} " + ", ".join(f"{k} {v}" if k != "class" else f"class: {v}"
                                                             for k, v in m.items()) for o, m in fo.items()))
    groups = {}
    for cid, row in table.items():
        for s, fo in row["subjects"].items():
            what = "; ".join(f"{o} {'class' if 'class' in m else '/'.join(sorted(m))}" for o, m in sorted(fo.items()))
            groups.setdefault((what, row["features"]["dtype"]), {}).setdefault(cid, set()).add(s)
    log("\ngroups (what fails, dtype): cases, and which subjects fail them")
    for (what, dtype), cases in sorted(groups.items()):
        shared = {}
        for cid, subs in cases.items():
            shared.setdefault(", ".join(sorted(subs)), []).append(cid.split(".")[-1])
        for subs, ids in sorted(shared.items()):
            log(f"  {what:40s} {dtype:5s} {len(ids):3d}  {subs}: {' '.join(sorted(ids))}")
    log(f"{len(table)} cases with a failing gradient output; per subject: "
        + ", ".join(f"{s} {sum(s in r['subjects'] for r in table.values())}" for s in subjects))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"source": [os.path.basename(p) for p in args.judge_json], "cases": table}, f, indent=1, sort_keys=True)
    return 0


# ---- the LM head with its roundings as switches ------------------------------------------------

ROUNDINGS = ("fp32-logits", "fp32-dlogits", "fp32-dweight", "g-after", "ieee-backward")


def parts(variant):
    """The variants a combined one names: 'fp32-dweight+g-after' removes both."""
    return variant.split("+")


def valid_variant(variant):
    p = parts(variant)
    return p[0] in VARIANTS if len(p) == 1 else all(x in ROUNDINGS for x in p) and len(set(p)) == len(p)


class Knobs:
    def __init__(self, variant):
        on = set(ROUNDINGS) if variant == "exact" else set(parts(variant))
        self.logits32 = "fp32-logits" in on
        self.dlogits32 = "fp32-dlogits" in on
        self.dweight32 = "fp32-dweight" in on
        self.g_after = "g-after" in on
        self.ieee_backward = "ieee-backward" in on


class Arith:
    """GEMMs as the peer's device does them. On CUDA: torch's own calls, TF32 by the backend flag,
    a low-precision GEMM with an fp32 result by mm(out_dtype=float32) (the same cuBLAS tensor-core
    GEMM without its output rounding). On the CPU: torch's CPU GEMMs (bf16/fp16 in, fp32 accumulate,
    one output rounding), TF32 emulated by rounding both operands to tf32 (cvt.rna: ties away)."""

    def __init__(self, torch, device):
        self.torch, self.cuda, self.out_dtype = torch, str(device).startswith("cuda"), True

    def tf32(self, x):
        torch = self.torch
        b = x.contiguous().view(torch.int32)
        b = (b + 0x1000) & ~0x1FFF  # add half an ulp of tf32 to the magnitude bits, truncate: ties away
        return b.view(torch.float32)

    def mm(self, a, b, tf32, out32=False):
        """a @ b: in the operands' dtype (low precision: fp32 accumulation, output rounded to that dtype
        unless out32), or in fp32 (TF32 when tf32)."""
        torch = self.torch
        if a.dtype != torch.float32:
            if not out32:
                return a.mm(b)
            if self.cuda and self.out_dtype:
                try:
                    return torch.mm(a, b, out_dtype=torch.float32)
                except (RuntimeError, TypeError) as e:  # an older torch: IEEE fp32 on the upcast operands
                    log(f"root_cause.py: mm(out_dtype=float32) unavailable ({str(e).splitlines()[0][:100]}); "
                        "fp32 results by an IEEE fp32 GEMM of the upcast operands from here on")
                    self.out_dtype = False
            a, b = a.float(), b.float()
            tf32 = False
        if self.cuda:
            old = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            try:
                return a.mm(b)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = old
        return self.tf32(a).mm(self.tf32(b)) if tf32 else a.mm(b)


def make_head(torch, arith, knobs, case, state):
    """The autograd Function hidden, W -> fp32 logits [n, v], with the peers' roundings as knobs.
    state['g'] (a python float or None) is the scale applied after the GEMMs under g-after."""
    import torch.nn.functional as F
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[case.dtype]
    tf32 = case.gemm == "tf32"

    class Head(torch.autograd.Function):
        @staticmethod
        def forward(ctx, h, w):
            ctx.save_for_backward(h, w)
            if knobs.logits32 and dtype != torch.float32:
                return arith.mm(h, w.t(), False, out32=True)
            if arith.cuda or not tf32:
                return F.linear(h, w).float()  # R1, the peer's own call (TF32 by the flag on CUDA)
            return arith.mm(h, w.t(), True)

        @staticmethod
        def backward(ctx, dz):
            h, w = ctx.saved_tensors
            d = dz if knobs.dlogits32 else dz.to(dtype)  # R2: ToCopyBackward / the engine's cast
            bw_tf32 = tf32 and not knobs.ieee_backward
            if tf32 and knobs.ieee_backward:  # the case's tf32 hidden and W (lce_case.h), only d unrounded
                h, w = arith.tf32(h), arith.tf32(w)
            g = state.get("g")
            exact_out = d.dtype != dtype or g is not None
            if exact_out:
                if d.dtype != dtype:
                    hh, ww = h.float(), w.float()
                    dh = arith.mm(d, ww, bw_tf32)
                    dw = arith.mm(d.t(), hh, bw_tf32)
                else:
                    dh = arith.mm(d, w, bw_tf32, out32=True)
                    dw = arith.mm(d.t(), h, bw_tf32, out32=True)
                if g is not None:
                    dh, dw = dh * g, dw * g
                dh = dh.to(dtype)
                dw = dw if knobs.dweight32 else dw.to(dtype)
                state["dw"] = dw  # autograd casts a returned gradient to w's dtype: keep the fp32 one here
                return dh, dw
            # MmBackward of F.linear's mm(input, W^T) (torch's mm_mat1_backward / mm_mat2_backward, W^T being
            # column-major): grad_input = grad.mm(W), grad_weight = grad^T.mm(input)
            dh = arith.mm(d, w, bw_tf32)
            if knobs.dweight32 and dtype != torch.float32:
                dw = state["dw"] = arith.mm(d.t(), h, bw_tf32, out32=True)
            else:
                dw = arith.mm(d.t(), h, bw_tf32)  # R3: returned in the dtype
            return dh, dw

    return Head


# ---- the peers' loss functions ---------------------------------------------------------------

def load_subject(name, args):
    """(adapter, loss(case, t, z, reduction) -> loss tensor) for a subject, its library imported."""
    ns = argparse.Namespace(device=args.device, megatron=args.megatron, te=args.te, tf32="case")
    if name == "torch-eager":
        import torch_eager
        adapter = torch_eager.TorchEager()
        adapter.prepare(ns)

        def loss(case, t, z, reduction):
            return torch_eager.loss_from_logits(case, z, t.labels, t.class_weight, reduction)[0]
    elif name == "torch-compile":  # torch_compile.py's setting: the loss function compiled, dynamic=False
        import torch
        import torch_compile
        import torch._dynamo
        adapter = torch_compile.TorchCompile()
        ns.mode, ns.dynamic = "default", "false"
        adapter.prepare(ns)
        torch._dynamo.config.cache_size_limit = 1024
        compiled = torch.compile(torch_eager_loss(), mode="default", dynamic=False)

        def loss(case, t, z, reduction):
            return compiled(case, z, t.labels, t.class_weight, reduction)[0]
    elif name == "megatron-vocab-parallel":
        import megatron_vocab_parallel
        adapter = megatron_vocab_parallel.MegatronVocabParallel()
        adapter.prepare(ns)
        loss = adapter.loss_from_logits
    elif name == "te-parallel-ce":
        import te_parallel_ce
        adapter = te_parallel_ce.TEParallelCE()
        adapter.prepare(ns)
        loss = adapter.loss_from_logits
    elif name in FUSED_SUBJECTS:
        import liger
        adapter, loss = liger.Liger(), None  # no loss after a head: the variants transform its inputs
        ns.setting = FUSED_SUBJECTS[name]
        adapter.prepare(ns)
    else:
        raise SystemExit(f"root_cause.py: unknown subject {name} (one of {', '.join(SUBJECTS)})")
    return adapter, loss, ns


def torch_eager_loss():
    import torch_eager
    return torch_eager.loss_from_logits


def total_weight(torch, case, t):
    """The mean's divisor as the peers compute it: the valid tokens' count or class-weight sum (fp32)."""
    valid = t.valid
    if t.class_weight is None:
        return valid.float().sum()
    return (t.class_weight[t.labels.clamp(0, case.v - 1)] * valid).sum()


def not_applicable(case, variant):
    if "+" in variant:
        return next((why for why in (not_applicable(case, x) for x in parts(variant)) if why), None)
    if variant == "g-after" and case.reduction == "none":
        return "g is the token's own grad_output (reduction none): it cannot move after the weight GEMM"
    if variant in ("fp32-logits", "fp32-dlogits", "fp32-dweight") and case.dtype == "float32":
        return "fp32 inputs: the logits, their gradient and the weight gradient are fp32 already"
    if variant == "ieee-backward" and case.gemm != "tf32":
        return "no tf32 GEMMs in this case"
    if variant in ("zero-ignored-rows", "nan-nonfinite-rows") and not case.id.split(".")[-2] == "poison":
        return "no non-finite input in this case"
    return None


def nonfinite_input_rows(torch, variant, h, valid):
    """h after zero-ignored-rows (the ignored tokens' rows 0) or, for a fused subject, nan-nonfinite-rows
    (every row holding a NaN or Inf all NaN); where(), not a product: 0 * NaN would be NaN again."""
    zero = torch.zeros((), dtype=h.dtype, device=h.device)
    if variant == "zero-ignored-rows":
        return torch.where(valid[:, None], h, zero)
    bad = ~torch.isfinite(h.detach()).all(dim=1)
    return torch.where(bad[:, None], torch.full((), float("nan"), dtype=h.dtype, device=h.device), h)


def run_fused_variant(torch, adapter, case, t, variant, ns):
    """A fused subject's own run (adapter.run) on the variant's hidden rows; a RunResult."""
    if variant != "as-is":
        t = copy.copy(t)
        t.hidden = nonfinite_input_rows(torch, variant, t.hidden, t.valid)
    return adapter.run(case, t, ns)


def run_variant(torch, arith, loss_fn, case, t, variant):
    """One forward+backward with the variant's knobs; a RunResult."""
    knobs = Knobs(variant)
    state = {}
    reduction = case.reduction
    go = t.grad_output
    if knobs.g_after and reduction != "none":
        g = go.reshape(()).float()
        if reduction == "mean":
            g = g / total_weight(torch, case, t)
        state["g"] = g.item()
        reduction, go = "sum", torch.ones_like(go)
    head = make_head(torch, arith, knobs, case, state)
    h = t.hidden.detach().requires_grad_()
    w = t.w.detach().requires_grad_()
    h_in = h
    if variant == "zero-ignored-rows":
        h_in = nonfinite_input_rows(torch, variant, h, t.valid)
    z = head.apply(h_in, w)
    if variant == "nan-nonfinite-rows":  # added, so that the loss's NaN gradient flows back through it
        bad = ~torch.isfinite(h.detach()).all(dim=1)
        z = z + torch.where(bad, float("nan"), 0.0)[:, None]
    loss = loss_fn(case, t, z, reduction)
    d_hidden, d_weight = torch.autograd.grad(loss, (h, w), go.reshape(loss.shape))
    d_weight = state.get("dw", d_weight)
    return common.RunResult(loss=loss.detach(), d_hidden=d_hidden, d_weight=d_weight)


def same_bits(a, b):
    """Bit-identical, where a NaN matches any NaN (the payload and sign of a NaN are the GEMM's choice)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = a.contiguous().view(-1), b.contiguous().view(-1)
    return bool(((a.view(_int_of(a)) == b.view(_int_of(b))) | (a.isnan() & b.isnan())).all())


def _int_of(x):
    import torch
    return {2: torch.int16, 4: torch.int32}[x.element_size()]


def copy_export(export, cases, dest):
    """dest: an exchange directory holding only `cases` (id, case dir) of export, inputs hard-linked."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    entries = []
    for cid, d in cases:
        rel = os.path.relpath(d, export)
        shutil.copytree(d, os.path.join(dest, rel), copy_function=os.link,
                        ignore=shutil.ignore_patterns("out"))
        entries.append({"id": cid, "dir": rel})
    with open(os.path.join(dest, "manifest.json"), "w") as f:
        json.dump({"format": lx.FORMAT_MANIFEST, "version": lx.VERSION, "cases": entries}, f, indent=1)


def judge(lcecheck, d, name, oracle):
    cmd = [lcecheck, "judge", "--dir", d, "--subject-name", name, "--golden-class", "fused-cuda",
           "--golden", os.path.join(ROOT, "golden", "sm_90", "fused-cuda.golden"), "--oracle", oracle,
           "--outputs", ",".join(GRAD_OUTPUTS), "--quiet", "--json"]
    log("+ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"root_cause.py: judge exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return json.loads(p.stdout)


def worst(o):
    """'pass'/'FAIL' with the worst metric's % of budget (and a class failure's message)."""
    if o is None:
        return None
    pct = {k: v for k, v in o.get("budget_pct", {}).items() if v is not None}
    k = max(pct, key=pct.get) if pct else None
    return {"pass": o.get("pass"), "metric": k, "pct": round(pct[k], 1) if k else None,
            "budget_pct": {m: round(v, 1) for m, v in pct.items()}, "relerr": o.get("relerr"), "bias": o.get("bias"),
            "class": None if o.get("class_ok", True) else o.get("class_msg")}


def cell(w, targets):
    """A variant's verdict on the metrics that fail as-is (targets), or on what it fails itself."""
    if w is None:
        return "-"
    if w["class"]:
        return "class✗"
    pct = w["budget_pct"]
    failing = [m for m in METRICS if pct.get(m, 0) > 100]
    show = failing or [m for m in targets if m in pct] or [w["metric"]]
    m = max(show, key=lambda k: pct.get(k, 0))
    return f"{pct.get(m, 0):.0f}% {m[:4]}{'✗' if not w['pass'] else ''}"


def select_cases(args, subject):
    cases = lx.load_manifest(args.export)
    want = set(args.case or [])
    if args.cases_from:
        with open(args.cases_from) as f:
            j = json.load(f)
        for key in [k for k in FAILING_KEYS if k in j] or [None]:
            listed = (j[key] if key else j).get("cases", {})
            want |= {cid for cid, row in listed.items() if subject in row.get("subjects", {})
                     or (subject == "torch-eager" and "torch-compile" in row.get("subjects", {}))}
    return [(cid, d) for cid, d in cases if not want or cid in want]


def cmd_run(args):
    try:
        torch = common.torch_module()
    except ImportError as e:
        print(f"root_cause.py: run needs torch: {e}", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    subject = args.subject
    adapter, loss_fn, ns = load_subject(subject, args)
    arith = Arith(torch, args.device)
    fused = subject in FUSED_SUBJECTS
    variants = (args.variants or ",".join(FUSED_VARIANTS if fused else DEFAULT_VARIANTS)).split(",")
    for v in variants:
        if fused and v not in FUSED_VARIANTS:
            raise SystemExit(f"root_cause.py: {subject} is fused: its roundings are inside the library; "
                             f"the variants on its inputs are {', '.join(FUSED_VARIANTS)}")
        if not valid_variant(v):
            raise SystemExit(f"root_cause.py: unknown variant {v} (one of {', '.join(VARIANTS)}, or roundings "
                             f"joined by +: {', '.join(ROUNDINGS)})")
    cases = select_cases(args, subject)
    out = os.path.join(args.out or args.export.rstrip("/") + ".rootcause", subject)
    log(f"root_cause.py: {subject} ({adapter.version(ns)}) on {common.device_name(args.device)}, {len(cases)} case(s), "
        f"variants {', '.join(variants)} -> {out}")
    dirs = {}
    for v in variants:
        dirs[v] = os.path.join(out, v)
        copy_export(args.export, cases, dirs[v])
    asis_check = {}
    start = time.monotonic()
    for cid, case_dir in cases:
        rel = os.path.relpath(case_dir, args.export)
        skip = common.skip_reason(lx.Case(os.path.join(dirs[variants[0]], rel)), adapter.supported)
        t = None
        for v in variants:
            c = lx.Case(os.path.join(dirs[v], rel))
            why = skip or not_applicable(c, v)
            if why:
                c.write_skip(why)
                continue
            if t is None:
                common.set_gemm_mode(c, "case")
                t = common.Tensors(c, args.device)
            meta = {"subject": f"{subject}/{v}", "version": adapter.version(ns), "setting": v,
                    "device": common.device_name(args.device), "seconds": None, "peak_extra_bytes": None}
            try:
                if fused:
                    res = run_fused_variant(torch, adapter, c, t, v, ns)
                else:
                    res = run_variant(torch, arith, loss_fn, c, t, v)
                if v == "as-is" and not fused and (arith.cuda or c.gemm != "tf32"):
                    ref = adapter.run(c, t, ns)
                    asis_check[cid] = same_bits(res.d_hidden, ref.d_hidden) and same_bits(res.d_weight, ref.d_weight)
                meta["missing"] = common.write_outputs(c, t, res)
            except Exception as e:  # the library raised: an error case, as the adapters record it
                meta["missing"] = list(c.outputs)
                meta["error"] = f"{type(e).__name__}: {e}"[:2000]
                log(f"  {cid} {v}: error {meta['error'].splitlines()[0]}")
            c.write_meta(meta)
    log(f"root_cause.py: {len(cases)} cases x {len(variants)} variants in {time.monotonic() - start:.1f} s; "
        + ("as-is is the adapter's own run" if fused else
           f"as-is bit-identical (any NaN matching any NaN) to the adapter on {sum(asis_check.values())} of "
           f"{len(asis_check)} compared cases"
           + ("" if all(asis_check.values()) else f" (differs: {', '.join(k for k, ok in asis_check.items() if not ok)})")))
    verdicts = {}
    for v in variants:
        j = judge(args.lcecheck, dirs[v], f"{subject}/{v}", args.oracle)
        verdicts[v] = {c["id"]: c for c in j.get("cases", [])}
        if args.judge_dir:  # named as gpu_external.sh names a matrix's judge, for `failing`
            os.makedirs(args.judge_dir, exist_ok=True)
            with open(os.path.join(args.judge_dir, f"{v.replace('-', '').replace('+', '_')}-{subject}.json"), "w") as f:
                json.dump(j, f)
    rows = {}
    for cid, _ in cases:
        for o in GRAD_OUTPUTS:
            r = {v: worst(verdicts[v].get(cid, {}).get("outputs", {}).get(o)) for v in variants}
            r = {v: w for v, w in r.items() if w is not None and (w["metric"] is not None or w["class"])}
            if r and any(not w["pass"] for w in r.values()):
                rows.setdefault(cid, {})[o] = r
    recorded, recorded_json = {}, {}
    if args.recorded:
        with open(args.recorded) as f:
            rec = json.load(f)
        for cid, row in rec.get("failing", rec).get("cases", {}).items():
            fo = row.get("subjects", {}).get(subject) or row.get("subjects", {}).get("torch-compile", {})
            for o, m in fo.items():
                k = "class" if "class" in m else max((x for x in m if x != "class"), key=m.get, default=None)
                recorded[(cid, o)] = "class✗" if k == "class" else f"{m[k]:.0f}% {k[:4]}✗"
                if cid in rows:
                    recorded_json.setdefault(cid, {})[o] = m
    log(f"\n{'case / output':70s} " + (f"{'recorded':>14s} " if args.recorded else "")
        + " ".join(f"{v:>14s}" for v in variants))
    for cid, outs in rows.items():
        for o, r in outs.items():
            base = r.get("as-is") or next(iter(r.values()))
            targets = [m for m in METRICS if base["budget_pct"].get(m, 0) > 100]
            log(f"{(cid + ' ' + o)[-70:]:70s} " + (f"{recorded.get((cid, o), '-'):>14s} " if args.recorded else "")
                + " ".join(f"{cell(r.get(v), targets):>14s}" for v in variants))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"subject": subject, "version": adapter.version(ns), "device": common.device_name(args.device),
                       "variants": variants, "asis_bit_identical": asis_check, "cases": rows,
                       "recorded": recorded_json}, f, indent=1, sort_keys=True)
    return 0


def cmd_collect(args):
    """One file: the failing list (from `failing --json`) and each `run --json`, under a run label."""
    doc = {}
    if os.path.exists(args.into):
        with open(args.into) as f:
            doc = json.load(f)
    if args.failing:
        with open(args.failing) as f:
            doc[args.failing_key] = json.load(f)
        doc[args.failing_key]["run"] = args.label
    for path in args.run_json:
        with open(path) as f:
            r = json.load(f)
        doc.setdefault("runs", {}).setdefault(args.label, {})[r["subject"]] = r
    with open(args.into, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    log(f"root_cause.py: {args.into}: "
        + "".join(f"{k} ({doc[k].get('run')}, {len(doc[k].get('cases', {}))} cases), " for k in FAILING_KEYS if k in doc) + "runs "
        + ", ".join(f"{k}: {', '.join(sorted(v))}" for k, v in doc.get("runs", {}).items()))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("failing", help="the failing gradient outputs in judge JSON files, grouped")
    f.add_argument("judge_json", nargs="+", help="`lcecheck judge --json` files named <matrix>-<subject>.json")
    f.add_argument("--json", metavar="F", help="write the table as JSON")
    r = sub.add_parser("run", help="the variants over an export's cases, judged")
    r.add_argument("export", help="a directory written by `lcecheck export`")
    r.add_argument("--subject", required=True, choices=SUBJECTS)
    r.add_argument("--case", action="append", metavar="ID", help="only this case (repeatable)")
    r.add_argument("--cases-from", metavar="F", help="only the cases `failing --json` lists for this subject "
                   "(torch-eager also takes torch-compile's: the same arithmetic)")
    r.add_argument("--variants", help="comma-separated; roundings joined by + remove several at once (default "
                   f"{','.join(DEFAULT_VARIANTS)}; for the fused subjects {','.join(FUSED_VARIANTS)})")
    r.add_argument("--device", default="cuda", help="torch device (default %(default)s)")
    r.add_argument("--out", metavar="DIR", help="where the result directories go (default EXPORT.rootcause)")
    r.add_argument("--lcecheck", default=os.path.join(ROOT, "build", "lcecheck"), help="default %(default)s")
    r.add_argument("--oracle", default="fast", help="the judge's oracle (default %(default)s)")
    r.add_argument("--megatron", default=os.path.join(ROOT, ".subjects", "megatron"), help="default %(default)s")
    r.add_argument("--te", default=os.path.join(ROOT, ".subjects", "transformer-engine"), help="default %(default)s")
    r.add_argument("--recorded", metavar="F", help="a `failing --json` file: its verdict of each row printed beside "
                   "the variants (the recorded run's, e.g. the H200's)")
    r.add_argument("--judge-dir", metavar="DIR", help="keep each variant's `lcecheck judge --json` as "
                   "DIR/<variant without dashes>-<subject>.json (e.g. asis-torch-eager.json: `failing` reads them)")
    r.add_argument("--json", metavar="F", help="write the per-variant verdicts as JSON")
    c = sub.add_parser("collect", help="gather a failing list and run results into one JSON file")
    c.add_argument("into", help="the file (e.g. conformance/external-rootcause.json), updated in place")
    c.add_argument("--label", required=True, help="what the runs (or the failing list) were measured on, "
                   "e.g. 'cpu, 2026-12-04' or 'H200, GPU_RUNS.md ...'")
    c.add_argument("--failing", metavar="F", help="a `failing --json` file: the list `run --cases-from` reads")
    c.add_argument("--failing-key", choices=FAILING_KEYS, default="failing",
                   help="where the list goes: failing (a recorded run's; `run --recorded` prints it) or "
                        "failing_now (the as-is verdicts under this tree's golden); --cases-from takes both")
    c.add_argument("--run", dest="run_json", action="append", default=[], metavar="F",
                   help="a `run --json` file (repeatable)")
    args = ap.parse_args(argv)
    return {"failing": cmd_failing, "run": cmd_run, "collect": cmd_collect}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
