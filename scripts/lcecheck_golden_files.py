"""lcecheck_golden_files.py — the two text formats scripts/lcecheck_golden.py reads and writes:
policy files (golden/policy.txt and the per-architecture ones that include it: arithmetic expressions,
bound rules, ceilings) and golden files (conformance/judge/lce_golden.h is the C authority; this reader is
held to the same format by the golden_files_parse tests), and the entries a policy derives where no
sample defines one (derive_unmeasured). Pure functions, no tool runs."""
import ast
import math
import os
import tempfile

from lcecheck_golden_fit import TERMS, model_bound

GOLDEN_MAGIC = "lcecheck-golden 1"
POLICY_MAGIC = "lcecheck-policy 1"
OUTPUTS = ("loss", "loss_token", "lse", "d_hidden", "d_weight", "d_embedding")
METRICS = ("relerr", "bias", "ulpfrac", "maxscaled")
DTYPES = ("bf16", "fp16", "fp32", "tf32")  # tf32: fp32 inputs whose GEMMs round them to tf32
FORMS = ("const", "sqrtk", "lineark", "cond", "condk", "model")
FORM_NVALS = {"const": 1, "sqrtk": 2, "lineark": 2, "cond": 2, "condk": 3}  # constants of the fixed forms
UNIT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11, "fp32": 2.0**-24, "tf32": 2.0**-11}


class Refusal(Exception):
    """A reason not to write goldens; exit code 1."""


class ToolError(Exception):
    """A malformed input file or a failing tool; exit code 2."""


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# ---- expressions (policy) ------------------------------------------------------------------------
_ALLOWED_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
                   ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


def write_atomically(path, text):
    """Writes text to path through a temporary file in its directory: a reader sees the old file or the
    new one, never a part."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def parse_expr(text, where):
    """Parses arithmetic (+ - * / parentheses, sqrt(), numbers, names) into an ast, or raises."""
    try:
        tree = ast.parse(text, mode="eval").body
    # RecursionError: nesting or a sum too deep for the parser; ValueError: a NUL byte, on CPython
    # 3.11 releases before the one that made it a SyntaxError (3.11.2 raises it, 3.11.7 does not).
    except (SyntaxError, ValueError, RecursionError):
        raise ToolError(f"{where}: cannot parse expression '{text}'")
    for node in ast.walk(tree):
        ok = isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load,
                               ast.USub, ast.UAdd) + tuple(_ALLOWED_BINOPS))
        ok = ok or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "sqrt" and len(node.args) == 1 and not node.keywords)
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
            ok = False
        if not ok:
            raise ToolError(f"{where}: '{text}' uses {type(node).__name__}, not arithmetic")
    return tree


def eval_expr(tree, names, where, _defining=()):
    """The value of a parse_expr tree; a define refers to names' (tree, where) pairs. Arithmetic that
    has no value (1/0, sqrt(-1), an integer too large for a float, a define that uses itself) raises
    ToolError naming where."""
    def ev(n):
        if isinstance(n, ast.Constant):
            return float(n.value)
        if isinstance(n, ast.Name):
            if n.id == "sqrt":
                raise ToolError(f"{where}: sqrt is a function")
            if n.id not in names:
                raise ToolError(f"{where}: unknown name '{n.id}'")
            v = names[n.id]
            if n.id in _defining:
                raise ToolError(f"{where}: '{n.id}' is defined in terms of itself")
            return eval_expr(v[0], names, v[1], _defining + (n.id,)) if isinstance(v, tuple) else v
        if isinstance(n, ast.UnaryOp):
            return -ev(n.operand) if isinstance(n.op, ast.USub) else ev(n.operand)
        if isinstance(n, ast.Call):
            return math.sqrt(ev(n.args[0]))
        return _ALLOWED_BINOPS[type(n.op)](ev(n.left), ev(n.right))
    try:
        return ev(tree)
    except (ZeroDivisionError, ValueError, OverflowError, RecursionError) as e:
        raise ToolError(f"{where}: cannot evaluate it: {e}")


def case_names(dtype, shape, k, cond=1.0):
    """The names an expression may use for one case; cond is the output's condition (>= 1)."""
    names = {"u": UNIT_ROUNDOFF[dtype], "K": float(k), "cond": float(cond), "inf": math.inf,
             "tc": 0.0 if dtype == "fp32" else 1.0,  # tc: the GEMMs run on tensor cores (not IEEE fp32)
             "u_in": UNIT_ROUNDOFF["fp32" if dtype == "tf32" else dtype]}  # u of the input dtype (tf32: fp32 inputs)
    names.update({f"u_{t}": u for t, u in UNIT_ROUNDOFF.items()})
    names.update({key: float(v) for key, v in shape.items()})
    return names


