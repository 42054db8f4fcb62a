#!/usr/bin/env python3
"""reference_runner.py — an external subject without dependencies: the whole FLCE math of
reference/case/lce_case.h in float64 on the CPU (standard library only, so it runs in CI), over every case
of an exported directory, outputs rounded once to their formats. It exists to test the exchange path
end to end: `lcecheck judge` must pass it, and must fail its seeded-bug variant.

    python3 scripts/subjects/reference_runner.py D                          # every case of D/manifest.json
    python3 scripts/subjects/reference_runner.py --bug bf16-dhidden-accum D  # Megatron-LM PR #2739's bug 2

Accuracy: dot products are math.fsum of exact double products (correctly rounded), the softmax and
gradients are float64 with the cancelling quantities computed stably (1 - p_y from the other
probabilities, lse - z_y as log1p), so each output is within a few double ulps before its single
rounding to fp32 / the dtype: far below any bound the judge applies to a real kernel.
--bug bf16-dhidden-accum accumulates d_hidden across chunks of `vocab_chunk` vocab rows with the
running sum rounded to the dtype after every chunk, as Megatron-LM did before PR #2739."""
import argparse
import math
import operator
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lce_exchange as lx  # noqa: E402

BUGS = ("bf16-dhidden-accum",)
_mul = operator.mul
_fsum = math.fsum


def dot(a, b):
    return _fsum(map(_mul, a, b))


def _log(msg):
    print(msg, flush=True)


class Inputs:
    """The inputs the math reads, as doubles (tf32-rounded hidden and W with gemm tf32)."""

    def __init__(self, case):
        c = case
        n, h, v, vp = c.n, c.h, c.v, c.vp
        hidden = c.input_values("hidden")
        w_all = c.input_values(c.output_weight)
        if c.gemm == "tf32":
            hidden = [lx.round_tf32(x) for x in hidden]
            w_all = [lx.round_tf32(x) for x in w_all]
        self.hidden = [hidden[i * h:(i + 1) * h] for i in range(n)]
        self.w = [w_all[j * h:(j + 1) * h] for j in range(v)]  # real rows only: padding never enters
        self.labels = c.input_values("labels")
        self.grad_output = c.input_values("grad_output")
        self.class_weight = c.input_values("class_weight") if c.class_weights else [1.0] * v
        self.priors = {"grad_embedding": c.input_values("grad_embedding_prior")}
        if not c.tied:
            self.priors["grad_weight"] = c.input_values("grad_weight_prior")
        for name, want in (("labels", n), ("grad_output", n if c.reduction == "none" else 1)):
            if len(getattr(self, name)) != want:
                raise lx.ExchangeError(f"{case.path}: {name} holds {len(getattr(self, name))} values, want {want}")
        for y in self.labels:
            if y != c.ignore_index and not 0 <= y < v:
                raise lx.ExchangeError(f"{case.path}: label {y} outside [0, {v}) and not ignore_index")
        finite = math.isfinite
        self.bad_h = [not all(map(finite, row)) for row in self.hidden]
        self.bad_w = not all(all(map(finite, row)) for row in self.w)
        self.vp = vp


def token_forward(c, inp, row, y, e, lam):
    """lse, loss (None for an ignored token), p, 1 - p_y, z and the softcap factors of one token."""
    v = c.v
    s = [dot(row, wr) for wr in inp.w]
    cap = float(c.softcap)
    if cap > 0:
        z = [cap * math.tanh(x / cap) for x in s]
        f = [0.0 if abs(x / cap) > 350.0 else 1.0 / math.cosh(x / cap) ** 2 for x in s]  # sech^2, no cancellation
    else:
        z, f = s, None
    m = max(z)
    t = [math.exp(x - m) for x in z]
    total = _fsum(t)
    lse = m + math.log(total)
    p = [x / total for x in t]
    if y is None:
        return lse, None, p, None, z, f
    rest = _fsum(t[:y] + t[y + 1:])  # sum of the other exponentials: 1 - p_y without cancellation
    ce = math.log1p(rest / t[y]) if t[y] >= 2.0 ** -64 else lse - z[y]
    w = inp.class_weight
    loss = (1.0 - e) * w[y] * ce + lam * lse * lse
    if e:
        loss += (e / v) * _fsum(wv * (lse - zv) for wv, zv in zip(w, z))
    return lse, loss, p, rest / total, z, f


def token_dz(c, inp, p, one_minus_py, y, lse, g, e, lam, f):
    """ds[v] = dz[v] * softcap factor, lce_case.h's formula with the label term kept stable."""
    v, w = c.v, inp.class_weight
    sw_all = _fsum(w) if e else 0.0
    smooth = (e / v) * sw_all + 2.0 * lam * lse  # the part of K that is not (1 - e) w_y
    k = (1.0 - e) * w[y] + smooth
    ds = [g * (pv * k - (e / v) * wv) for pv, wv in zip(p, w)]
    ds[y] = g * (-(1.0 - e) * w[y] * one_minus_py + p[y] * smooth - (e / v) * w[y])
    if f is not None:
        ds = [a * b for a, b in zip(ds, f)]
    return ds


