#!/usr/bin/env python3
"""torch_eager.py — external subject: plain PyTorch, unfused. logits = F.linear(hidden, W) in the
input dtype (cuBLAS, fp32 accumulation; TF32 for fp32 inputs when the case or --tf32 says so), then
.float() as training code does, softcap c*tanh(z/c) and z-loss lambda*lse^2 written out in torch
(lce_case.h's math), F.cross_entropy with its native weight=, ignore_index=, label_smoothing= and
reduction= (the Megatron smoothing form is PyTorch's with e = eps V/(V-1)). lse is torch.logsumexp of
the fp32 logits. Gradients by autograd.

    python3 scripts/subjects/torch_eager.py D [--tf32 case|on|off] [--case ID]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_torch_common as common  # noqa: E402


def flce_torch(case, hidden, w, labels, class_weight, reduction):
    """The unfused forward: (loss as F.cross_entropy returns it for `reduction`, lse [n])."""
    import torch.nn.functional as F
    return loss_from_logits(case, F.linear(hidden, w).float(), labels, class_weight, reduction)


def loss_from_logits(case, z, labels, class_weight, reduction):
    """Everything after the LM-head GEMM, on the fp32 logits z [n, v] (root_cause.py feeds it
    logits made another way)."""
    import torch
    import torch.nn.functional as F
    if case.softcap:
        z = case.softcap * torch.tanh(z / case.softcap)
    lse = torch.logsumexp(z, dim=-1)
    kw = dict(weight=class_weight, ignore_index=case.ignore_index, label_smoothing=case.smoothing)
    if not case.z_loss:
        return F.cross_entropy(z, labels, reduction=reduction, **kw), lse
    valid = labels != case.ignore_index
    tok = F.cross_entropy(z, labels, reduction="none", **kw) + case.z_loss * lse.square() * valid
    if reduction == "none":
        return tok, lse
    if reduction == "sum":
        return tok.sum(), lse
    w_n = valid.float() if class_weight is None else class_weight[labels.clamp(0, case.v - 1)] * valid
    return tok.sum() / w_n.sum(), lse  # as F.cross_entropy's mean: 0/0 when no token is valid


class TorchEager(common.LossFunctionAdapter):
    name = "torch-eager"
    description = __doc__
    supported = common.Supported(smoothing=("pytorch", "megatron"), z_loss=True, softcap=True, class_weights=True)

    def prepare(self, args):
        common.torch_module()  # no torch: the runner's "cannot load the library", exit 2
        self.fn = flce_torch

    def version(self, args):
        import torch
        return f"torch {torch.__version__}"

    def call(self, case, t, args, h, w, reduction):
        return self.fn(case, h, w, t.labels, t.class_weight, reduction)

if __name__ == "__main__":
    sys.exit(common.main(TorchEager()))