def load_policy(path, _included=None):
    """Returns {'defines': {name: (ast, where)}, 'bounds': {(o, m): {...}}, 'ceilings': {(t, o, m): (ast, where)},
    'unmeasured': {(o, m): m2}}: `unmeasured <output> <metric> from <metric2>` says that an entry no
    sample of the matrix defines takes the same dtype's (output, metric2) entry.

    `include <relative path>` (first directive only) reads a base policy first; the including file
    (a per-architecture policy) may then replace the base's bound and ceiling lines key by key, and
    add defines. Within one file a key may not repeat."""
    pol = {"defines": {}, "bounds": {}, "ceilings": {}, "unmeasured": {}, "path": path}
    try:
        lines = read_text(path).split("\n")
    except (OSError, ValueError) as e:  # ValueError: not UTF-8, or a NUL in an included path
        raise ToolError(f"cannot read policy {path}: {e}")
    if not lines or lines[0] != POLICY_MAGIC:
        raise ToolError(f"{path}:1: first line must be '{POLICY_MAGIC}'")
    own = set()  # keys this file set: a second one is an error, replacing an included one is not
    for no, line in enumerate(lines[1:], start=2):
        where = f"{path}:{no}"
        tok = line.split()
        if not tok or tok[0].startswith("#"):
            continue
        if tok[0] == "include" and len(tok) == 2:
            depth = (_included or 0) + 1
            if own or pol["defines"] or depth > 4:
                raise ToolError(f"{where}: include must be the first directive (at most 4 levels)")
            base = load_policy(os.path.join(os.path.dirname(path), tok[1]), _included=depth)
            pol.update({k: base[k] for k in ("defines", "bounds", "ceilings", "unmeasured")})
            own.add(("include",))
            continue
        if tok[0] == "define" and len(tok) >= 4 and tok[2] == "=":
            if tok[1] in pol["defines"]:
                raise ToolError(f"{where}: '{tok[1]}' defined twice")
            pol["defines"][tok[1]] = (parse_expr(" ".join(tok[3:]), where), where)
        elif tok[0] == "bound" and len(tok) >= 5 and tok[1] in OUTPUTS and tok[2] in METRICS:
            pol["bounds"][(tok[1], tok[2])] = parse_bound_rule(tok, where, own)
        elif tok[0] == "unmeasured" and len(tok) == 5 and tok[1] in OUTPUTS and tok[2] in METRICS \
                and tok[3] == "from" and tok[4] in METRICS and tok[4] != tok[2]:
            if ("unmeasured", tok[1], tok[2]) in own:
                raise ToolError(f"{where}: duplicate unmeasured {tok[1]} {tok[2]}")
            own.add(("unmeasured", tok[1], tok[2]))
            pol["unmeasured"][(tok[1], tok[2])] = tok[4]
        elif tok[0] == "ceiling" and len(tok) >= 5 and (tok[1] in DTYPES or tok[1] == "*") \
                and tok[2] in OUTPUTS and tok[3] in METRICS:
            key = (tok[1], tok[2], tok[3])
            if ("ceiling",) + key in own:
                raise ToolError(f"{where}: duplicate ceiling {' '.join(key)}")
            own.add(("ceiling",) + key)
            pol["ceilings"][key] = (parse_expr(" ".join(tok[4:]), where), where)
        else:
            raise ToolError(f"{where}: malformed policy line: {line.strip()}")
    return pol


