#!/usr/bin/env python3
"""scale_experiment.py — a GPU experiment on the common gradient bias of bf16 FLCE kernels under mean
reduction (conformance/EXTERNAL.md, "The common bias").

Claim under test: every kernel that folds the mean's scale into bf16 d_logits biases d_hidden and
d_weight by the bf16 rounding error of that scale, because every valid token's target entry is
≈ −scale (p_y ≪ 2^-9 with random labels) and rounds the same way. For torch, Megatron, CCE and
lcecheck's own kernels the scale is g = fp32(go / n_valid); for Liger it is 1/n_valid (go applied
later). So choosing go such that g is exactly a bf16 number removes the bias of the first group and
leaves Liger's at the bf16 error of 1/n_valid.

Three runs on the same inputs (N x H x V, bf16, untied, mean, `--ignored` labels set to -100):
go as lcecheck's generator draws it (0.355774552), go' = the fp32 number nearest n_valid·bf16(g)
with fp32(go'/n_valid) bf16-exact, and go = 1 (`--go` picks among drawn, exact, one, or an fp32 value).
A second claim: a kernel that scales its bf16 gradients by go after rounding them (Liger's backward,
element_mul_kernel) rounds each product bf16(x)·go to bf16 again, and since the gradients sit near
bf16 multiples of W's and h's values (the label term dominates), that second rounding's error is a
fixed function of x's significand that does not average out. Printed per go as "double rounding":
Σ (bf16(x·go) − x·go)·x·go / Σ (x·go)² over W's bf16 values, 0 when go is a power of two. Each kernel's loss, d_hidden and d_weight are compared with an
fp64 reference on the GPU: relerr = ‖x − r‖/‖r‖, bias = Σ(x − r)·r / Σr², orth = √(relerr² − bias²).
Also: torch with fp32 logits (`torch-fp32-logits`: F.linear on fp32 copies, TF32 off), and torch's
weight gradient before its bf16 cast (`torch-eager dW fp32`: d_logits captured by a hook, the GEMM
in fp32), the two other causes EXTERNAL.md names.

    python3 scripts/subjects/scale_experiment.py [--n 8192 --h 4096 --v 128256 --ignored 410]
        [--kernels torch-eager,torch-fp32-logits,liger,liger-fp32-accum,cce,megatron-fused-lce]
        [--go drawn,exact,one] [--megatron PATH] [--device cuda|cpu] [--json FILE]
On a machine without a GPU, `--device cpu` with TRITON_INTERPRET=1 runs the torch kernels and Liger
(in Triton's interpreter, with lce_torch_common.triton_interpreter_shims and liger.py's tanh) at small
shapes; the fp64 reference runs on the same device.
Kernels whose library does not import are reported as skipped. Exit 0 when it ran, 2 on bad usage."""
import argparse
import json
import math
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_exchange  # noqa: E402  (the one binary-format rounding of the scripts)

GO_DRAWN = 0.355774552
KERNELS = "torch-eager,torch-fp32-logits,liger,liger-fp32-accum,cce,megatron-fused-lce"


def f32(x):
    return lce_exchange.round_to_format(x, "float32")


def bf16(x):
    """Round-to-nearest-even to bfloat16 of the fp32 value of x."""
    return lce_exchange.round_to_format(f32(x), "bfloat16")


def exact_go(go, n_valid):
    """An fp32 go' near go with fp32(go'/n_valid) a bf16 number, found by walking fp32 neighbours of
    n_valid·bf16(go/n_valid)."""
    target = bf16(f32(go / n_valid))
    cand = f32(n_valid * target)
    bits = struct.unpack("I", struct.pack("f", cand))[0]
    for step in range(0, 64):
        for b in (bits + step, bits - step):
            c = struct.unpack("f", struct.pack("I", b))[0]
            if f32(c / n_valid) == target:
                return c
    raise RuntimeError(f"no fp32 go' with bf16-exact go'/{n_valid}")


def metrics(x, r):
    d = x.double() - r
    rr = float((r * r).sum())
    rel = math.sqrt(float((d * d).sum()) / rr)
    bias = float((d * r).sum()) / rr
    return {"relerr": rel, "bias": bias, "orth": math.sqrt(max(rel * rel - bias * bias, 0.0))}


