"""fuzz_common.py — what scripts/fuzz_campaign.py's parts share (glue only, no entry point): the
tree's paths, printing and running a command, the harness's .finding files, why a fuzzer did not
start, and the commit and build a campaign ran on."""
import datetime
import re
import shlex
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEED_CORPUS = REPO / "fuzz" / "corpus" / "subject"
FUZZ_DIR = REPO / "fuzz"
ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def command_text(cmd, env_extra=None):
    """The command, with its environment additions, as a shell would take it."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env_extra or {}).items())
    return (prefix + " " if prefix else "") + shlex.join(str(c) for c in cmd)


def print_command(cmd, env_extra=None):
    """Prints command_text(cmd, env_extra) as a trace line."""
    print("+", command_text(cmd, env_extra), file=sys.stderr, flush=True)


def invocation():
    """This run's command line as the campaign logs and bundle notes record it (the entry point is
    fuzz_campaign.py whichever part of it runs)."""
    return "python3 scripts/fuzz_campaign.py " + shlex.join(sys.argv[1:])


def echo_run(cmd, env_extra=None, **kwargs):
    """Prints the command (with its environment additions) and runs it."""
    print_command(cmd, env_extra)
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([str(c) for c in cmd], env=env, **kwargs)


def findings_dir_for(root, subject):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    d = Path(root).resolve() / subject.replace("/", "_") / stamp  # absolute: the fuzzer runs in it
    (d / "corpus").mkdir(parents=True, exist_ok=False)
    return d


def parse_finding(text, fallback_case):
    """One .finding file (lce_fuzz_session.c's write_report) → dict: case, kind, summary, and the
    failing outputs ("d_hidden: ulpfrac 3.1, bound 1 (310% of budget)"), indented lines before repro."""
    case = re.search(r"^case: (.*)$", text, re.M)
    kind = re.search(r"^lce-fuzz violation: (.*)$", text, re.M)
    summary = re.search(r"^summary: (.*)$", text, re.M)
    outputs = [line.strip() for line in text.splitlines() if line.startswith("  ") and line.strip()]
    return {"case": case.group(1) if case else fallback_case,
            "kind": kind.group(1) if kind else "?",
            "summary": summary.group(1) if summary else "",
            "outputs": outputs}


def finding_cases(d):
    """The harness's .finding files, oldest first (libFuzzer stops at the first, so usually one)."""
    cases = []
    for f in sorted(d.glob("*.finding"), key=lambda p: (p.stat().st_mtime, p.name)):
        c = parse_finding(f.read_text(errors="replace"), f.stem)
        c["file"] = str(f)
        c["mtime"] = f.stat().st_mtime
        cases.append(c)
    return cases


def worst_output(outputs):
    """The failing output line that matters most: a class failure (wrong NaN/Inf/exact value, an
    untouched buffer written) first, else the metric furthest over its bound."""
    def rank(line):
        if ": class: " in line:
            return float("inf")
        m = re.search(r"\(([\d.]+)% of budget\)", line)
        return float(m.group(1)) if m else 0.0
    return max(outputs, key=rank) if outputs else None


def finding_line(c):
    """What failed, in one line: the worst failing output and metric, else the summary."""
    what = worst_output(c["outputs"]) or c["summary"]
    return what if c["kind"] == "verdict fail" else f"{c['kind']}: {what}"


def log_tail(text, lines=8):
    """The last lines of a fuzzer log that say something (the sanitizer's or the harness's message)."""
    kept = [line for line in text.splitlines() if line.strip()]
    return "\n".join("    " + line for line in kept[-lines:])


# The first line of the BUILD_INFO that `bundle-gpu` writes beside its fuzzer (fuzz_bundle.py).
GPU_BUNDLE_MARK = "fuzz_subject with fused-cuda"


def build_has_cuda(build):
    """Whether the fuzzer build was configured with fused-cuda (LCE_FUZZ_WITH_CUDA=ON), or is a
    bundle-gpu folder (no CMakeCache.txt there; its BUILD_INFO says so)."""
    cache, info = Path(build) / "CMakeCache.txt", Path(build) / "BUILD_INFO"
    if not cache.is_file():
        return info.is_file() and info.read_text(errors="replace").startswith(GPU_BUNDLE_MARK)
    return re.search(r"^LCE_FUZZ_WITH_CUDA:\w+=(ON|1|TRUE|YES)\s*$",
                     cache.read_text(errors="replace"), re.M | re.I) is not None


def is_gpu_subject(subject):
    """GPU subjects are named fused-cuda* or mutant-cuda/* in the subject registry."""
    return subject.startswith(("fused-cuda", "mutant-cuda/"))


def start_error(returncode, log_text, log_path, subject, build):
    """Why a fuzzer that never reached libFuzzer's seed line did not start → (message, skipped).
    Exit 77 is the harness's skip for a GPU subject without a GPU; a GPU subject that a build without
    CUDA does not know is skipped as well; anything else is an error that shows the log's tail."""
    if returncode == 77:
        return f"skipped: the subject needs a GPU this machine lacks (exit 77); see {log_path}", True
    if subject and is_gpu_subject(subject) and "unknown subject" in log_text and not build_has_cuda(build):
        return (f"skipped: {subject} is a GPU subject and {build} was built without CUDA "
                f"(configure with -DLCE_FUZZ_WITH_CUDA=ON, or use bundle-gpu); see {log_path}"), True
    return f"fuzzer did not start (exit {returncode}); the end of {log_path}:\n{log_tail(log_text)}", False


def md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def head_commit(repo):
    """The checked-out commit, read from .git without running git (this script never changes or
    even queries git state through the git binary); "unknown" when it cannot be read."""
    git = repo / ".git"
    try:
        if git.is_file():  # a worktree or submodule: "gitdir: <path>"
            git = (repo / git.read_text().split(":", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()[:12]
        common = git / "commondir"
        roots = [git] + ([(git / common.read_text().strip()).resolve()] if common.is_file() else [])
        for root in roots:
            if (root / ref).is_file():
                return (root / ref).read_text().strip()[:12]
            packed = root / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0][:12]
    except (OSError, IndexError):
        pass
    return "unknown"


def source_commit():
    """The commit of the tree the campaign runs from: the checkout's, or the one a bundle was built
    at (its BUNDLE_INFO, fuzz_campaign.py bundle), which has no .git."""
    commit = head_commit(REPO)
    info = REPO / "BUNDLE_INFO"
    if commit == "unknown" and info.is_file():
        m = re.search(r"^commit: (\w+)", info.read_text(errors="replace"), re.M)
        commit = m.group(1) if m else commit
    return commit


def build_description(build):
    """Compiler and build type of the fuzzer's build tree, from its CMakeCache.txt, or the first line of
    the BUILD_INFO that a bundle keeps beside its binaries."""
    cache = Path(build) / "CMakeCache.txt"
    info = Path(build) / "BUILD_INFO"
    if not cache.is_file() and info.is_file():
        return info.read_text(errors="replace").splitlines()[0]
    found = {}
    if cache.is_file():
        for line in cache.read_text(errors="replace").splitlines():
            m = re.match(r"(CMAKE_C_COMPILER|CMAKE_BUILD_TYPE|CMAKE_C_FLAGS|LCE_FUZZING_ENGINE):\w+=(.*)$", line)
            if m:
                found[m.group(1)] = m.group(2)
    compiler = Path(found["CMAKE_C_COMPILER"]).name if found.get("CMAKE_C_COMPILER") else "?"
    # Without an engine's flags the fuzzer build adds ASan + UBSan itself (CMakeLists.txt); with them
    # the sanitizers are those of CMAKE_C_FLAGS.
    flags = found.get("CMAKE_C_FLAGS", "") if found.get("LCE_FUZZING_ENGINE") else "address,undefined"
    sanitizers = "/".join(n for s, n in (("address", "ASan"), ("undefined", "UBSan")) if s in flags) or "no sanitizers"
    return f"{compiler} {found.get('CMAKE_BUILD_TYPE') or '?'}, libFuzzer + {sanitizers}"
