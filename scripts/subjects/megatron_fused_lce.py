#!/usr/bin/env python3
"""megatron_fused_lce.py — external subject: Megatron-LM's fused linear cross-entropy for Hopper
(CuTe-DSL kernels, NVIDIA/Megatron-LM pull request 3345, refs/pull/3345/head c55fa113f1),
megatron.core.fusions.fused_linear_cross_entropy.linear_cross_entropy(hidden, weight, labels,
tp_group=None, reduction=, ignore_index=, sequence_parallel=False), imported from --megatron PATH
with only megatron/core/fusions/ loaded (megatron/ and megatron/core/ become empty packages). Needs
nvidia-cutlass-dsl (4.3.5 is known to work), cuda-bindings, triton, and an sm_90 or sm_100 GPU.
Forward: per split of 3072 vocab rows (LCE_FWD_VOCAB_SPLIT_SIZE) an online-softmax GEMM kernel,
a Triton epilogue; backward: per split a partial d_logits kernel in the input dtype, then cuBLAS
d_hidden += d_logits @ W_split into an fp32 buffer (PR #2739's fix) and d_weight rows per split.

Subcommands:
    run DIR          judge-side runner over an export (bf16/fp16; reductions none/sum/mean;
                     ignore_index; no smoothing, z-loss, softcap or class weights)
    unit-test        the branch's own tests/unit_tests/fusions/test_fused_linear_cross_entropy.py::
                     TestFusedLinearCrossEntropyDataParallel::test_correctness re-run standalone:
                     U(-0.1, 0.1) hidden and weight, uniform labels (ignore_index 4 placed by a
                     shift), reference = F.cross_entropy on fp32 logits, torch.testing.assert_close
                     on the loss with default tolerances and on d_hidden, d_weight with atol=rtol=1e-3,
                     grad_output U(-0.1, 0.1); its verdict, to report beside lcecheck's

    python3 scripts/subjects/megatron_fused_lce.py run --megatron PATH DIR
    python3 scripts/subjects/megatron_fused_lce.py unit-test --megatron PATH [--problems small|all]
        [--dtypes bf16,fp16] [--json F]"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_torch_common as common  # noqa: E402

LIGHT = ("megatron", "megatron.core", "megatron.core.fusions")
MODULE = "megatron.core.fusions.fused_linear_cross_entropy"


def load_linear_cross_entropy(root):
    """The branch's linear_cross_entropy, with the Hopper entry's own import error surfaced (the
    entry module swallows ImportError and only logs a warning)."""
    import torch
    mod = common.import_from_checkout(root, MODULE, LIGHT)
    major = torch.cuda.get_device_capability()[0]
    if major not in (9, 10):
        raise RuntimeError(f"compute capability {major}.x: the fused kernels exist for sm_90 and sm_100 only")
    arch = "hopper" if major == 9 else "blackwell"
    entry = common.import_from_checkout(root, f"megatron.core.fusions.linear_cross_entropy.{arch}.entry", LIGHT)
    if not hasattr(entry, "forward"):
        common.import_from_checkout(root, f"megatron.core.fusions.linear_cross_entropy.{arch}.fwd_mainloop", LIGHT)
        raise ImportError(f"{entry.__file__} defined no forward (its imports failed)")
    return mod.linear_cross_entropy


class MegatronFusedLCE(common.LossFunctionAdapter):
    name = "megatron-fused-lce"
    description = __doc__
    supported = common.Supported(
        dtypes=("bfloat16", "float16"), tf32=False,
        notes={"dtype": "the fused kernels take bf16/fp16 (the branch's tests use both)",
               "smoothing": "linear_cross_entropy has no label smoothing",
               "z_loss": "linear_cross_entropy has no z-loss",
               "softcap": "linear_cross_entropy has no logit softcap",
               "class_weights": "linear_cross_entropy has no class weights"})

    def extra_skip(self, case, args):
        # The Hopper kernels load hidden and weight rows by TMA, whose inner extent must be a multiple
        # of 128 bytes ("K dimension is not 128B aligned" from the CuTe DSL otherwise): H % 64 for
        # 2-byte dtypes. A precondition of the kernel, so a skip rather than a finding.
        if case.h % 64:
            return f"H {case.h} is not a multiple of 64 (the kernels need 128-byte aligned hidden rows)"
        return None

    def add_args(self, ap):
        ap.add_argument("--megatron", required=True, metavar="PATH",
                        help="Megatron-LM tree of PR 3345 (the directory holding megatron/core/fusions/)")

    def prepare(self, args):
        self.lce = load_linear_cross_entropy(args.megatron)

    def version(self, args):
        from importlib.metadata import PackageNotFoundError, version
        try:
            cutlass = version("nvidia-cutlass-dsl")
        except PackageNotFoundError:
            cutlass = "?"
        return f"Megatron-LM {common.checkout_revision(args.megatron)}, nvidia-cutlass-dsl {cutlass}"

    def call(self, case, t, args, h, w, reduction):
        return self.lce(h, w, t.labels, reduction=reduction, ignore_index=case.ignore_index)


# ---- the branch's test_correctness, standalone ---------------------------------------------------

PROBLEMS = [(80, 125, 64), (80, 152064, 64), (1024, 152064, 4096), (4096, 152063, 8192),
            ((1, 4096), 152064, 8192), ((2, 4096), 152064, 8192)]  # (num_tokens, vocabsize, dim)
SMALL = PROBLEMS[:2]


def torch_linear_cross_entropy(hidden, weight, labels, reduction, ignore_index):
    import torch
    logits = hidden.to(torch.float32) @ weight.T.to(torch.float32)
    logprobs = torch.nn.functional.cross_entropy(
        logits.view(-1, logits.shape[-1]), labels.view(-1), reduction=reduction, ignore_index=ignore_index)
    return logprobs.to(torch.float32)


def closeness(actual, expected, atol, rtol):
    """max |a - e| and the largest |a - e| / (atol + rtol |e|) (> 1: assert_close fails)."""
    d = (actual.float() - expected.float()).abs()
    return float(d.max()), float((d / (atol + rtol * expected.float().abs())).max())


def test_correctness(lce, dtype, problem, reduction, ignore_index, seed):
    import torch
    torch.manual_seed(seed)  # upstream draws from the global RNG without a seed
    num_tokens, vocabsize, dim = problem
    hidden_shape = (num_tokens, dim) if isinstance(num_tokens, int) else (*num_tokens, dim)
    labels_shape = (num_tokens,) if isinstance(num_tokens, int) else num_tokens
    hidden = torch.empty(hidden_shape, dtype=dtype, device="cuda").uniform_(-0.1, 0.1).requires_grad_()
    weight = torch.empty((vocabsize, dim), dtype=dtype, device="cuda").uniform_(-0.1, 0.1).requires_grad_()
    labels = torch.randint(0, vocabsize, labels_shape, dtype=torch.long, device="cuda")
    if 0 <= ignore_index < vocabsize:
        labels = torch.nn.functional.pad(labels, (0, 1), value=ignore_index)[..., 1:].contiguous()
    result = {"dtype": str(dtype).replace("torch.", ""), "problem": repr(problem), "reduction": reduction,
              "ignore_index": ignore_index, "seed": seed, "checks": {}}
    ref = torch_linear_cross_entropy(hidden, weight, labels, reduction=reduction, ignore_index=ignore_index)
    out = lce(hidden, weight, labels, reduction=reduction, ignore_index=ignore_index)
    failures = []

    def check(name, a, e, **tol):
        try:
            torch.testing.assert_close(e, a, **tol)
            ok = True
        except AssertionError as err:
            ok = False
            failures.append(f"{name}: {str(err).splitlines()[0]}")
        default = {torch.float32: (1e-5, 1.3e-6), torch.bfloat16: (1e-5, 1.6e-2), torch.float16: (1e-5, 1e-3)}[e.dtype]
        atol, rtol = tol.get("atol", default[0]), tol.get("rtol", default[1])  # assert_close's defaults
        maxabs, ratio = closeness(a, e, atol, rtol)
        result["checks"][name] = {"pass": ok, "max_abs_diff": maxabs, "worst_ratio_to_tolerance": ratio}

    check("loss", out, ref)
    g = torch.empty_like(ref).uniform_(-0.1, 0.1)
    d_ref = torch.autograd.grad((ref,), (hidden, weight), (g,), retain_graph=False)
    d_out = torch.autograd.grad((out,), (hidden, weight), (g,), retain_graph=False)
    check("d_hidden", d_out[0], d_ref[0], atol=1e-3, rtol=1e-3)
    check("d_weight", d_out[1], d_ref[1], atol=1e-3, rtol=1e-3)
    result["pass"] = not failures
    result["failures"] = failures
    return result


def unit_test_main(argv):
    ap = argparse.ArgumentParser(prog="megatron_fused_lce.py unit-test",
                                 description="Re-runs PR 3345's test_correctness standalone and prints its verdict.")
    ap.add_argument("--megatron", required=True, metavar="PATH", help="Megatron-LM tree of PR 3345")
    ap.add_argument("--problems", choices=("small", "all"), default="all",
                    help="small: the two 80-token problems only (default %(default)s)")
    ap.add_argument("--dtypes", default="bf16,fp16", metavar="LIST",
                    help="which of upstream's two dtypes to run, comma-separated: bf16, fp16 (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed before each test (default %(default)s)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    names = [d for d in args.dtypes.split(",") if d]
    unknown = [d for d in names if d not in ("bf16", "fp16")]
    if unknown or not names:
        ap.error(f"--dtypes {args.dtypes!r}: a comma-separated list of bf16 and fp16")
    import torch
    lce = load_linear_cross_entropy(args.megatron)
    results = []
    for dtype in [{"bf16": torch.bfloat16, "fp16": torch.float16}[d] for d in names]:
        for problem in (SMALL if args.problems == "small" else PROBLEMS):
            for reduction in ("none", "mean", "sum"):
                for ignore_index in (-100, 4):
                    name = f"test_correctness[{ignore_index}-{reduction}-{problem}-{dtype}]"
                    start = time.perf_counter()
                    try:
                        r = test_correctness(lce, dtype, problem, reduction, ignore_index, args.seed)
                    except Exception as e:  # a crash is a failure of that test, as under pytest
                        r = {"pass": False, "failures": [f"{type(e).__name__}: {e}"], "problem": repr(problem),
                             "dtype": str(dtype), "reduction": reduction, "ignore_index": ignore_index}
                    r["seconds"] = time.perf_counter() - start
                    r["test"] = name
                    results.append(r)
                    detail = "; ".join(f"{k} {v['max_abs_diff']:.3g} ({v['worst_ratio_to_tolerance']:.2f} of tol)"
                                       for k, v in r.get("checks", {}).items())
                    print(f"{'PASSED' if r['pass'] else 'FAILED'} {name} {detail}", flush=True)
                    for f in r["failures"]:
                        print(f"    {f}", flush=True)
                    torch.cuda.empty_cache()
    passed = sum(r["pass"] for r in results)
    print(f"unit-test: {passed} passed, {len(results) - passed} failed (upstream test_correctness logic)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"megatron": common.checkout_revision(args.megatron), "results": results}, f, indent=1)
    return 0 if passed == len(results) else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "unit-test":
        return unit_test_main(argv[1:])
    if argv and argv[0] == "run":
        adapter = MegatronFusedLCE()
        adapter.prog = "megatron_fused_lce.py run"
        return common.main(adapter, argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("subcommand", choices=("run", "unit-test"), help="`run --help`, `unit-test --help` for their options")
    ap.parse_args(argv)
    return 2


if __name__ == "__main__":
    sys.exit(main())
