#!/usr/bin/env python3
"""fuzz_parse_policy.py — the policy parser (load_policy in scripts/lcecheck_golden_files.py, the reader
of golden/policy.txt) and its expression evaluator on fuzzed files. Each input is written to
D/policy.txt in a private temporary directory D, beside D/base.txt (a copy of golden/policy.txt, for
`include base.txt`), and loaded; every expression of an accepted policy is then evaluated for one case.
Properties: a refusal is the parser's own ToolError naming a file of D (with its line where a line is at
fault), never another exception; an accepted policy holds only arithmetic trees (numbers, names, + - * /,
unary signs, sqrt of one argument); evaluating one gives a float or a ToolError naming a file and line
of D, and raises no audit event (no import, exec, compile, open, ...: nothing but arithmetic runs).
An include outside D (a path with '/') is not followed: the input is skipped (/dev/stdin would wait).

  fuzz_parse_policy.py replay [PATH...]      every file (directories: their files; default the seed corpus
                                             fuzz/corpus/parse_policy), no atheris needed; exit 2 when no
                                             input was found
  fuzz_parse_policy.py [fuzz] [libFuzzer flags] corpus...   atheris (scripts/requirements.txt)
The `fuzz` word is optional because libFuzzer starts its own children (-fork, -jobs, -merge=1) with
its own flags only, as OSS-Fuzz and ClusterFuzzLite start every target. Those children run a launcher
that re-executes this interpreter on this file, so they find the same atheris. Frozen by PyInstaller
(.clusterfuzzlite/build.sh, compile_python_fuzzer), the modules and golden/policy.txt come from the
bundle (sys._MEIPASS) and the children run the frozen binary itself."""
import argparse
import ast
import atexit
import os
import re
import shlex
import shutil
import sys
import tempfile
import warnings

# The checkout, or the PyInstaller bundle that holds scripts/ and golden/policy.txt in the same layout.
REPO = getattr(sys, "_MEIPASS", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, "scripts"))

gf = None  # scripts/lcecheck_golden_files.py, imported by main (instrumented when fuzzing)