def reference(torch, h, w, labels, go):
    """fp64 loss, d_hidden, d_weight of mean cross-entropy over the valid tokens."""
    h64, w64 = h.double(), w.double()
    z = h64 @ w64.t()
    valid = labels != -100
    n_valid = int(valid.sum())
    lse = torch.logsumexp(z, dim=1)
    y = labels.clamp(min=0)
    loss = ((lse - z.gather(1, y[:, None])[:, 0]) * valid).sum() / n_valid
    z.sub_(lse[:, None]).exp_()  # p
    z[torch.arange(z.shape[0], device=z.device), y] -= 1.0
    z.mul_((valid.double() * (go / n_valid))[:, None])
    dh = z @ w64
    dw = z.t() @ h64
    return loss, dh, dw


def kernel_fn(name, args):
    """(callable(h, w, labels) -> loss, note) or (None, why it cannot run)."""
    import torch
    import torch.nn.functional as F
    if name == "torch-eager":
        return (lambda h, w, y: F.cross_entropy(F.linear(h, w).float(), y)), "F.linear in bf16, fp32 softmax"
    if name == "torch-fp32-logits":
        return (lambda h, w, y: F.cross_entropy(F.linear(h.float(), w.float()), y)), "fp32 logits, TF32 off"
    try:
        if name.startswith("liger"):
            from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
            if os.environ.get("TRITON_INTERPRET") == "1":
                import liger
                import lce_torch_common
                lce_torch_common.triton_interpreter_shims()
                liger.interpreted_tanh()
            acc = torch.float32 if name == "liger-fp32-accum" else None
            fn = LigerFusedLinearCrossEntropyLoss(reduction="mean", accum_dtype=acc)
            return (lambda h, w, y: fn(w, h, y)), "LigerFusedLinearCrossEntropyLoss"
        if name == "cce":
            from cut_cross_entropy import linear_cross_entropy
            return (lambda h, w, y: linear_cross_entropy(h, w, y, reduction="mean", impl="cce")), "impl cce"
        if name == "megatron-fused-lce":
            from megatron_fused_lce import load_linear_cross_entropy
            lce = load_linear_cross_entropy(args.megatron)
            return (lambda h, w, y: lce(h, w, y, reduction="mean", ignore_index=-100)), "PR 3345 Hopper"
    except Exception as e:  # an adapter whose library is absent or fails to load is skipped, with why
        return None, f"{type(e).__name__}: {e}"
    return None, "unknown kernel"


def run_kernel(torch, fn, h, w, labels, go, hook_dw):
    hh = h.detach().requires_grad_()
    ww = w.detach().requires_grad_()
    captured = {}
    if hook_dw:  # torch-eager's d_logits, to redo its weight-gradient GEMM in fp32 before the cast
        import torch.nn.functional as F
        z = F.linear(hh, ww)
        z.register_hook(lambda g: captured.setdefault("dz", g))
        loss = F.cross_entropy(z.float(), labels)
    else:
        loss = fn(hh, ww, labels)
    sync(torch, h.device)
    t0 = time.perf_counter()
    dh, dw = torch.autograd.grad(loss, (hh, ww), torch.tensor(go, device=h.device, dtype=loss.dtype))
    sync(torch, h.device)
    out = {"loss": loss.detach(), "d_hidden": dh, "d_weight": dw, "bwd_s": time.perf_counter() - t0}
    if hook_dw:
        out["d_weight_fp32"] = captured["dz"].float().t() @ h.float()
    return out


def sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def double_rounding(torch, w, go):
    """The x^2-weighted mean relative error of bf16(x·go) over the bf16 values x of W (the second
    rounding of a kernel that scales bf16 gradients by go; 0 for a power of two)."""
    x = w.double().flatten()
    exact = x * go
    got = (w.float().flatten() * torch.tensor(go, dtype=torch.float32, device=w.device)).bfloat16().double()
    return float(((got - exact) * exact).sum() / (exact * exact).sum())


