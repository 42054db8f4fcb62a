#!/usr/bin/env python3
"""plot_errors.py — pictures of lcecheck's measurements: errors and bias against vocab chunk count and
against the GEMM reduction length, each with the golden bound drawn over it, and the field's kernels at a
production shape.

    scripts/plot_errors.py collect [--lcecheck build/lcecheck] [--oracle fast] [--data DIR] [--check]
        runs the sweeps below with `lcecheck check --json` (bounds included) and writes DIR/sweeps.json;
        --check writes nothing and compares the run with DIR/sweeps.json instead (exit 1 naming every value
        that differs: the committed figures' data, or a golden bound drawn in them, is stale)
    scripts/plot_errors.py render [--data DIR] [--out DIR] [--only NAME,...] [--json]
        PNGs from committed data: chunks.png, reduction.png (DIR/sweeps.json), external.png
        (conformance/external-production.json), external-262144.png (conformance/external-production-262144.json:
        the golden bounds drawn over the bars), external-h200-262144.png and external-h200-152064.png
        (conformance/external-production-h200.json: judged with the reference's magnitudes),
        external-h200-152064-todays.png (conformance/external-production-h200-todays-golden.json),
        external-h100-152064.png (conformance/external-production-h100-152064.json), bench-h100.png
        (conformance/external-bench-h100-quiet.json: each kernel's time over its floor against its extra memory, the
        target region shaded), bias-scale.png (conformance/external-scale-experiment.json),
        bias-nvalid.png (conformance/external-bias.json), bias-nvalid-h100.png (conformance/external-bias-h100.json:
        fused-sm90 beside fused-cuda and the peers),
        converge.png (DIR/converge-*.json: lcecheck converge --json of fused-host and the two seed-bug mutants),
        converge-sm90.png (DIR/sm_90/converge-*.json: fused-cuda and its two mutants at 64 x 4096 x 128256)
    scripts/plot_errors.py check FILE.json [--out FILE.png] [--metric relerr]
        any `lcecheck check|judge --json` output: each case's metric against its bound, per output
    scripts/plot_errors.py bias FILE.json [--out FILE.png]
        the bias of d_hidden and d_weight against n_valid per subject, with the roundings of the folded
        mean factor drawn over them: the --json of scripts/subjects/bias_table.py (gpu_external.sh's bias stage)

Defaults: --data golden/plots/data, --out golden/plots. Sweeps (bf16, untied, mean, 10% ignored):
  chunks     N 64, H 64, V 4096 in 1 … 128 vocab chunks: fused-host and mutant/bf16-dhidden-accum
  reduction  N 16, H 64, V 512 … 32768 in one chunk (K = V for d_hidden): fused-host, fused-host-sm90
Exit status: 0 done, 1 a run or a render failed, 2 bad usage or unreadable data."""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "golden", "plots", "data")
OUT = os.path.join(ROOT, "golden", "plots")
OUTPUTS = ("d_hidden", "d_weight")


def chunk_cases():
    v = 4096
    return [(f"bf16.untied.tp1.n64.h64.v{v}.vp{v}.vc{v // k}.mean.ign10.fresh.normal.s7", k)
            for k in (1, 2, 4, 8, 16, 32, 64, 128)]


def reduction_cases():
    return [(f"bf16.untied.tp1.n16.h64.v{v}.vp{v}.vc{v}.mean.ign10.fresh.normal.s7", v)
            for v in (512, 1024, 2048, 4096, 8192, 16384, 32768)]


SWEEPS = {
    "chunks": {"subjects": ("fused-host", "mutant/bf16-dhidden-accum"), "cases": chunk_cases, "x": "vocab chunks"},
    "reduction": {"subjects": ("fused-host", "fused-host-sm90"), "cases": reduction_cases, "x": "V (= K of d_hidden)"},
}


class UsageError(Exception):
    pass


