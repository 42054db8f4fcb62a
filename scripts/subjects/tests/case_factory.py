"""case_factory.py — small exported cases for the tests, made with the standard library alone (the
real exporter is `lcecheck export`): random inputs exactly representable in the case's dtype, peaked
rows, ignored labels, priors, and every option of case.json."""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lce_exchange as lx  # noqa: E402


def case_fields(**kw):
    f = {"id": "test", "n": 6, "h": 8, "v": 20, "vp": 24, "tp": 1, "vocab_chunk": 4, "token_chunk": 0,
         "dtype": "bfloat16", "gemm": "ieee", "tied": False, "prior_grad": True, "reduction": "mean",
         "ignore_index": -100, "label_smoothing": {"form": "none", "eps": 0.0}, "z_loss": 0.0,
         "softcap": 0, "class_weights": False}
    f.update(kw)
    f["output_weight"] = "embedding" if f["tied"] else "weight"
    f["output_weight_grad"] = "grad_embedding" if f["tied"] else "grad_weight"
    return f


def make_inputs(f, seed=1, scale=1.0, ignore_frac=0.25, poison=None):
    """name -> (dtype, shape, values). poison: None, "hidden" (NaN and +Inf in two tokens) or
    "weight" (an Inf in a real row of the output weight)."""
    rnd = random.Random(seed)
    n, h, v, vp, dt = f["n"], f["h"], f["v"], f["vp"], f["dtype"]

    def q(x):
        return lx.round_to_format(x, dt)

    hidden = [q(rnd.gauss(0.0, scale)) for _ in range(n * h)]
    emb = [q(rnd.gauss(0.0, 0.5)) for _ in range(vp * h)]
    weight = [q(rnd.gauss(0.0, 0.5)) for _ in range(vp * h)]
    labels = [rnd.randrange(v) for _ in range(n)]
    for i in range(n):
        if rnd.random() < ignore_frac:
            labels[i] = f["ignore_index"]
    if poison == "hidden" and n >= 3:
        hidden[h * 1 + 0] = float("nan")
        hidden[h * 2 + 1] = float("inf")
    out_w = emb if f["tied"] else weight
    if poison == "weight":
        out_w[h * (v - 1)] = float("inf")
    gout = [lx.to_float32(rnd.uniform(-2, 2)) for _ in range(n if f["reduction"] == "none" else 1)]
    inputs = {
        "hidden": (dt, [n, h], hidden),
        "embedding": (dt, [vp, h], emb),
        "labels": ("int64", [n], labels),
        "grad_output": ("float32", [len(gout)], gout),
        "grad_embedding_prior": ("float32", [vp, h],
                                 [lx.to_float32(rnd.gauss(0, 1)) if f["prior_grad"] else 0.0 for _ in range(vp * h)]),
    }
    if not f["tied"]:
        inputs["weight"] = (dt, [vp, h], weight)
        inputs["grad_weight_prior"] = ("float32", [vp, h],
                                       [lx.to_float32(rnd.gauss(0, 1)) if f["prior_grad"] else 0.0 for _ in range(vp * h)])
    if f["class_weights"]:
        inputs["class_weight"] = ("float32", [v], [lx.to_float32(rnd.uniform(0.5, 2.0)) for _ in range(v)])
    return inputs


def output_specs(n, h, vp, dtype, tied):
    specs = {"loss": ("float32", [1]), "loss_token": ("float32", [n]), "lse": ("float32", [n]),
             "d_hidden": (dtype, [n, h]), "grad_embedding": ("float32", [vp, h])}
    if not tied:
        specs["grad_weight"] = ("float32", [vp, h])
    return {k: {"file": f"out/{k}.npy", "dtype": d, "shape": s} for k, (d, s) in specs.items()}


def write_case(case_dir, fields, inputs):
    """Writes case.json and the inputs of one case as `lcecheck export` does. fields: every case.json
    field but format, version, inputs and outputs; inputs: name -> (dtype, shape, values)."""
    os.makedirs(case_dir, exist_ok=True)
    j = {"format": lx.FORMAT_CASE, "version": lx.VERSION}
    j.update(fields)
    j["inputs"] = {}
    for name, (dtype, shape, values) in inputs.items():
        lx.write_npy(os.path.join(case_dir, name + ".npy"), lx.DTYPES[dtype][0], shape, lx.encode(dtype, values))
        j["inputs"][name] = {"file": name + ".npy", "dtype": dtype, "shape": list(shape)}
    j["outputs"] = output_specs(fields["n"], fields["h"], fields["vp"], fields["dtype"], fields["tied"])
    with open(os.path.join(case_dir, "case.json"), "w") as f:
        f.write(json.dumps(j, indent=1) + "\n")


def make_export(export_dir, cases):
    """cases: [(fields, inputs)]; writes each into case<k>/ and the manifest."""
    entries = []
    for k, (fields, inputs) in enumerate(cases):
        sub = f"case{k}"
        write_case(os.path.join(export_dir, sub), fields, inputs)
        entries.append((fields["id"], sub))
    m = {"format": lx.FORMAT_MANIFEST, "version": lx.VERSION, "cases": [{"id": i, "dir": d} for i, d in entries]}
    with open(os.path.join(export_dir, "manifest.json"), "w") as f:
        f.write(json.dumps(m, indent=1) + "\n")
    return entries


def read_skip(case_dir):
    """The reason a runner wrote into out/skip.txt, or None."""
    path = os.path.join(case_dir, "out", "skip.txt")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf8") as f:
        return f.read().strip()