def private_dir():
    """<tmp>/lce-fuzz-policy/<pid>, after removing those of processes that have ended: libFuzzer ends a
    fuzzing process through C's exit(), which runs no Python clean-up, and -fork starts many."""
    parent = os.path.join(tempfile.gettempdir(), "lce-fuzz-policy")
    os.makedirs(parent, exist_ok=True)
    for name in os.listdir(parent):
        try:
            os.kill(int(name), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except (ValueError, PermissionError):
            pass
    path = os.path.join(parent, str(os.getpid()))
    shutil.rmtree(path, ignore_errors=True)
    os.mkdir(path)
    atexit.register(shutil.rmtree, path, ignore_errors=True)  # replay ends normally
    return path


ROOT = private_dir()
POLICY = os.path.join(ROOT, "policy.txt")
shutil.copyfile(os.path.join(REPO, "golden", "policy.txt"), os.path.join(ROOT, "base.txt"))
REFUSAL = re.compile(r"^(cannot read policy )?" + re.escape(ROOT) + r"/")
EVAL_ERROR = re.compile(re.escape(ROOT) + r"/[^:]+:\d+: ")
CASE = ("bf16", {"N": 4.0, "H": 8.0, "V": 40.0}, 40, 2.0)  # dtype, shape, K, cond

ARITHMETIC = (ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Add, ast.Sub, ast.Mult, ast.Div,
              ast.USub, ast.UAdd)
audit_events = None  # a list while an expression is evaluated


def audit(event, args):
    if audit_events is not None:
        audit_events.append(event)


sys.addaudithook(audit)
warnings.filterwarnings("ignore", category=SyntaxWarning)  # ast.parse's notes on inputs like '1if' flood the log


class Violation(AssertionError):
    pass


def check_tree(tree, where):
    for n in ast.walk(tree):
        call_sqrt = (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "sqrt"
                     and len(n.args) == 1 and not n.keywords)
        if not (isinstance(n, ARITHMETIC) or call_sqrt) or \
                (isinstance(n, ast.Constant) and type(n.value) not in (int, float, bool)):
            raise Violation(f"{where}: accepted a non-arithmetic expression ({ast.dump(tree)[:200]})")


def evaluate(pol, expr):
    global audit_events
    audit_events = []
    try:
        value = gf.policy_value(pol, expr, *CASE)
    except gf.ToolError as e:
        if not EVAL_ERROR.search(str(e)):
            raise Violation(f"{expr[1]}: evaluation error names no line of the policy: {e}")
        return
    finally:
        events, audit_events = audit_events, None
    if events:
        raise Violation(f"{expr[1]}: evaluating it raised audit events {sorted(set(events))}")
    if not isinstance(value, float):
        raise Violation(f"{expr[1]}: evaluates to {type(value).__name__}, not a float")


def test_one_input(data):
    # The lines as load_policy reads them: text mode ends a line at \n, \r and \r\n alike (bytes.splitlines).
    for line in data.splitlines():
        tok = line.split()
        if tok and tok[0] == b"include" and len(tok) == 2 and b"/" in tok[1]:
            return
    with open(POLICY, "wb") as f:
        f.write(data)
    try:
        pol = gf.load_policy(POLICY)
    except gf.ToolError as e:
        if not REFUSAL.match(str(e)):
            raise Violation(f"refusal names no file of the policy: {e}")
        return
    exprs = list(pol["defines"].values()) + list(pol["ceilings"].values())
    for rule in pol["bounds"].values():  # parse_bound_rule's fields: terms are names, the rest expressions
        exprs += [rule[k] for k in ("margin", "min") if k in rule]
        exprs += list(rule["fix"].values()) + list(rule["max"].values())
    for expr in exprs:
        check_tree(expr[0], expr[1])
        evaluate(pol, expr)


def replay(paths):
    files = []
    for p in paths:
        files += sorted(os.path.join(p, f) for f in os.listdir(p)) if os.path.isdir(p) else [p]
    for path in files:
        print(f"{path} ({os.path.getsize(path)} bytes)", flush=True)
        with open(path, "rb") as f:
            test_one_input(f.read())
    print(f"\n{len(files)} inputs, every property held")
    if not files:
        print("no input found: an empty replay proves nothing", file=sys.stderr)
        return 2
    return 0


def child_launcher():
    """The argv[0] that libFuzzer's children are started with: the frozen binary, or an executable in
    ROOT that re-executes this interpreter on this file (the file itself need not be executable, and a
    `python3` found on PATH might lack atheris)."""
    if getattr(sys, "frozen", False):
        return sys.executable  # the frozen binary, by its absolute path
    path = os.path.join(ROOT, "fuzz_parse_policy")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(os.path.abspath(__file__))} \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def main():
    global gf
    argv = sys.argv[1:]
    if argv[:1] not in (["replay"], ["-h"], ["--help"]):  # libFuzzer's argv, after an optional `fuzz`
        flags = argv[1:] if argv[:1] == ["fuzz"] else argv
        import atheris
        with atheris.instrument_imports(include=["lcecheck_golden_files"]):
            import lcecheck_golden_files
        gf = lcecheck_golden_files
        atheris.Setup([child_launcher()] + flags, test_one_input)
        atheris.Fuzz()  # never returns: libFuzzer exits the process
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("replay", help="run the inputs without atheris").add_argument(
        "paths", nargs="*", default=[os.path.join(REPO, "fuzz", "corpus", "parse_policy")],
        help="files or directories (default: the seed corpus fuzz/corpus/parse_policy)")
    args = p.parse_args()
    import lcecheck_golden_files
    gf = lcecheck_golden_files
    return replay(args.paths)


if __name__ == "__main__":
    sys.exit(main())