def parse_bound_rule(tok, where, own):
    """`bound <output> <metric> model terms=<t>,<t>... margin=<expr> [min=<expr>] [fix.<t>=<expr>]
    [max.<t>=<expr>] [add.<t>=<expr>] [ref=<t>]`: the terms (TERMS, in their order), the margin, the
    least bound, coefficients given by the policy instead of fitted (times the margin), caps on fitted
    ones, coefficients given by the policy and added after the fit (times the margin; the fitted terms
    hold every measurement without them), and a reference term (coefficient 1; the margin applies to
    what a measurement exceeds it by)."""
    if tok[3] != "model":
        raise ToolError(f"{where}: bound form '{tok[3]}': policies write `model terms=...` (golden files "
                        "may still hold the fixed forms const, sqrtk, lineark, cond, condk)")
    opts, rule = {}, {"form": "model", "fix": {}, "max": {}, "add": {}}
    for kv in tok[4:]:
        key, _, val = kv.partition("=")
        if key == "terms" and val and "terms" not in rule:
            terms = val.split(",")
            if any(t not in TERMS for t in terms) or [TERMS.index(t) for t in terms] != sorted(
                    {TERMS.index(t) for t in terms}):
                raise ToolError(f"{where}: terms= wants known terms ({' '.join(TERMS)}), in that order, once each")
            rule["terms"] = tuple(terms)
            continue
        if key == "ref" and val in TERMS and "ref" not in rule:
            rule["ref"] = val
            continue
        group, _, term = key.partition(".")
        if not val or (group in ("fix", "max", "add") and term not in TERMS) or (
                group not in ("fix", "max", "add") and (term or key not in ("margin", "min"))) or key in opts:
            raise ToolError(f"{where}: bad bound option '{kv}'")
        tree = parse_expr(val, where)
        if any(isinstance(n, ast.Name) and n.id == "cond" for n in ast.walk(tree)):
            # A coefficient is one number per (output, metric); cond differs per case, and the
            # terms already multiply by it.
            raise ToolError(f"{where}: '{kv}' uses cond, which only ceilings may use")
        opts[key] = (tree, where)
        if group in ("fix", "max", "add"):
            rule[group][term] = opts[key]
        else:
            rule[key] = opts[key]
    if "margin" not in rule or "terms" not in rule or ("bound", tok[1], tok[2]) in own:
        raise ToolError(f"{where}: bound needs terms= and margin= and must not repeat a key")
    named = list(rule["fix"]) + list(rule["max"]) + list(rule["add"])
    if any(t not in rule["terms"] for t in named) or len(set(named)) != len(named):
        raise ToolError(f"{where}: fix., max. and add. name terms of the rule's terms=, each once")
    if "ref" in rule and (rule["ref"] not in rule["terms"] or rule["ref"] in named):
        raise ToolError(f"{where}: ref= names a term of the rule's terms= that no fix., max. or add. names")
    own.add(("bound", tok[1], tok[2]))
    return rule


def policy_value(pol, expr, dtype, shape, k, cond=1.0, extra=None):
    """expr evaluated for one case; extra: names the caller adds (the fit's `maxscaled`)."""
    names = case_names(dtype, shape, k, cond)
    names.update(extra or {})
    names.update(pol["defines"])
    return eval_expr(expr[0], names, expr[1])


def policy_ceiling(pol, dtype, output, metric):
    c = pol["ceilings"].get((dtype, output, metric)) or pol["ceilings"].get(("*", output, metric))
    if c is None:
        raise Refusal(f"{pol['path']}: no ceiling for {dtype} {output} {metric}")
    return c


# Every (output, metric) a case can define, so every one that a larger matrix can judge: loss is one
# element (reduction sum and mean; under none its class checks judge it), over which the statistics
# bias and ulpfrac are never defined (lce_metrics.h, LCE_STAT_MIN_ELEMS); d_embedding has class checks only.
JUDGED = tuple((o, m) for o in OUTPUTS if o != "d_embedding" for m in METRICS
               if o != "loss" or m in ("relerr", "maxscaled"))