def run_check(lcecheck, subject, case, oracle):
    """One `lcecheck check --json` run: the case's record (status, outputs with metrics and bounds)."""
    cmd = [lcecheck, "check", "--subject", subject, "--case", case, "--oracle", oracle, "--json", "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        d = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}, no JSON ({p.stderr.strip()[-300:]})")
    if not d.get("cases"):
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}, no case ({d.get('error', p.stderr.strip()[-300:])})")
    c = d["cases"][0]
    keep = ("relerr", "bias", "maxscaled", "ulpfrac", "bound", "inner", "cond", "pass")
    return {"status": c["status"], "golden": os.path.relpath(d.get("golden") or "", ROOT),
            "outputs": {k: {f: c["outputs"][k].get(f) for f in keep} for k in OUTPUTS if k in c["outputs"]}}


def collect(args):
    lcecheck = args.lcecheck
    if not os.access(lcecheck, os.X_OK):
        raise UsageError(f"{lcecheck}: not an executable (build first: bash scripts/setup.sh)")
    runs = [(name, s, case, x) for name, sw in SWEEPS.items() for s in sw["subjects"] for case, x in sw["cases"]()]
    out = {"oracle": args.oracle, "generator": "scripts/plot_errors.py collect --oracle " + args.oracle, "sweeps": {}}
    t0 = time.time()
    for i, (name, s, case, x) in enumerate(runs, 1):
        rec = run_check(lcecheck, s, case, args.oracle)
        rec.update(subject=s, case=case, x=x)
        out["sweeps"].setdefault(name, []).append(rec)
        left = (time.time() - t0) / i * (len(runs) - i)
        print(f"[{i}/{len(runs)}] {name} {s} {x}: {rec['status']} (about {left:.0f} s left)", file=sys.stderr, flush=True)
    path = os.path.join(args.data, "sweeps.json")
    if args.check:
        diffs = list(differences(load(path), out))
        for d in diffs[:20]:
            print(f"differs: {d}", file=sys.stderr)
        if diffs:
            raise RuntimeError(f"{os.path.relpath(path)}: {len(diffs)} values differ from a fresh collect "
                               f"(rerun `scripts/plot_errors.py collect` and `render --only chunks,reduction`)")
        print(f"{os.path.relpath(path)} matches a fresh collect ({len(runs)} runs in {time.time() - t0:.0f} s)")
        return 0
    os.makedirs(args.data, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    print(f"wrote {os.path.relpath(path)} ({len(runs)} runs in {time.time() - t0:.0f} s)")
    return 0


def differences(old, new, where=""):
    """Every place where two JSON values differ, as 'path: old -> new' (a run named by its sweep,
    subject and x rather than its index); numbers within 1e-6 of each other, relatively, are the same
    (another libm's last-bit exp moves a printed digit, never a bound by that much)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new)):
            if k not in old or k not in new:
                yield f"{where}/{k}: {'absent' if k not in old else old[k]!r} -> {'absent' if k not in new else new[k]!r}"
            else:
                yield from differences(old[k], new[k], f"{where}/{k}")
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (o, n) in enumerate(zip(old, new)):
            name = f"{o.get('subject')} {o.get('x')}" if isinstance(o, dict) and "subject" in o else str(i)
            yield from differences(o, n, f"{where}[{name}]")
    elif (isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(old, bool)
          and not isinstance(new, bool) and abs(old - new) <= 1e-6 * max(abs(old), abs(new))):
        return
    elif old != new:
        yield f"{where}: {old!r} -> {new!r}"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: {e}")


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def sweep_figure(plt, recs, title, xlabel, logx, model=None):
    """Per output (columns): relerr and |bias| (top row) and maxscaled (bottom row) of each subject
    against x, each with its golden bound dashed; a red x where that output failed its golden."""
    fig, axes = plt.subplots(2, len(OUTPUTS), figsize=(11, 7), sharex=True)
    for col_i, out in enumerate(OUTPUTS):
        top, bottom = axes[0][col_i], axes[1][col_i]
        for i, s in enumerate(dict.fromkeys(r["subject"] for r in recs)):
            rs = sorted((r for r in recs if r["subject"] == s and out in r["outputs"]), key=lambda r: r["x"])
            xs = [r["x"] for r in rs]
            o = [r["outputs"][out] for r in rs]
            col = f"C{i}"
            top.plot(xs, [m["relerr"] for m in o], "o-", color=col, label=f"{s} relerr")
            top.plot(xs, [abs(m["bias"] or 0) for m in o], "s:", color=col, label=f"{s} |bias|")
            bottom.plot(xs, [m["maxscaled"] for m in o], "o-", color=col, label=f"{s} maxscaled")
            for ax, metric in ((top, "relerr"), (bottom, "maxscaled")):
                bounds = [(m["bound"] or {}).get(metric) for m in o]
                if any(b is not None for b in bounds):
                    ax.plot(xs, bounds, "--", color=col, alpha=0.6,
                            label=f"{metric} bound ({os.path.basename(rs[0]['golden'])})")
                failed = [(x, m[metric]) for x, m in zip(xs, o) if m.get("pass") is False]
                if failed:
                    ax.plot(*zip(*failed), "x", color="red", ms=10, label=f"{s}: {out} failed")
        for ax in (top, bottom):
            ax.set_yscale("log")
            if logx:
                ax.set_xscale("log", base=2)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, loc="best")
        if model is not None:
            xs = sorted({r["x"] for r in recs})
            top.plot(xs, [model[1](x) for x in xs], "k-.", lw=1, label=model[0])
            top.legend(fontsize=6, loc="best")
        top.set_title(out)
        bottom.set_xlabel(xlabel)
    axes[0][0].set_ylabel("relerr, |bias|")
    axes[1][0].set_ylabel("maxscaled")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def render_chunks(plt, data_dir):
    d = load(os.path.join(data_dir, "sweeps.json"))
    return sweep_figure(plt, d["sweeps"]["chunks"], "d_hidden and d_weight error vs vocab chunk count "
                        "(bf16, N 64, H 64, V 4096, mean; oracle " + d["oracle"] + ")", "vocab chunks", True)


def render_reduction(plt, data_dir):
    d = load(os.path.join(data_dir, "sweeps.json"))
    # The tensor-core truncation term of the GEMM model (README "Device arithmetic is not IEEE": relerr
    # 1.16e-9 K on Hopper's cuBLAS), which the sm_90 twin adds to fused-host's error: below the bf16
    # d_logits term until K ~ 10^6, which is why the two subjects' curves coincide at these V.
    return sweep_figure(plt, d["sweeps"]["reduction"], "error vs reduction length (bf16, N 16, H 64, one vocab "
                        "chunk, mean): IEEE fp32 GEMMs vs the sm_90 tensor-core model", "V", True,
                        model=("sm_90 truncation model 1.16e-9 K", lambda k: 1.16e-9 * k))


def external_figure(plt, rows_file, shape, bias_scale, case_part=None):
    """The field's kernels at one production shape: d_hidden and d_weight relerr and bias per subject (bias
    signed on a linear axis, or |bias| on a log axis), each row's verdict, and the golden bound where the rows
    carry it (a black tick: the bar must stay left of it). case_part: only the rows whose case id holds it
    (a rows file of several cases)."""
    rows = [r for r in load(os.path.join(ROOT, "conformance", rows_file)) if case_part is None or case_part in r["case"]]
    if not rows:
        raise UsageError(f"conformance/{rows_file}: no rows" + (f" of a case with {case_part}" if case_part else ""))
    rows = sorted(rows, key=lambda r: r["dh_relerr"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    names = [r["subject"] for r in rows]
    for ax, key in zip(axes, ("relerr", "bias")):
        y = range(len(rows))
        absolute = key == "relerr" or bias_scale == "log"
        for off, out, label in ((-0.2, "dh", "d_hidden"), (0.2, "dw", "d_weight")):
            vals = [r[out + "_" + key] for r in rows]
            ax.barh([i + off for i in y], [abs(v) if absolute and v is not None else v or 0 for v in vals],
                    height=0.4, label=label)
            ticks = [(i + off, r.get("bound", {}).get(label, {}).get(key)) for i, r in enumerate(rows)]
            ticks = [(i, b) for i, b in ticks if b]
            if ticks:
                ax.scatter([b for _, b in ticks], [i for i, _ in ticks], marker="|", s=160, color="k", zorder=3,
                           label="bound" if out == "dh" else None)
        ax.set_yticks(list(y), names, fontsize=8)
        ax.set_xscale("log" if absolute else "linear")
        ax.set_title(("|bias|" if key == "bias" and absolute else key) + f" at {shape}\n(bf16, mean, 5% ignored)",
                     fontsize=9)
        for i, r in enumerate(rows):
            ax.text(ax.get_xlim()[1], i, " " + r["status"].upper(), va="center", fontsize=7,
                    color="green" if r["status"] == "pass" else "red")
        ax.grid(True, axis="x", alpha=0.3)
    axes[0].legend(fontsize=8)
    bounded = any(r.get("bound") for r in rows)
    fig.suptitle("the field's FLCE kernels judged by lcecheck (fp64 GPU reference; conformance/EXTERNAL.md)" +
                 ("\nblack tick: the golden bound the row is judged by (its class's); a bar beyond it fails" if bounded
                  else ""), fontsize=10)
    fig.tight_layout()
    return fig


def render_external(plt, _data_dir):
    return external_figure(plt, "external-production.json", "8192 x 4096 x 128256", "linear")


def render_external_262144(plt, _data_dir):
    return external_figure(plt, "external-production-262144.json", "4096 x 4096 x 262144", "log")


def render_external_rows(rows_file, case_part, shape):
    """The rows of one case judged with the reference's error magnitudes (external-production-h200.json: two
    shapes; external-production-h100-152064.json), on a log axis."""
    return lambda plt, _data_dir: external_figure(plt, rows_file, shape, "log", case_part)


def render_bias_scale(plt, _data_dir):
    d = load(os.path.join(ROOT, "conformance", "external-scale-experiment.json"))
    rows = [r for r in d["rows"] if "skipped" not in r]
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    gos = list(dict.fromkeys(r["go"] for r in rows))
    fig, ax = plt.subplots(figsize=(9, 4.2))
    w = 0.8 / len(gos)
    for j, g in enumerate(gos):
        vals = [next((r["d_hidden"]["bias"] for r in rows if r["kernel"] == k and r["go"] == g), 0) for k in kernels]
        ax.bar([i + (j - (len(gos) - 1) / 2) * w for i in range(len(kernels))], vals, width=w,
               label="go drawn (bf16(go/n) +1.285e-3 off)" if g == "drawn" else "go' with bf16-exact go'/n")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(kernels)), kernels, fontsize=8, rotation=15)
    ax.set_ylabel("d_hidden bias")
    ax.set_title(f"d_hidden bias of bf16 FLCE kernels under mean reduction, n_valid {d['n_valid']}: "
                 "the rounding of the mean factor", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def bench_figure(plt, bench_file, target_ratio=1.15, target_gb=0.1):
    """`lcecheck bench --peers --json` rows: per shape, each subject's time over its own process's three-GEMM floor
    against its extra device memory (log), the issue's target region shaded (<= target_ratio x the floor within
    target_gb): where each kernel sits between speed and memory. Rows without a time or a memory are left out."""
    d = load(os.path.join(ROOT, "conformance", bench_file))
    rows = [r for r in d.get("rows", []) if r.get("role") == "subject" and r.get("status") == "ran"
            and r.get("ratio_to_floor") and r.get("extra_bytes")]
    if not rows:
        raise UsageError(f"conformance/{bench_file}: no subject row with a time and an extra memory")
    shapes = list(dict.fromkeys((r["n"], r["h"], r["v"]) for r in rows))
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4.6), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        here = [r for r in rows if (r["n"], r["h"], r["v"]) == shape]
        ax.fill_between([1e-4, target_gb], 1.0, target_ratio, color="green", alpha=0.18,
                        label=f"target: <= {target_ratio}x, <= {target_gb} GB")
        top = 2.0  # the region that matters; slower rows sit on the top edge as triangles, their ratio printed
        for k, r in enumerate(sorted(here, key=lambda r: r["ratio_to_floor"])):
            ours, gb, ratio = r["process"] == "lcecheck", r["extra_bytes"] / 1e9, r["ratio_to_floor"]
            y = min(ratio, top - 0.02)
            ax.scatter(gb, y, marker=("o" if ours else "s") if ratio < top else "^", color="C0" if ours else "C1",
                       zorder=3)
            ax.annotate(f"{r['subject']} {ratio:.2f}x", (gb, y), fontsize=7, textcoords="offset points",
                        xytext=(5, -10 if k % 2 else 3))
        ax.set_xscale("log")
        ax.set_xlim(1e-3, 100)
        ax.set_ylim(1.0, top)
        ax.set_xlabel("extra device memory, GB (log)")
        ax.set_ylabel("forward + backward / three-GEMM floor")
        ax.set_title(f"{shape[0]} x {shape[1]} x {shape[2]}", fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"speed against memory, bf16 mean, {d.get('device', 'GPU')}\n"
                 "(circles: lcecheck's kernels beside cuBLAS's floor; squares: the peers beside torch.matmul's)",
                 fontsize=9)
    fig.tight_layout()
    return fig


def converge_figure(plt, files, where):
    """Per subject of lcecheck converge --json files: the held-out loss of its run and the reference's, the
    parameter drift, and d_hidden's gradient relerr (where the seed bug shows), bounds drawn where judged."""
    if not files:
        raise UsageError(f"{where}: no converge-*.json (lcecheck converge --json > {where}/converge-NAME.json)")
    fig, (loss_ax, drift_ax, dh_ax) = plt.subplots(1, 3, figsize=(15, 4.2))
    for i, f in enumerate(files):
        d = load(f)
        for run in d["runs"]:
            ev = run["evals"]
            steps = [e["step"] for e in ev]
            tag = f"{d['subject']} ({run['embeddings']}: {'pass' if run['pass'] else 'FAIL'})"
            style = "-" if run["embeddings"] == "untied" else "--"
            if i == 0:
                loss_ax.plot(steps, [e["loss_ref"] for e in ev], style, color="k", lw=2, alpha=0.4,
                             label=f"reference run ({run['embeddings']})")
            loss_ax.plot(steps, [e["loss_subject"] for e in ev], style, color=f"C{i}", label=tag)
            drift_ax.plot(steps[1:], [e["drift"] for e in ev[1:]], style + "o", color=f"C{i}", label=tag)
            grad = [e for e in ev if "relerr_hidden" in e]
            dh_ax.plot([e["step"] for e in grad], [e["relerr_hidden"] for e in grad], style + "o", color=f"C{i}",
                       label=tag)
            for ax, metric in ((drift_ax, "drift"), (dh_ax, "relerr_hidden")):
                if run["metrics"][metric]["bound"] is not None and i == 0:
                    ax.axhline(run["metrics"][metric]["bound"], ls=style, color="k", alpha=0.4,
                               label=f"{metric} bound ({run['embeddings']})")
    loss_ax.set_ylabel("held-out loss")
    drift_ax.set_ylabel("drift |θ_subject − θ_ref| / |θ_ref − θ_0|")
    dh_ax.set_ylabel("d_hidden relerr against the reference's")
    for ax in (loss_ax, drift_ax, dh_ax):
        ax.set_xlabel("SGD step")
        ax.legend(fontsize=6)
        ax.grid(True, which="both", alpha=0.3)
    drift_ax.set_yscale("log")
    dh_ax.set_yscale("log")
    c = load(files[0])
    cfg = c["config"]
    fig.suptitle(f"lcecheck converge: a bigram LM trained with each subject's gradients vs the {c['oracle']} "
                 f"oracle's ({cfg['dtype']}, N {cfg['n']}, H {cfg['h']}, V {cfg['v']} in chunks of "
                 f"{cfg['vocab_chunk']}, lr {cfg['lr']:g}, seed {cfg['seed']})", fontsize=10)
    fig.tight_layout()
    return fig


