#!/usr/bin/env python3
"""exchange_door.py — ctest scenarios of the exchange door (lcecheck export / judge / exec:CMD) with
the standard-library reference runner (scripts/subjects/reference_runner.py): one subcommand per
scenario, each printing every command it runs and exiting non-zero with the reason when lcecheck
does not answer as it must.

    exchange_door.py --lcecheck build/lcecheck --work DIR roundtrip|broken|exec|malformed|export-dir
"""
import argparse
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SUBJECTS = os.path.join(HERE, "..", "..", "scripts", "subjects")
RUNNER = os.path.join(SUBJECTS, "reference_runner.py")
sys.path.insert(0, SUBJECTS)
import lce_exchange as lx  # noqa: E402

# Small, untied (so grad_weight and the untouched grad_embedding are both there), bf16.
CASE = "bf16.untied.tp1.n4.h24.v400.vp400.vc1.mean.ign0.fresh.normal.s9"
# An embedding of 17.9 MB: the judge compares inputs 16 MiB at a time, so an element past the first piece.
BIG_CASE = "bf16.tied.tp1.n4.h128.v70000.vp70000.vc4096.mean.ign0.fresh.normal.s9"


class Failed(Exception):
    pass


def run(cmd, want_rc, *patterns, stream="stdout", json_object=False):
    """Runs cmd; its exit status must be want_rc and its stream must contain every pattern."""
    print("+ " + " ".join(f"'{c}'" if " " in c else c for c in cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(p.stdout[-4000:])
    sys.stdout.write(p.stderr[-4000:])
    if p.returncode != want_rc:
        raise Failed(f"exit {p.returncode}, expected {want_rc}")
    text = p.stdout if stream == "stdout" else p.stderr
    for pat in patterns:
        if pat not in text:
            raise Failed(f"{stream} lacks {pat!r}")
    if json_object:
        if p.stdout.count("\n") != 1 or not p.stdout.startswith("{"):
            raise Failed("stdout is not exactly one JSON object on one line")
        return json.loads(p.stdout)
    return p


def export(args, d, *selection):
    if os.path.exists(d):
        shutil.rmtree(d)
    run([args.lcecheck, "export", *selection, "--dir", d, "--quiet"], 0, "lcecheck export")


def runner(d, *extra):
    run([sys.executable, RUNNER, *extra, d], 0)


def judge(args, d, want_rc, *patterns, extra=(), **kw):
    return run([args.lcecheck, "judge", "--dir", d, "--subject-name", "reference-runner", "--golden-class",
                "fused-host", "--quiet", *extra], want_rc, *patterns, **kw)


def roundtrip(args):
    """Export the smoke matrix, answer it with the reference runner, judge: every case passes."""
    d = os.path.join(args.work, "roundtrip")
    export(args, d, "--matrix", "smoke")
    runner(d)
    judge(args, d, 0, "error 0", "PASS")
    j = judge(args, d, 0, extra=("--json",), json_object=True)
    s = j["summary"]
    if j["verb"] != "judge" or not s["ok"] or s["pass"] != s["cases"] or s["cases"] < 20:
        raise Failed(f"judge --json summary {s}")


def rerun_repro(args, stdout, *patterns):
    """The first failing case's repro line, pasted as printed (build/lcecheck being args.lcecheck): it
    must rerun that one case and fail it again."""
    lines = [line.split("repro: ", 1)[1] for line in stdout.splitlines() if "repro: " in line]
    if not lines or not lines[0].startswith("build/lcecheck repro "):
        raise Failed(f"no repro line in the report: {lines[:1]}")
    argv = shlex.split(lines[0])
    case_id = argv[-1]
    run([args.lcecheck, *argv[1:]], 1, case_id, *patterns)


def broken(args):
    """The seeded bug (d_hidden accumulated in bf16 across vocab chunks) fails by d_hidden, no errors;
    a failing case's repro line (the directory's name has a space) reruns it through repro --dir."""
    d = os.path.join(args.work, "broken dir")
    export(args, d, "--matrix", "smoke")
    runner(d, "--bug", "bf16-dhidden-accum")
    p = judge(args, d, 1, "error 0", "FAIL d_hidden")
    failing = [line for line in p.stdout.splitlines() if ": FAIL " in line]
    if not failing or any("FAIL d_hidden" not in line for line in failing):
        raise Failed(f"expected failures on d_hidden only, got {failing}")
    rerun_repro(args, p.stdout, "subject reference-runner (golden class fused-host)", "FAIL d_hidden")


def exec_subject(args):
    """check --subject exec:CMD runs the runner itself: the correct one passes, the broken one fails."""
    cmd = f"{sys.executable} {RUNNER}"
    run([args.lcecheck, "check", "--subject", "exec:" + cmd, "--matrix", "smoke", "--quiet"], 0, "PASS")
    p = run([args.lcecheck, "check", "--subject", f"exec:{cmd} --bug bf16-dhidden-accum", "--matrix", "smoke",
             "--quiet"], 1, "FAIL d_hidden", "error 0")
    rerun_repro(args, p.stdout, "FAIL d_hidden")  # the command has spaces: quoted as one word
    j = run([args.lcecheck, "check", "--subject", "exec:" + cmd, "--case", CASE, "--json"], 0, json_object=True)
    if not j["summary"]["ok"] or j["cases"][0]["status"] != "pass":
        raise Failed(f"check --json with exec: {j['summary']}")
    run([args.lcecheck, "check", "--subject", "exec:false", "--case", CASE], 1, "exited with status 1",
        "LCE_KEEP_EXCHANGE=1 keeps the directory", "error 1")
    j = run([args.lcecheck, "check", "--subject", "exec:false", "--case", CASE, "--json"], 1, json_object=True)
    if j["cases"][0]["status"] != "error" or j["summary"]["error"] != 1 or "exited with status 1" not in \
            j["cases"][0]["message"]:
        raise Failed(f"a runner that fails: every case an error, got {j['cases']} {j['summary']}")
    j = run([args.lcecheck, "check", "--subject", "exec:true", "--case", CASE, "--json"], 1, json_object=True)
    if j["cases"][0]["status"] != "error" or "the runner wrote nothing" not in j["cases"][0]["message"]:
        raise Failed(f"a runner that writes nothing: {j['cases'][0]}")


def mutate(args, base, name, change):
    """A copy of the answered export base with change(case dir) applied."""
    d = os.path.join(args.work, "malformed-" + name)
    if os.path.exists(d):
        shutil.rmtree(d)
    shutil.copytree(base, d)
    cdir = os.path.join(d, lx.load_manifest(d)[0][1].split(os.sep)[-1])
    change(cdir)
    return d


def rewrite_npy(path, descr=None, shape=None):
    descr0, shape0, data = lx.read_npy(path)
    if descr == "<f4" and descr0 == "<u2":  # the same values widened: a wrong dtype, right shape
        data = b"".join(struct.pack("<I", u << 16) for (u,) in struct.iter_unpack("<H", data))
    lx.write_npy(path, descr or descr0, shape or shape0, data)


def set_meta(cdir, **fields):
    path = os.path.join(cdir, "out", "meta.json")
    with open(path) as f:
        meta = json.load(f)
    meta.update(fields)
    with open(path, "w") as f:
        json.dump(meta, f)


def nan_first(path):
    descr, shape, data = lx.read_npy(path)
    lx.write_npy(path, descr, shape, struct.pack("<f", float("nan")) + data[4:])


def truncate(path, nbytes):
    with open(path, "rb") as f:
        blob = f.read()
    with open(path, "wb") as f:
        f.write(blob[:-nbytes])


def flip_last_byte(path):
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    blob[-1] ^= 1
    with open(path, "wb") as f:
        f.write(bytes(blob))


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def flip_element(path, index, item):
    """Flips the lowest bit of element index (item bytes each) of a .npy file's data."""
    with open(path, "r+b") as f:
        head = f.read(10)
        f.seek(10 + int.from_bytes(head[8:10], "little") + index * item)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 1]))