def go_values(spec, n_valid):
    """[(tag, fp32 go)] from --go: drawn, exact (go' with bf16-exact go'/n_valid), one, or a number."""
    named = {"drawn": lambda: f32(GO_DRAWN), "exact": lambda: exact_go(GO_DRAWN, n_valid), "one": lambda: 1.0}
    out = []
    for tag in [t for t in spec.split(",") if t]:
        if tag in named:
            out.append(({"exact": "bf16-exact g"}.get(tag, tag), named[tag]()))
        else:
            try:
                out.append((tag, f32(float(tag))))
            except ValueError:
                raise SystemExit(f"scale_experiment.py: --go {tag}: not drawn, exact, one or a number")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--h", type=int, default=4096)
    ap.add_argument("--v", type=int, default=128256)
    ap.add_argument("--ignored", type=int, default=410, help="labels set to -100 (default 410: n_valid 7782)")
    ap.add_argument("--kernels", default=KERNELS)
    ap.add_argument("--megatron", default=".subjects/megatron", metavar="PATH")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--go", default="drawn,exact,one", help="the upstream gradients to run (default %(default)s)")
    ap.add_argument("--device", default="cuda", help="torch device (default %(default)s)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    if not 0 <= args.ignored < args.n:
        ap.error(f"--ignored {args.ignored} must be in [0, n) with n {args.n}")
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    h = (torch.randn(args.n, args.h, device=dev, generator=gen) * (3.0 / math.sqrt(args.h))).bfloat16()
    w = torch.randn(args.v, args.h, device=dev, generator=gen).bfloat16()
    labels = torch.randint(0, args.v, (args.n,), device=dev, generator=gen)
    labels[torch.randperm(args.n, device=dev, generator=gen)[:args.ignored]] = -100
    n_valid = args.n - args.ignored
    gos = go_values(args.go, n_valid)
    g = f32(GO_DRAWN / n_valid)
    print(f"N {args.n} H {args.h} V {args.v}, n_valid {n_valid}; g = fp32(go/n) = {g:.9g}, "
          f"bf16(g)/g - 1 = {bf16(g) / g - 1:+.4e}; bf16(1/n)·n - 1 = {bf16(1.0 / n_valid) * n_valid - 1:+.4e}",
          flush=True)
    rows = []
    kernels = [k for k in args.kernels.split(",") if k]
    for tag, go in gos:
        t0 = time.perf_counter()
        r_loss, r_dh, r_dw = reference(torch, h, w, labels, go)
        g_go = f32(go / n_valid)
        dr = double_rounding(torch, w, go)
        print(f"[{tag}] go {go:.9g}: bf16(go/n)/(go/n) - 1 = {bf16(g_go) / (go / n_valid) - 1:+.4e}; "
              f"double rounding {dr:+.4e}; fp64 reference {time.perf_counter() - t0:.1f} s", flush=True)
        for k in kernels:
            fn, note = kernel_fn(k, args)
            if fn is None:
                rows.append({"go": tag, "kernel": k, "skipped": note})
                print(f"  {k}: skipped ({note})", flush=True)
                continue
            out = run_kernel(torch, fn, h, w, labels, go, hook_dw=(k == "torch-eager"))
            row = {"go": tag, "go_value": go, "double_rounding": dr, "kernel": k, "note": note,
                   "loss_relerr": abs(float(out["loss"]) - float(r_loss)) / abs(float(r_loss)),
                   "d_hidden": metrics(out["d_hidden"], r_dh), "d_weight": metrics(out["d_weight"], r_dw)}
            if "d_weight_fp32" in out:
                row["d_weight_before_cast"] = metrics(out["d_weight_fp32"], r_dw)
            rows.append(row)
            del out
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            print(f"  {k}: d_hidden relerr {row['d_hidden']['relerr']:.4e} bias {row['d_hidden']['bias']:+.4e}; "
                  f"d_weight relerr {row['d_weight']['relerr']:.4e} bias {row['d_weight']['bias']:+.4e}", flush=True)
        del r_dh, r_dw
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    print("\n| go | kernel | dh relerr | dh bias | dh orth | dW relerr | dW bias | dW orth | loss relerr |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['go']} | {r['kernel']} | skipped: {r['skipped'][:60]} |||||||")
            continue
        dh, dw = r["d_hidden"], r["d_weight"]
        print(f"| {r['go']} | {r['kernel']} | {dh['relerr']:.3e} | {dh['bias']:+.3e} | {dh['orth']:.3e} | "
              f"{dw['relerr']:.3e} | {dw['bias']:+.3e} | {dw['orth']:.3e} | {r['loss_relerr']:.2e} |")
        if "d_weight_before_cast" in r:
            b = r["d_weight_before_cast"]
            print(f"| {r['go']} | torch-eager dW fp32 | | | | {b['relerr']:.3e} | {b['bias']:+.3e} | {b['orth']:.3e} | |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": args.n, "h": args.h, "v": args.v, "n_valid": n_valid, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
