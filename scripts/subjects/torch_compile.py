#!/usr/bin/env python3
"""torch_compile.py — external subject: torch.compile of torch_eager.py's function (Inductor fuses
the softmax epilogue; the LM-head GEMM stays a cuBLAS call or a Triton template, its choice), forward
and backward compiled (AOTAutograd). With --dynamic false (the default here) every new shape or option
recompiles, static kernels as for a fixed training shape; --dynamic auto is torch.compile's own
default (dynamic=None): after a shape's recompilation the changed sizes become symbolic, so later
shapes reuse one dynamic-shape graph (options still recompile). The untimed --warmup run pays for
compilation, the timed run does not.

    python3 scripts/subjects/torch_compile.py D [--mode default|max-autotune] [--dynamic false|auto] [--tf32 case|on|off]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_torch_common as common  # noqa: E402
from torch_eager import TorchEager, flce_torch  # noqa: E402


class TorchCompile(TorchEager):
    name = "torch-compile"
    description = __doc__

    def add_args(self, ap):
        ap.add_argument("--mode", choices=("default", "max-autotune", "max-autotune-no-cudagraphs"),
                        default="default", help="torch.compile mode (default %(default)s)")
        ap.add_argument("--dynamic", choices=("false", "auto"), default="false",
                        help="torch.compile's dynamic=: False, or None (its own default, automatic dynamic shapes); "
                             "default %(default)s")

    def prepare(self, args):
        import torch
        import torch._dynamo
        torch._dynamo.config.cache_size_limit = 1024  # one compilation per case shape and option set
        self.fn = torch.compile(flce_torch, mode=args.mode, dynamic=None if args.dynamic == "auto" else False)

    def setting(self, args):
        return f"mode-{args.mode}" + ("+dynamic-auto" if args.dynamic == "auto" else "")


if __name__ == "__main__":
    sys.exit(common.main(TorchCompile()))
