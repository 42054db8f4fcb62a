#!/usr/bin/env python3
"""megatron_vocab_parallel.py — external subject: Megatron-core's unfused loss at tensor-parallel
size 1, megatron.core.tensor_parallel.cross_entropy.vocab_parallel_cross_entropy(logits, target,
label_smoothing) on logits materialized by F.linear in the input dtype (as Megatron's output layer
does; the function upcasts to fp32 itself), imported from the Megatron-LM checkout given with
--megatron (only that module and what it imports: megatron/__init__.py, megatron/core/__init__.py and
megatron/core/tensor_parallel/__init__.py are not run). torch.distributed is initialized in this
process with world size 1 (nccl on a GPU, gloo on the CPU) and parallel_state with TP 1.

The function has no ignore_index: as Megatron's training loop does, the per-token losses are
multiplied by the mask of valid tokens, summed, and for mean divided by their count (0/0 = NaN
when none is valid, as there); ignored labels (outside [0, V)) are masked inside the function, so
their gradient rows are exactly 0 after the mask. Its label_smoothing is Megatron's alpha
(e = alpha V / (V - 1)); the PyTorch form is run with alpha = e (V - 1) / V.

    python3 scripts/subjects/megatron_vocab_parallel.py --megatron PATH D"""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_torch_common as common  # noqa: E402

LIGHT = ("megatron", "megatron.core", "megatron.core.tensor_parallel")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_single_process(device):
    """torch.distributed with one rank, unless the caller already made a group."""
    import torch
    import torch.distributed as dist
    if dist.is_initialized():
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    cuda = str(device).startswith("cuda")
    if cuda:
        index = torch.device(device).index  # "cuda" alone names the current device
        torch.cuda.set_device(index if index is not None else torch.cuda.current_device())
    print(f"+ torch.distributed.init_process_group(backend={'nccl' if cuda else 'gloo'!r}, world_size=1, rank=0)", flush=True)
    dist.init_process_group(backend="nccl" if cuda else "gloo", world_size=1, rank=0)


class MegatronVocabParallel(common.LossFunctionAdapter):
    name = "megatron-vocab-parallel"
    description = __doc__
    supported = common.Supported(
        smoothing=("pytorch", "megatron"), smoothing_param="megatron", max_smoothing=0.999999,
        notes={"z_loss": "vocab_parallel_cross_entropy has no z-loss",
               "softcap": "vocab_parallel_cross_entropy has no logit softcap",
               "class_weights": "vocab_parallel_cross_entropy has no class weights"})

    def add_args(self, ap):
        ap.add_argument("--megatron", required=True, metavar="PATH",
                        help="Megatron-LM checkout (the directory holding megatron/)")

    def prepare(self, args):
        import torch.nn.functional as F
        self.F = F
        init_single_process(args.device)
        ps = common.import_from_checkout(args.megatron, "megatron.core.parallel_state", LIGHT)
        if not ps.model_parallel_is_initialized():
            print("+ megatron.core.parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)", flush=True)
            ps.initialize_model_parallel(tensor_model_parallel_size=1)
        ce = common.import_from_checkout(args.megatron, "megatron.core.tensor_parallel.cross_entropy", LIGHT)
        self.vpce = ce.vocab_parallel_cross_entropy
        self.where = ce.__file__

    def version(self, args):
        return f"Megatron-LM {common.checkout_revision(args.megatron)}"

    def call(self, case, t, args, h, w, reduction):
        logits = self.F.linear(h, w)  # [n, v] in the input dtype, as Megatron's output layer
        return self.loss_from_logits(case, t, logits, reduction)

    def loss_from_logits(self, case, t, logits, reduction):
        """Everything after the LM-head GEMM (root_cause.py feeds it logits made another way)."""
        alpha = common.smoothing_param(case, self.supported)
        tok = self.vpce(logits.unsqueeze(1), t.labels.unsqueeze(1), alpha).squeeze(1)
        mask = t.valid.float()
        tok = tok * mask
        if reduction == "none":
            return tok
        total = tok.sum()
        return total if reduction == "sum" else total / mask.sum()


if __name__ == "__main__":
    sys.exit(common.main(MegatronVocabParallel()))