def d_hidden_row(c, w_cols, ds, bug):
    """d_hidden[n, :] = ds . W; with the bug, per chunk of vocab_chunk rows with the running sum
    rounded to the dtype after each chunk (Megatron-LM before PR #2739)."""
    if bug != "bf16-dhidden-accum":
        return [dot(ds, col) for col in w_cols]
    step, out = max(1, c.vocab_chunk), []
    for col in w_cols:
        acc = 0.0
        for lo in range(0, c.v, step):
            acc = lx.round_to_format(acc + dot(ds[lo:lo + step], col[lo:lo + step]), c.dtype)
        out.append(acc)
    return out


def flce_reference(c, inp, bug=None):
    """Every output of the case as float64 lists (before rounding to their formats)."""
    n, h, v = c.n, c.h, c.v
    e, lam = c.smoothing, float(c.z_loss)
    valid = [y != c.ignore_index for y in inp.labels]
    sw = _fsum(inp.class_weight[y] for y, ok in zip(inp.labels, valid) if ok)
    w_cols = [list(col) for col in zip(*inp.w)]  # [h][v]
    lse_out, loss_token, d_hidden = [0.0] * n, [0.0] * n, [0.0] * (n * h)
    active_ds, active_rows, poisoned_grad = [], [], False
    for i in range(n):
        y = inp.labels[i] if valid[i] else None
        if inp.bad_w or inp.bad_h[i]:  # lce_oracle.c: NaN logits; an ignored token stays exactly 0
            lse_out[i] = math.nan
            if valid[i]:
                loss_token[i] = math.nan
                d_hidden[i * h:(i + 1) * h] = [math.nan] * h
                poisoned_grad = True
            continue
        lse, loss, p, one_minus_py, z, f = token_forward(c, inp, inp.hidden[i], y, e, lam)
        lse_out[i] = lse
        if y is None:
            continue
        loss_token[i] = loss
        if c.reduction == "mean":
            g = inp.grad_output[0] / sw if sw != 0 else 0.0
        else:
            g = inp.grad_output[i if c.reduction == "none" else 0]
        if g == 0.0:
            continue
        ds = token_dz(c, inp, p, one_minus_py, y, lse, g, e, lam, f)
        d_hidden[i * h:(i + 1) * h] = d_hidden_row(c, w_cols, ds, bug)
        active_ds.append(ds)
        active_rows.append(inp.hidden[i])
    if poisoned_grad:
        loss = math.nan
    elif c.reduction == "mean":
        loss = _fsum(loss_token) / sw if sw != 0 else 0.0
    else:
        loss = _fsum(loss_token)
    grads = {name: list(prior) for name, prior in inp.priors.items()}
    target = grads[c.output_weight_grad]
    ds_cols = [list(col) for col in zip(*active_ds)] if active_ds else [[] for _ in range(v)]
    h_cols = [list(col) for col in zip(*active_rows)] if active_rows else [[] for _ in range(h)]
    for j in range(v):  # rows [v, vp) keep their prior exactly
        for k in range(h):
            if poisoned_grad:
                target[j * h + k] = math.nan
            elif active_ds:
                target[j * h + k] = _fsum([target[j * h + k]] + list(map(_mul, ds_cols[j], h_cols[k])))
    out = {"loss": [loss], "loss_token": loss_token, "lse": lse_out, "d_hidden": d_hidden}
    out.update(grads)
    return out


def run_case(c, bug):
    start = time.perf_counter()
    out = flce_reference(c, Inputs(c), bug)
    seconds = time.perf_counter() - start
    for name, values in out.items():
        c.write_output(name, values)  # one rounding: fp32, or the dtype (to nearest even)
    c.write_meta({
        "subject": "reference-fp64" + (f"-{bug}" if bug else ""),
        "version": f"lce_exchange {lx.VERSION}, python {platform.python_version()}",
        "setting": bug or "default", "device": f"cpu ({platform.machine()})", "seconds": seconds,
        "peak_extra_bytes": None, "missing": [],
    })
    return seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export_dir", help="a directory written by `lcecheck export` (holds manifest.json)")
    ap.add_argument("--bug", choices=BUGS, help="compute a known bug instead of the exact math")
    ap.add_argument("--case", action="append", metavar="ID", help="run only this case (repeatable)")
    args = ap.parse_args(argv)
    try:
        cases = lx.load_manifest(args.export_dir)
    except lx.ExchangeError as e:
        print(f"reference_runner: {e}", file=sys.stderr)
        return 2
    if args.case:
        unknown = set(args.case) - {cid for cid, _ in cases}
        if unknown:
            print(f"reference_runner: no such case in the manifest: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        cases = [(cid, d) for cid, d in cases if cid in args.case]
    _log(f"reference_runner: {len(cases)} case(s) in {args.export_dir}" + (f", bug {args.bug}" if args.bug else ""))
    for k, (cid, case_dir) in enumerate(cases, 1):
        try:
            c = lx.Case(case_dir)
            c.clear_out()
            seconds = run_case(c, args.bug)
        except (lx.ExchangeError, OSError) as e:
            print(f"reference_runner: case {cid}: {e}", file=sys.stderr)
            return 1
        _log(f"[{k}/{len(cases)}] {cid}: written in {seconds:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
