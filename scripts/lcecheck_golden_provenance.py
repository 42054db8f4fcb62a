"""lcecheck_golden_provenance.py — the generator command a golden file records, and whether it is complete.

A golden's header line `# generator: scripts/lcecheck_golden.py ...` must be the whole command that
wrote it, run from the repository root: every option that shapes the file (the golden directory, the
policy, the architecture, the matrices or measurement files, a class's reason to have no mutants) is
on it, so that running it again reproduces the file's entries bit for bit (`lcecheck_golden.py
reproduce`). Options that do not change the file (--jobs, --build, --write, --json) are left out, and
so is --allow-loosen: loosening is relative to the file being replaced, and its reason is recorded on a
line of its own. Pure functions, no tool runs."""
import os
import re
import shlex

from lcecheck_golden_files import Refusal, ToolError, read_text
from lcecheck_run import run_command

SCRIPT = "scripts/lcecheck_golden.py"


def repo_relative(path, repo):
    """path as the recorded command names it: relative to the repository root when inside it."""
    rel = os.path.relpath(os.path.abspath(path), repo)
    return path if rel.startswith("..") else rel


def default_golden_dir(repo, arch):
    return os.path.join(repo, "golden", *([arch] if arch else []))


def generator_command(args, repo):
    """The command line that wrote (or would write) a golden with these regen arguments."""
    glob = ["--arch", args.arch] if args.arch else []
    if os.path.abspath(args.golden_dir) != os.path.abspath(default_golden_dir(repo, args.arch)):
        glob += ["--golden-dir", repo_relative(args.golden_dir, repo)]
    if os.path.abspath(args.policy) != os.path.abspath(os.path.join(args.golden_dir, "policy.txt")):
        glob += ["--policy", repo_relative(args.policy, repo)]
    sel = [a for p in args.from_json for a in ("--from-json", repo_relative(p, repo))] if args.from_json \
        else [a for spec in args.matrix or ["default"] for a in ("--matrix", spec)]
    mut = ["--allow-no-mutants", args.allow_no_mutants] if args.allow_no_mutants else []
    return SCRIPT + " " + shlex.join(glob + ["regen", "--subject", args.subject] + sel + mut)


def header(path):
    """{'generator': argv after the script, 'lines': {key: text} of the '# key: text' provenance lines,
    'classes': the classes of its entries}."""
    lines = read_text(path).split("\n")
    prov, classes = {}, set()
    for line in lines[1:]:
        if line.startswith("# ") and ": " in line:
            key, _, text = line[2:].partition(": ")
            prov.setdefault(key, text)
        elif line.strip() and not line.startswith("#"):
            classes.add(line.split()[0])
    gen = prov.get("generator")
    if gen is None:
        raise ToolError(f"{path}: no '# generator:' line")
    argv = shlex.split(gen)
    if not argv or argv[0] != SCRIPT:
        raise ToolError(f"{path}: the generator does not run {SCRIPT}: {gen}")
    return {"generator": argv[1:], "text": gen, "lines": prov, "classes": classes}


def command_problems(path, h, args, repo):
    """What the recorded command (parsed into regen arguments `args`) lacks to reproduce the file at
    path, judged against the file's own provenance lines; [] when it is complete."""
    problems = []
    if getattr(args, "cmd", None) != "regen":
        return [f"the generator is not a regen command: {h['text']}"]
    if len(h["classes"]) != 1:
        return [f"the entries name {len(h['classes'])} classes, not one"]
    cls = next(iter(h["classes"]))
    target = os.path.join(args.golden_dir, f"{cls}.golden")
    if os.path.realpath(target) != os.path.realpath(path):
        problems.append(f"the command writes {repo_relative(target, repo)}, not this file "
                        "(--golden-dir or --arch missing or wrong)")
    policy = h["lines"].get("policy", "").split(" ")[0]
    if policy != repo_relative(args.policy, repo):
        problems.append(f"the command reads the policy {repo_relative(args.policy, repo)}, the file records "
                        f"{policy or 'none'} (--policy missing or wrong)")
    reason = h["lines"].get("no mutants checked")
    if reason != args.allow_no_mutants:
        problems.append(f"the file records 'no mutants checked: {reason}', the command passes "
                        f"--allow-no-mutants {args.allow_no_mutants!r}")
    matrix = h["lines"].get("matrix", "")
    want = ("files " + ", ".join(os.path.basename(p) for p in args.from_json)) if args.from_json \
        else ", ".join(args.matrix or ["default"])
    if not matrix.startswith(want + " ("):
        problems.append(f"the file records the matrix '{matrix}', the command measures '{want}'")
    for p in args.from_json or []:
        if not os.path.exists(os.path.join(repo, p)):
            problems.append(f"measurement file {p} is not in the repository")
    return problems