def render_converge(plt, data_dir):
    """The small model of CI (golden/converge.bounds): fused-host and the two seed-bug mutants."""
    import glob
    return converge_figure(plt, sorted(glob.glob(os.path.join(data_dir, "converge-*.json"))), data_dir)


def render_converge_sm90(plt, data_dir):
    """The realistic head on the H200 (golden/sm_90/converge.bounds): fused-cuda and its two mutants."""
    import glob
    where = os.path.join(data_dir, "sm_90")
    return converge_figure(plt, sorted(glob.glob(os.path.join(where, "converge-*.json"))), where)




def render(args):
    names = [n for n in (args.only.split(",") if args.only else FIGURES) if n]
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise UsageError(f"--only: unknown figure {', '.join(unknown)} (known: {', '.join(FIGURES)})")
    plt = pyplot()
    os.makedirs(args.out, exist_ok=True)
    written = []
    for n in names:
        fig = FIGURES[n](plt, args.data)
        path = os.path.join(args.out, n + ".png")
        fig.savefig(path + ".tmp.png", dpi=90)
        os.replace(path + ".tmp.png", path)
        plt.close(fig)
        written.append({"figure": n, "path": path, "bytes": os.path.getsize(path)})
        print(f"{n:12} {path} ({os.path.getsize(path)} bytes)", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps({"verb": "render", "figures": written}))
    return 0


