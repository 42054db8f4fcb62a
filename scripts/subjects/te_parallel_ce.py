#!/usr/bin/env python3
"""te_parallel_ce.py — external subject: TransformerEngine's cross-entropy,
transformer_engine.pytorch.cross_entropy.parallel_cross_entropy(inp, target, label_smoothing,
reduce_loss, dist_process_group=None, ignore_idx) at tensor-parallel size 1, on logits materialized
by F.linear in the input dtype (as an output layer does; TE's Triton kernels upcast to fp32 and keep
the logits' gradient in fp32 until autograd casts it to the logits' dtype). Read in
transformer_engine 2.18.0: a two-pass online softmax per row (max and sum, then the gradient
p - e/V, target -(1 - e), divided by the non-ignored count when reduce_loss), then the per-token or
scalar grad_output multiplied in backward.

Reductions: mean is TE's own (reduce_loss=True: the sum over non-ignored tokens divided by their
count, clamped to at least 1, so an all-ignored batch gives 0); none is its per-token loss (0 on
ignored tokens); sum is that per-token loss summed in torch, as a training loop does. Label
smoothing is PyTorch's e (the Megatron form is run with e = eps V / (V - 1)).

Only three files of TE are imported, from the folder --te names (default .subjects/transformer-engine):
pytorch/cross_entropy.py, pytorch/triton/cross_entropy.py and common/triton/cross_entropy.py, with
transformer_engine, .pytorch, .pytorch.triton, .common and .common.triton as empty packages (their
__init__ files load the compiled library and the torch extension, which this path does not need).
2.18.0 is the newest release where that works: from 2.19 on, pytorch/cross_entropy.py imports
transformer_engine.pytorch.jit, whose imports reach the compiled transformer_engine_torch (an sdist
that must be built against the machine's torch). Needs torch and triton. Recreate the folder, from
the repository root, with:
    pip download --no-deps transformer-engine==2.18.0 -d /tmp/te-wheel
    unzip -o /tmp/te-wheel/transformer_engine-2.18.0-py3-none-any.whl \\
      'transformer_engine/pytorch/cross_entropy.py' 'transformer_engine/pytorch/triton/cross_entropy.py' \\
      'transformer_engine/common/triton/cross_entropy.py' 'transformer_engine-2.18.0.dist-info/*' \\
      -d .subjects/transformer-engine

    python3 scripts/subjects/te_parallel_ce.py [--te PATH] D [--tf32 case|on|off] [--case ID]"""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lce_torch_common as common  # noqa: E402

DEFAULT_TE = os.path.join(os.path.dirname(os.path.dirname(HERE)), ".subjects", "transformer-engine")
LIGHT = ("transformer_engine", "transformer_engine.pytorch", "transformer_engine.pytorch.triton",
         "transformer_engine.common", "transformer_engine.common.triton")
MODULE = "transformer_engine.pytorch.cross_entropy"
FILES = ("pytorch/cross_entropy.py", "pytorch/triton/cross_entropy.py", "common/triton/cross_entropy.py")


def te_version(root):
    """The version in the wheel's dist-info that came with the files, else the tree's revision."""
    for meta in sorted(glob.glob(os.path.join(root, "transformer_engine-*.dist-info", "METADATA"))):
        with open(meta) as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    return common.checkout_revision(root)


class TEParallelCE(common.LossFunctionAdapter):
    name = "te-parallel-ce"
    description = __doc__
    supported = common.Supported(
        dtypes=("bfloat16", "float32"), smoothing=("pytorch", "megatron"),
        notes={"dtype": "parallel_cross_entropy documents BF16/FP32 inputs (2.19 on reject the others)",
               "z_loss": "parallel_cross_entropy has no z-loss",
               "softcap": "parallel_cross_entropy has no logit softcap",
               "class_weights": "parallel_cross_entropy has no class weights"})

    def add_args(self, ap):
        ap.add_argument("--te", default=DEFAULT_TE, metavar="PATH",
                        help="folder holding transformer_engine/{" + ",".join(FILES) + "} (default %(default)s)")

    def prepare(self, args):
        root = os.path.abspath(args.te)
        absent = [f for f in FILES if not os.path.isfile(os.path.join(root, "transformer_engine", f))]
        if absent:
            raise ImportError(f"TransformerEngine not found at {root} (no transformer_engine/{absent[0]}); "
                              "this script's --help says how to extract it from the 2.18.0 wheel")
        import torch.nn.functional as F
        self.F = F
        common.triton_interpreter_shims()
        self.pce = common.import_from_checkout(root, MODULE, LIGHT).parallel_cross_entropy

    def version(self, args):
        return f"transformer_engine {te_version(os.path.abspath(args.te))} (Triton kernels, no extension)"

    def call(self, case, t, args, h, w, reduction):
        return self.loss_from_logits(case, t, self.F.linear(h, w), reduction)  # logits in the input dtype

    def loss_from_logits(self, case, t, logits, reduction):
        """Everything after the LM-head GEMM (root_cause.py feeds it logits made another way)."""
        logits = logits.unsqueeze(0)  # [1, n, v]: TE wants (B, SQ, V)
        e = common.smoothing_param(case, self.supported)
        loss = self.pce(logits, t.labels.unsqueeze(0), e, reduction == "mean", None, case.ignore_index)
        if reduction == "mean":
            return loss.reshape(1)
        tok = loss.reshape(case.n)
        return tok if reduction == "none" else tok.sum()


if __name__ == "__main__":
    sys.exit(common.main(TEParallelCE()))