def derive_unmeasured(pol, samples, entries):
    """Entries for the keys of JUDGED that no sample of the matrix defines (a statistic over too few
    elements in every case of it), for each (class, dtype, output) measured: a golden fitted on a small matrix
    judges the larger ones, whose cases define them. From the policy, never from a guess: a rule whose
    every coefficient the policy fixes needs no sample, and `unmeasured <output> <metric> from <m2>`
    takes the same dtype's (output, m2) entry (bias from relerr: |bias| <= relerr, golden/policy.txt).
    Returns the entries and a refusal for each key the policy derives nothing for."""
    derived, refusals = {}, []
    measured = {k[:3] for k in samples}  # an output left out of the measurement (--outputs) is not judged
    for cls, dtype in sorted({k[:2] for k in samples}, key=lambda cd: (cd[0], DTYPES.index(cd[1]))):
        for output, metric in JUDGED:
            key = (cls, dtype, output, metric)
            if key in entries or (cls, dtype, output) not in measured:
                continue
            rule, src = pol["bounds"].get((output, metric)), pol["unmeasured"].get((output, metric))
            if rule is not None and all(t in rule["fix"] or t in rule["add"] or t == rule.get("ref")
                                        for t in rule["terms"]):
                ms = dict(entries.get((cls, dtype, output, "maxscaled"), ("model", 0, 0, 0, ()))[4])
                value = lambda e: policy_value(pol, e, dtype, {}, 0, extra={"maxscaled": ms.get("1", math.nan)})
                try:
                    margin = value(rule["margin"])
                    coefs = [1.0 if t == rule.get("ref") else value({**rule["fix"], **rule["add"]}[t]) * margin
                             for t in rule["terms"]]
                except ToolError as e:  # a fixed coefficient that depends on the case's shape
                    refusals.append(f"{' '.join(key)}: no sample defines it, and its fixed terms need a case: {e}")
                    continue
                derived[key] = ("model", 0.0, 0.0, 0.0, tuple(zip(rule["terms"], coefs)))
            elif src is not None and (cls, dtype, output, src) in entries:
                derived[key] = entries[(cls, dtype, output, src)]
            else:
                refusals.append(f"{' '.join(key)}: no sample of the matrix defines it and {pol['path']} derives "
                                "no entry for it (a rule of fixed terms, or `unmeasured ... from ...`), so a "
                                "larger matrix could not be judged")
    return derived, refusals


# ---- golden files --------------------------------------------------------------------------------
def parse_number(s, where):
    try:
        v = float.fromhex(s) if "0x" in s.lower() else float(s)
    except ValueError:
        raise ToolError(f"{where}: '{s}' is not a number")
    if not math.isfinite(v) or v < 0:
        raise ToolError(f"{where}: '{s}' must be finite and >= 0")
    return v


def parse_model_terms(fields, where):
    """The <term>=<coef> fields of a model line (lce_golden.c's rules): known terms, in TERMS order,
    once each, at least one."""
    pairs, last = [], -1
    for f in fields:
        term, eq, val = f.partition("=")
        if not eq or term not in TERMS or TERMS.index(term) <= last:
            raise ToolError(f"{where}: model term '{f}' (known terms, in the order {' '.join(TERMS)}, once each)")
        last = TERMS.index(term)
        pairs.append((term, parse_number(val, where)))
    if not pairs:
        raise ToolError(f"{where}: form model names no term")
    return tuple(pairs)