def check_plot(args):
    d = load(args.file)
    cases = d.get("cases")
    if not isinstance(cases, list) or not cases:
        raise UsageError(f"{args.file}: no 'cases' list (expected lcecheck check/judge/measure --json output)")
    plt = pyplot()
    outs = sorted({k for c in cases for k in c.get("outputs", {})})
    fig, axes = plt.subplots(1, len(outs), figsize=(3.2 * len(outs), 3.6), squeeze=False)
    for ax, out in zip(axes[0], outs):
        pts = [(c["outputs"][out].get(args.metric), (c["outputs"][out].get("bound") or {}).get(args.metric), c["status"])
               for c in cases if out in c.get("outputs", {})]
        pts = [(m, b, s) for m, b, s in pts if m and b]
        ax.scatter([b for _, b, _ in pts], [m for m, _, _ in pts], s=10,
                   c=["red" if s == "fail" else "C0" for _, _, s in pts])
        if pts:
            lo = min(min(m for m, _, _ in pts), min(b for _, b, _ in pts))
            hi = max(max(m for m, _, _ in pts), max(b for _, b, _ in pts))
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_title(f"{out} ({len(pts)} cases)", fontsize=9)
        ax.set_xlabel(f"bound ({args.metric})")
    axes[0][0].set_ylabel(f"measured {args.metric} (above the line: fails)")
    fig.suptitle(f"{d.get('subject', '?')}: measured vs bound, {os.path.basename(args.file)}", fontsize=10)
    fig.tight_layout()
    out = args.out or os.path.splitext(args.file)[0] + f"-{args.metric}.png"
    fig.savefig(out, dpi=90)
    print(json.dumps({"verb": "check", "path": out}) if args.json else f"wrote {out}")
    return 0