def malformed(args):
    """Every way a runner's answer or an export can be wrong is named: class failures for outputs,
    errors for the case, exit 2 for a corrupted export."""
    base = os.path.join(args.work, "malformed-base")
    export(args, base, "--case", CASE)
    runner(base)
    judge(args, base, 0, "PASS")
    out = lambda c, n: os.path.join(c, "out", n)  # noqa: E731
    scenarios = [
        ("absent", lambda c: os.unlink(out(c, "lse.npy")), 1,
         ["FAIL lse class: out/lse.npy absent (and not declared missing in meta.json)"]),
        ("shape", lambda c: rewrite_npy(out(c, "loss_token.npy"), shape=(1, 4)), 1,
         ["FAIL loss_token class: out/loss_token.npy is <f4 [1, 4], expected <f4 [4] (float32)"]),
        ("dtype", lambda c: rewrite_npy(out(c, "d_hidden.npy"), descr="<f4"), 1,
         ["FAIL d_hidden class: out/d_hidden.npy is <f4 [4, 24], expected <u2 [4, 24] (bfloat16)"]),
        ("truncated", lambda c: truncate(out(c, "grad_weight.npy"), 5), 1,
         ["FAIL d_weight class: out/grad_weight.npy: <f4 [400, 24] needs 38400 data bytes, the file holds 38395 "
          "(truncated)"]),
        ("not-npy", lambda c: write_bytes(out(c, "lse.npy"), b"\x93NUMPY"), 1,
         ["FAIL lse class: out/lse.npy: not a .npy file (bad magic or shorter than 10 bytes)"]),
        ("nan", lambda c: nan_first(out(c, "loss_token.npy")), 1,
         ["FAIL loss_token class: element 0: NaN (expected finite"]),
        ("input-altered", lambda c: flip_last_byte(os.path.join(c, "hidden.npy")), 1,
         ["hidden.npy: element 95 differs from the input regenerated from case id", "error 1"]),
        ("runner-error", lambda c: set_meta(c, error="CUDA out of memory"), 1,
         ["the runner reported an error: CUDA out of memory", "error 1"]),
        ("skip", lambda c: open(out(c, "skip.txt"), "w").write("no untied weight support\n"), 1,
         ["skip 1", "FAIL: no case ran"]),
    ]
    for name, change, rc, patterns in scenarios:
        print(f"--- {name}", flush=True)
        judge(args, mutate(args, base, name, change), rc, *patterns)
    case = judge(args, os.path.join(args.work, "malformed-skip"), 1, extra=("--json",), json_object=True)["cases"][0]
    if case["status"] != "skip" or case["message"] != "the runner skipped it: no untied weight support":
        raise Failed(f"a skipped case must carry the runner's reason: {case}")
    print("--- declared missing", flush=True)
    d = mutate(args, base, "declared-missing", lambda c: (os.unlink(out(c, "lse.npy")), set_meta(c, missing=["lse"])))
    case = judge(args, d, 0, extra=("--json",), json_object=True)["cases"][0]
    if case.get("not_provided") != ["lse"] or "(lse not provided)" not in case["summary"] or "lse" in case["outputs"]:
        raise Failed(f"an output declared missing must be named, not judged: {case}")
    print("--- corrupted case.json", flush=True)
    d = mutate(args, base, "case-json", lambda c: truncate(os.path.join(c, "case.json"), 40))
    p = judge(args, d, 2, "case.json:", stream="stderr")
    print("--- edited case.json", flush=True)
    def edit(c):
        with open(os.path.join(c, "case.json")) as f:
            text = f.read()
        with open(os.path.join(c, "case.json"), "w") as f:
            f.write(text.replace('"n": 4', '"n": 5'))
    judge(args, mutate(args, base, "case-edit", edit), 2, "case.json: field n is not what case", stream="stderr")
    print("--- an input altered past the first piece the judge reads", flush=True)
    big = os.path.join(args.work, "malformed-big")
    export(args, big, "--case", BIG_CASE)
    flip_element(os.path.join(big, lx.load_manifest(big)[0][1].split(os.sep)[-1], "embedding.npy"), 8_400_001, 2)
    judge(args, big, 1, "embedding.npy: element 8400001 differs from the input regenerated from case id", "error 1")
    shutil.rmtree(big)
    j = judge(args, d, 2, extra=("--json",), json_object=True)
    if j["status"] != "usage" or j["exit"] != 2 or "case.json:" not in j["message"]:
        raise Failed(f"judge --json on a corrupted case.json: {j}")
    del p