def load_golden(path):
    """Returns {'entries': {(class, dtype, output, metric): (form, a, b, c, terms)}, 'comments': [...]},
    or None if absent; terms is ((term, coef), ...) for the model form, () for the fixed forms."""
    if not os.path.exists(path):
        return None
    lines = read_text(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != GOLDEN_MAGIC:
        raise ToolError(f"{path}:1: first line must be '{GOLDEN_MAGIC}'")
    g = {"entries": {}, "comments": []}
    for no, line in enumerate(lines[1:], start=2):
        where = f"{path}:{no}"
        if line.startswith("#"):
            g["comments"].append(line)
            continue
        tok = line.split()
        if not tok:
            continue
        form = tok[4] if len(tok) > 4 else ""
        nvals = FORM_NVALS.get(form)
        if form not in FORMS or (nvals is not None and len(tok) != 5 + nvals) or tok[1] not in DTYPES \
                or tok[2] not in OUTPUTS or tok[3] not in METRICS:
            raise ToolError(f"{where}: malformed golden line: {line}")
        key = tuple(tok[:4])
        if key in g["entries"]:
            raise ToolError(f"{where}: duplicate entry {' '.join(key)}")
        if form == "model":
            g["entries"][key] = ("model", 0.0, 0.0, 0.0, parse_model_terms(tok[5:], where))
            continue
        vals = [parse_number(s, where) for s in tok[5:]]
        g["entries"][key] = (form, vals[0], vals[1] if nvals >= 2 else 0.0, vals[2] if nvals == 3 else 0.0, ())
    return g


MAG_TERMS = ("cond", "cond/sqrtn", "cond*sqrtv", "cond*sqrth", "ms*cond/sqrtn", "cond*v", "cond*h",
             "rnd", "rndn", "rnds", "flip", "flipn", "outr", "outv", "acc", "accn", "pertok", "pertokn")


def needs_mags(entry):
    """Whether an entry's bound needs what a reference without error magnitudes cannot give
    (lce_golden_needs_mags): the cond form's b, or a model term of MAG_TERMS (cond, the maxscaled bound,
    the terms measured from the magnitudes or rnd), with a non-zero coefficient."""
    form, _a, b, _c, terms = entry
    if form in ("cond", "condk"):
        return b != 0.0
    return form == "model" and any(t in MAG_TERMS and v != 0.0 for t, v in terms)


def bound_at(entry, scales):
    """The bound of an entry on an output with these scales (lcecheck_golden_fit.scales_of;
    lce_golden_bound)."""
    form, a, b, c, terms = entry
    if form == "model":
        return model_bound(terms, scales)
    k, cond = scales["k"], scales["cond"]
    return a + {"const": 0.0, "sqrtk": b * math.sqrt(k), "lineark": b * k, "cond": b * cond,
                "condk": b * cond + c * k}[form]


def format_entry(key, entry):
    form, a, b, c, terms = entry
    vals = [f"{t}={v.hex()}" for t, v in terms] if form == "model" else [a.hex(), b.hex(), c.hex()][:FORM_NVALS[form]]
    return " ".join(list(key) + [form] + vals)


def format_golden(entries, provenance):
    lines = [GOLDEN_MAGIC] + ["# " + p for p in provenance]
    lines += [format_entry(k, entries[k]) for k in sorted(entries, key=entry_order)]
    return "\n".join(lines) + "\n"


def entry_order(key):
    c, t, o, m = key
    return (c, DTYPES.index(t), OUTPUTS.index(o), METRICS.index(m))


# ---- the mutant kill table (conformance/tests/mutant_kills.txt) ----------------------------------
KILLS_MAGIC = "lcecheck-mutant-kills 1"


def load_kill_table(path):
    """{mutant name: [outputs]}: the outputs on which each catalogued mutant must fail in at least one
    case (test_mutants holds the default matrix to them, regeneration the candidate goldens)."""
    lines = read_text(path).split("\n")
    if not lines or lines[0] != KILLS_MAGIC:
        raise ToolError(f"{path}:1: first line must be '{KILLS_MAGIC}'")
    table = {}
    for no, line in enumerate(lines[1:], start=2):
        tok = line.split()
        if not tok or tok[0].startswith("#"):
            continue
        outs = tok[1].split(",") if len(tok) == 2 else []
        if not outs or any(o not in OUTPUTS for o in outs) or tok[0] in table:
            raise ToolError(f"{path}:{no}: malformed kill line: {line.strip()}")
        table[tok[0]] = outs
    return table