def bias_figure(plt, d, source):
    """Per output, each subject's bias at every n_valid of the run (a line through its points), and the
    relative rounding of go/n and of 1/n in bf16 at each n_valid (what a kernel folding that factor into
    its bf16 d_logits carries) as markers. d: bias_table.py's --json, read from source."""
    rows = [r for r in d.get("rows", []) if r.get("n_valid") is not None and r.get("d_hidden")] \
        if isinstance(d, dict) else []
    if not rows or not d.get("cases"):
        raise UsageError(f"{source}: no rows with n_valid and metrics (expected bias_table.py --json output)")
    fig, axes = plt.subplots(1, len(OUTPUTS), figsize=(11, 4.2), sharey=True)
    ns = sorted({c["n_valid"] for c in d["cases"]})
    for ax, out in zip(axes, OUTPUTS):
        for i, s in enumerate(dict.fromkeys(r["subject"] for r in rows)):
            pts = sorted((r["n_valid"], r[out]["bias"]) for r in rows if r["subject"] == s and r[out]["bias"] is not None)
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", color=f"C{i}", label=s)
        for key, marker, label in (("fold_go_over_n", "k_", "bf16(go/n)/(go/n) - 1"), ("fold_one_over_n", "kx",
                                                                                         "bf16(1/n)·n - 1")):
            pts = [(c["n_valid"], c[key]) for c in d["cases"] if c.get(key) is not None]
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker, ms=12, mew=2, label=label)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xticks(ns, [f"{n}{' (2^%d)' % (n.bit_length() - 1) if n & (n - 1) == 0 else ''}" for n in ns])
        ax.set_xlabel("n_valid (valid tokens of the mean)")
        ax.set_title(f"{out} bias ⟨x − r, r⟩/⟨r, r⟩", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("bias against the fp64 reference")
    ids = sorted({re.sub(r"\.ign[0-9]+\.", ".ign*.", c["id"] or c["tag"]) for c in d["cases"]})
    fig.suptitle(f"gradient bias under mean reduction vs n_valid ({', '.join(ids)})", fontsize=8)
    fig.tight_layout()
    return fig


def render_bias_nvalid(name):
    def render(plt, _data_dir):
        path = os.path.join(ROOT, "conformance", name)
        return bias_figure(plt, load(path), path)
    return render


def bias_plot(args):
    """`bias FILE.json`: bias_figure of any bias_table.py --json output."""
    fig = bias_figure(pyplot(), load(args.file), args.file)
    out = args.out or os.path.splitext(args.file)[0] + ".png"
    fig.savefig(out, dpi=90)
    print(json.dumps({"verb": "bias", "path": out}) if args.json else f"wrote {out}")
    return 0


FIGURES = {"chunks": render_chunks, "reduction": render_reduction, "external": render_external,
           "external-262144": render_external_262144,
           "external-h200-262144": render_external_rows("external-production-h200.json", ".v262144.", "4096 x 4096 x 262144"),
           "external-h200-152064": render_external_rows("external-production-h200.json", ".v152064.", "16384 x 8192 x 152064"),
           "external-h200-152064-todays": render_external_rows("external-production-h200-todays-golden.json", ".n16384.",
                                                               "16384 x 8192 x 152064, today's golden"),
           "external-h100-152064": render_external_rows("external-production-h100-152064.json", ".n8192.h4096.v152064.",
                                                        "8192 x 4096 x 152064"),
           "bench-h100": lambda plt, _data_dir: bench_figure(plt, "external-bench-h100-quiet.json"),
           "bias-scale": render_bias_scale, "bias-nvalid": render_bias_nvalid("external-bias.json"),
           "bias-nvalid-h100": render_bias_nvalid("external-bias-h100.json"), "converge": render_converge,
           "converge-sm90": render_converge_sm90}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="verb", required=True)
    c = sub.add_parser("collect", help="run the sweeps, write DATA/sweeps.json")
    c.add_argument("--lcecheck", default=os.path.join(ROOT, "build", "lcecheck"))
    c.add_argument("--oracle", default="fast", choices=("fast", "mpfr"))
    c.add_argument("--data", default=DATA)
    c.add_argument("--check", action="store_true", help="compare with DATA/sweeps.json instead of writing it")
    r = sub.add_parser("render", help="PNGs from the committed data")
    r.add_argument("--data", default=DATA)
    r.add_argument("--out", default=OUT)
    r.add_argument("--only", metavar="NAME,...", help="some of: " + ", ".join(FIGURES))
    r.add_argument("--json", action="store_true")
    k = sub.add_parser("check", help="measured vs bound of a check/judge --json file")
    k.add_argument("file")
    k.add_argument("--out")
    k.add_argument("--metric", default="relerr", choices=("relerr", "bias", "maxscaled", "ulpfrac"))
    k.add_argument("--json", action="store_true")
    b = sub.add_parser("bias", help="bias vs n_valid per subject from bias_table.py --json")
    b.add_argument("file")
    b.add_argument("--out")
    b.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        return {"collect": collect, "render": render, "check": check_plot, "bias": bias_plot}[args.verb](args)
    except UsageError as e:
        print(f"plot_errors.py {args.verb}: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"plot_errors.py {args.verb}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