def recorded_matrices(path):
    """The matrix specs (or measurement files) the golden at path was measured on, [] without one."""
    if not os.path.exists(path) or "\n# generator: " not in read_text(path):
        return []  # a golden without a record (written by hand, in a test) names no matrix
    argv = header(path)["generator"]
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--matrix", "--from-json")]


# ---- the other provenance lines ---------------------------------------------------------------
def gpu_identity(arch):
    """'name, driver D, CUDA C, sm_XY' of GPU 0; refuses unless it is of architecture arch (sm_90):
    a per-architecture golden measured on another GPU would record the wrong device arithmetic."""
    rc, out, err = run_command(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap",
                                "--format=csv,noheader"], check=False)
    if rc != 0 or not out.strip():
        raise Refusal(f"--arch {arch}: nvidia-smi found no GPU ({err.strip()[-200:]}); per-architecture "
                      "goldens are measured on that architecture")
    name, driver, cap = [t.strip() for t in out.strip().split("\n")[0].split(",")]
    found = "sm_" + cap.replace(".", "")
    if found != arch:
        raise Refusal(f"--arch {arch}, but GPU 0 ({name}) is {found}")
    _, smi, _ = run_command(["nvidia-smi"], check=False)
    m = re.search(r"CUDA Version:\s*([0-9.]+)", smi)
    return f"{name}, driver {driver}, CUDA {m.group(1) if m else 'unknown'}, {found}"


def mpfr_version(listing, build):
    if listing.get("mpfr_version"):
        return listing["mpfr_version"]
    dirs = ["/usr/include", "/usr/local/include"]
    try:
        cache = read_text(os.path.join(build, "CMakeCache.txt"))
        m = re.search(r"^MPFR_INCLUDE_DIR:\w+=(.*)$", cache, re.M)
        if m:
            dirs.insert(0, m.group(1))
    except OSError:
        pass
    for d in dirs:
        try:
            m = re.search(r'#define\s+MPFR_VERSION_STRING\s+"([^"]+)"',
                          read_text(os.path.join(d, "mpfr.h")))
            if m:
                return m.group(1) + f" (from {d}/mpfr.h)"
        except OSError:
            continue
    return "unknown"


def git_commit(repo):
    if os.environ.get("LCE_GOLDEN_COMMIT"):  # a copy of the tree without .git (the GPU machine)
        return os.environ["LCE_GOLDEN_COMMIT"] + " (from LCE_GOLDEN_COMMIT)"
    rc, out, _ = run_command(["git", "-C", repo, "rev-parse", "HEAD"], check=False)
    if rc != 0:
        return "unknown (not a git checkout)"
    rc2, dirty, _ = run_command(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                                check=False)
    return out.strip() + ("-dirty" if rc2 == 0 and dirty.strip() else "")


def seed_summary(meas):
    seeds = sorted({int(m.group(1)) for c in meas["cases"]
                    for m in [re.search(r"\.s(\d+)$", c.get("id", ""))] if m})
    if not seeds:
        return "none recorded"
    return f"{seeds[0]}..{seeds[-1]} ({len(seeds)} distinct)" if len(seeds) > 1 else str(seeds[0])