def export_dir(args):
    """export refuses a directory holding anything but an earlier export, replaces an earlier export
    saying so, and gives one JSON object."""
    d = os.path.join(args.work, "export-dir")
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("mine\n")
    run([args.lcecheck, "export", "--case", CASE, "--dir", d], 2, "holds no lcecheck export", stream="stderr")
    os.unlink(os.path.join(d, "notes.txt"))
    j = run([args.lcecheck, "export", "--case", CASE, "--dir", d, "--json"], 0, json_object=True)
    if j["verb"] != "export" or j["cases"] != 1:
        raise Failed(f"export --json: {j}")
    runner(d)
    run([args.lcecheck, "export", "--matrix", "smoke", "--dir", d, "--quiet"], 0,
        "holds an earlier lcecheck export (1 cases): removing", stream="stderr")
    if len(lx.load_manifest(d)) < 20 or any(e.startswith("0000-" + CASE) for e in os.listdir(d)):
        raise Failed("the earlier export was not replaced")
    j = run([args.lcecheck, "export", "--dir", d, "--json"], 2, json_object=True)
    if j["status"] != "usage":
        raise Failed(f"export without cases: {j}")


SCENARIOS = {"roundtrip": roundtrip, "broken": broken, "exec": exec_subject, "malformed": malformed,
             "export-dir": export_dir}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lcecheck", required=True)
    ap.add_argument("--work", required=True, help="a directory for the exports (created)")
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    try:
        SCENARIOS[args.scenario](args)
        verdict = "ok"
    except (Failed, lx.ExchangeError) as e:
        verdict = f"FAILED: {e}"
    print(f"exchange_door {args.scenario}: {verdict}", file=sys.stderr if verdict != "ok" else sys.stdout)
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
