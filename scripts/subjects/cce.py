#!/usr/bin/env python3
"""cce.py — external subject: Apple's Cut Cross-Entropy,
cut_cross_entropy.linear_cross_entropy(e=hidden, c=weight, targets, ignore_index=, softcap=,
reduction=, filter_eps=, impl="cce") — read in cut-cross-entropy 25.1.1. Logits never leave SRAM;
the backward skips the blocks of the softmax below filter_eps ("gradient filtering").

    python3 scripts/subjects/cce.py D [--setting default|exact]

Settings: default = the library default filter_eps="high" (bf16: 2^-7/32, fp16: 2^-10/32, i.e.
torch.finfo(dtype).eps/32); exact = filter_eps=None, no gradient filtering. CCE has no label
smoothing, z-loss or class weights; its backward asserts bf16/fp16 embeddings; its forward GEMM
follows torch.get_float32_matmul_precision() for fp32 classifiers (set from the case's gemm)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_torch_common as common  # noqa: E402


class CutCrossEntropy(common.LossFunctionAdapter):
    name = "cce"
    description = __doc__
    settings = ("default", "exact")
    supported = common.Supported(
        dtypes=("bfloat16", "float16"), softcap=True, tf32=False,
        notes={"dtype": "CCE's backward asserts bf16/fp16 embeddings (cce_backward.py)",
               "smoothing": "CCE has no label smoothing parameter",
               "z_loss": "CCE has no z-loss parameter",
               "class_weights": "CCE has no class-weight parameter"})

    def prepare(self, args):
        from cut_cross_entropy import linear_cross_entropy
        self.lce = linear_cross_entropy

    def version(self, args):
        from importlib.metadata import version
        return f"cut-cross-entropy {version('cut-cross-entropy')}"

    def call(self, case, t, args, h, w, reduction):
        return self.lce(h, w, t.labels, ignore_index=case.ignore_index,
                        softcap=float(case.softcap) if case.softcap else None, reduction=reduction,
                        filter_eps=None if args.setting == "exact" else "high", impl="cce")


if __name__ == "__main__":
    sys.exit(common.main(CutCrossEntropy()))
