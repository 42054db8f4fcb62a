#!/usr/bin/env python3
"""liger.py — external subject: Liger-Kernel's fused linear cross-entropy,
liger_kernel.transformers.LigerFusedLinearCrossEntropyLoss(ce_weight=, ignore_index=,
lse_square_scale= (z-loss lambda), label_smoothing= (PyTorch's e), reduction=, softcap=,
accum_dtype=)(weight, hidden, labels) — read in liger-kernel 0.8.5. It chunks the tokens, runs the
CE kernel on each chunk's materialized logits and accumulates the weight gradient across token
chunks in accum_dtype (None: the parameter dtype, i.e. bf16 for bf16 weights).

    python3 scripts/subjects/liger.py D [--setting default|fp32-accum]

Settings: default = accum_dtype None; fp32-accum = accum_dtype=torch.float32.

On a machine without a GPU it runs under Triton's interpreter (TRITON_INTERPRET=1 --device cpu), with
shims that change no arithmetic Liger asks for, only what the interpreter lacks or gets wrong: bf16
stores round to nearest even and float arguments are fp32 scalars, as compiled
(lce_torch_common.triton_interpreter_shims), and the libdevice tanh, which the interpreter does not
evaluate, is numpy's (IEEE: tanh(+-Inf) = +-1, NaN stays NaN; interpreted_tanh)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_torch_common as common  # noqa: E402


class Liger(common.LossFunctionAdapter):
    name = "liger"
    description = __doc__
    settings = ("default", "fp32-accum")
    supported = common.Supported(
        smoothing=("pytorch", "megatron"), z_loss=True, softcap=True, class_weights=True,
        notes={"dtype": "Liger's Triton CE kernel is not asked for other dtypes"})

    def extra_skip(self, case, args):
        if case.z_loss and case.class_weights:
            # liger_kernel/ops/cross_entropy.py: "TODO: Implement weighted z_loss. Currently, z_loss
            # is not scaled by weight" — its mean divides the z-loss by the token count, not by the
            # sum of class weights: a different definition, not a numerical error.
            return "z-loss with class weights: Liger does not weight the z-loss (documented TODO), lce_case.h does"
        return None

    def prepare(self, args):
        import torch
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
        self.torch, self.loss_cls = torch, LigerFusedLinearCrossEntropyLoss
        if os.environ.get("TRITON_INTERPRET") == "1":
            common.triton_interpreter_shims()
            interpreted_tanh()

    def version(self, args):
        from importlib.metadata import version
        return f"liger-kernel {version('liger-kernel')}"

    def call(self, case, t, args, h, w, reduction):
        fn = self.loss_cls(
            ce_weight=t.class_weight, ignore_index=case.ignore_index, lse_square_scale=float(case.z_loss),
            label_smoothing=common.smoothing_param(case, self.supported), reduction=reduction,
            softcap=float(case.softcap) if case.softcap else None,
            accum_dtype=self.torch.float32 if args.setting == "fp32-accum" else None)
        return fn(w, h, t.labels)


def interpreted_tanh():
    """liger_kernel.ops.cross_entropy's tanh (libdevice, which Triton's interpreter leaves unevaluated)
    replaced by numpy's on the interpreter's blocks."""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle
    import liger_kernel.ops.cross_entropy as ce

    def tanh(x, _semantic=None):
        return tl.core.tensor(TensorHandle(np.tanh(x.handle.data), x.handle.dtype.scalar), x.type)

    ce.tanh = tanh


if __name__ == "__main__":
    sys.exit(common.main(Liger()))
