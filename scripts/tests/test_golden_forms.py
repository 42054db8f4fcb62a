"""test_golden_forms.py — the bound forms that let a golden fitted on the default matrix judge every larger
class (golden/policy.txt, "The bound forms"): rndu where the reference has no rnd, entries derived where no
sample defines them, and a derived term added after the fit. Run: python3 -m unittest discover -s scripts/tests"""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.dont_write_bytecode = True
import lcecheck_golden  # noqa: E402
import lcecheck_golden_fit  # noqa: E402
from test_lcecheck_golden import CLASS, POLICY, case, measurement  # noqa: E402


class FormsTest(unittest.TestCase):
    def test_rndu_stands_for_rnd_where_the_reference_has_none(self):
        # Tier 2 reports no rnd (0, and acc 0 beside it): rnd's bound u/2 of the GEMMs' d_logit format
        # takes its place for the gradients; where rnd is measured (acc > 0) or r is 0 (neff 0), 0.
        bf16 = "bf16.untied.tp1.n4096.h4096.v32000.vp32000.vc4096.mean.ign5.fresh.normal.s1"
        tier2 = {"inner": 4096, "cond": 153.0, "neff": 5.4e6, "rnd": 0, "acc": 0, "gsc": 6e-8}
        self.assertEqual(lcecheck_golden.output_scales(bf16, "d_weight", tier2)["rndu"], 2.0**-9)
        self.assertEqual(lcecheck_golden.output_scales(bf16, "lse", tier2)["rndu"], 0.0)
        self.assertEqual(lcecheck_golden.output_scales(bf16, "d_hidden", dict(tier2, neff=0))["rndu"], 0.0)
        self.assertEqual(lcecheck_golden.output_scales(bf16, "d_weight", dict(tier2, rnd=1e-5, acc=2e-9))["rndu"], 0.0)
        tf32 = "fp32.tied.tp2.n256.h1024.v16000.vp16128.vc4096.mean.ign10.tf32.fresh.normal.s9108"
        self.assertEqual(lcecheck_golden.output_scales(tf32, "d_hidden", tier2)["rndu"], 2.0**-12)
        # lcecheck reports the term since it exists: its value is taken as it is
        self.assertEqual(lcecheck_golden.output_scales(bf16, "d_weight", dict(tier2, rndu=0))["rndu"], 0.0)
        entry = ("model", 0.0, 0.0, 0.0, (("cond", 0.0), ("rnd", 1.0), ("rndu", 1.0)))
        self.assertEqual(lcecheck_golden.bound_at(entry, lcecheck_golden.output_scales(bf16, "d_weight", tier2)),
                         2.0**-9)

    def test_pertokn_is_measured_or_u_under_none(self):
        # pertokn (gradients' relerr): as lcecheck reports it; from files made before it, u of the GEMMs'
        # d_logit format under reduction none, as pertok; 0 under mean and for the forward outputs.
        none = "bf16.untied.tp1.n4.h39.v344.vp431.vc344.none.ign25.tc1.zl975.sc7.cw.fresh.flat.s2632683681882160903"
        o = {"inner": 4, "cond": 1.02, "neff": 38.0, "rnd": 1.9e-4, "acc": 1e-9, "pertok": 3.95e-3}
        self.assertEqual(lcecheck_golden.output_scales(none, "d_weight", dict(o, pertokn=3.95e-3))["pertokn"], 3.95e-3)
        self.assertEqual(lcecheck_golden.output_scales(none, "d_weight", o)["pertokn"], 2.0**-8)
        self.assertEqual(lcecheck_golden.output_scales(none, "lse", dict(o, pertokn=1.0))["pertokn"], 0.0)
        mean = "bf16.untied.tp1.n16.h32.v300.vp384.vc8.mean.ign25.prior.mixed.s1"
        self.assertEqual(lcecheck_golden.output_scales(mean, "d_hidden", o)["pertokn"], 0.0)
        entry = ("model", 0.0, 0.0, 0.0, (("cond", 0.0), ("pertokn", 0.5)))
        self.assertEqual(lcecheck_golden.bound_at(entry, lcecheck_golden.output_scales(none, "d_weight", o)), 2.0**-9)

    def test_a_bound_zero_before_and_after_is_unchanged(self):
        # A model whose terms all vanish at the measured points (tf32 lse bias: only ms*cond/sqrtn, ms 0)
        # bounds 0 there in the old file and the new; rerunning a file's own command loosens nothing. The
        # offline judge reports 0 of a bound 0 as 0%, as lcecheck does.
        self.assertEqual(lcecheck_golden.bound_ratio(0.0, 0.0), 1.0)
        self.assertEqual(lcecheck_golden.bound_ratio(1e-7, 0.0), float("inf"))
        self.assertEqual(lcecheck_golden.bound_ratio(2e-7, 1e-7), 2.0)
        self.assertEqual(lcecheck_golden.budget_pct(0.0, 0.0), 0.0)
        self.assertEqual(lcecheck_golden.budget_pct(1e-9, 0.0), float("inf"))
        self.assertEqual(lcecheck_golden.budget_pct(1e-7, 2e-7), 50.0)

    def test_rndn_is_measured_or_rnd(self):
        # rndn (gradients' relerr): ||rnd - r|| / ||r|| as lcecheck reports it; from files made before it, rnd
        # (which it is never below); 0 for the forward outputs.
        c = "fp32.tied.tp3.n22.h20.v257.vp258.vc256.sum.ign0.tc2.zl470.sc43.cw.tf32.fresh.flat.s12638227882284274836"
        o = {"inner": 22, "cond": 1.1, "neff": 50.0, "rnd": 6e-5, "acc": 1e-9}
        self.assertEqual(lcecheck_golden.output_scales(c, "d_weight", dict(o, rndn=2.5e-4))["rndn"], 2.5e-4)
        self.assertEqual(lcecheck_golden.output_scales(c, "d_weight", o)["rndn"], 6e-5)
        self.assertEqual(lcecheck_golden.output_scales(c, "lse", dict(o, rndn=1.0))["rndn"], 0.0)
        entry = ("model", 0.0, 0.0, 0.0, (("cond", 0.0), ("rndn", 1.0)))
        self.assertEqual(lcecheck_golden.bound_at(entry, lcecheck_golden.output_scales(c, "d_weight", dict(o, rndn=2.5e-4))),
                         2.5e-4)

    def test_tensor_core_terms_scale_with_the_metrics_alignment_ratio(self):
        # tcx per metric as lcecheck reports it (lce_metric_values.tcx): the terms k, h and cond*h times the
        # bounded metric's ratio, at least 1; the maxscaled bound that ms*cond/sqrtn scales with at maxscaled's
        # own ratio (lce_bound_scales_at); 1 where not reported or without a metric.
        c = "fp16.tied.tp1.n12.h2.v1.vp12.vc1.none.ign0.sc10.fresh.hard.s890059061"
        o = {"inner": 2, "cond": 2.0, "neff": 12.0, "tcx": {"relerr": 1.5, "bias": 0.5, "maxscaled": 37.0}}
        rel = lcecheck_golden.output_scales(c, "lse", o, "relerr")
        self.assertEqual((rel["tcx"], rel["tcx_ms"]), (1.5, 37.0))
        self.assertEqual(lcecheck_golden.output_scales(c, "lse", o, "bias")["tcx"], 1.0)
        self.assertEqual(lcecheck_golden.output_scales(c, "lse", o)["tcx"], 1.0)
        self.assertEqual(lcecheck_golden.output_scales(c, "lse", {"inner": 2}, "relerr")["tcx"], 1.0)
        ts = lcecheck_golden_fit.term_scale
        self.assertEqual((ts("k", rel), ts("h", rel), ts("cond*h", rel), ts("cond", rel)),
                         (2.0 * 1.5, rel["h"] * 1.5, 2.0 * rel["h"] * 1.5, 2.0))
        ms_entry = ("model", 0.0, 0.0, 0.0, (("1", 1e-7), ("h", 1e-9)))
        entries = {("fused-host-sm90", "fp16", "lse", "maxscaled"): ms_entry}
        lcecheck_golden.with_ms(entries, ("fused-host-sm90", "fp16", "lse", "relerr"), rel)
        self.assertEqual(rel["ms"], 1e-7 + 1e-9 * (rel["h"] * 37.0))

    def test_rnds_is_measured_or_rnd_plus_outr(self):
        # rnds (gradients' bias reference) and outv as lcecheck reports them; from files made before them,
        # rnd + outr (never below rnds) and 0; 0 for the forward outputs.
        c = "bf16.untied.tp1.n16.h32.v300.vp384.vc384.sum.ign0.prior.flat.s1003"
        o = {"inner": 16, "cond": 1.8, "neff": 50.0, "rnd": 5.8e-4, "outr": 1.8e-3, "acc": 1e-9}
        new = dict(o, rnds=3.7e-4, outv=1.4e-5)
        self.assertEqual(lcecheck_golden.output_scales(c, "d_hidden", new)["rnds"], 3.7e-4)
        self.assertEqual(lcecheck_golden.output_scales(c, "d_hidden", new)["outv"], 1.4e-5)
        self.assertEqual(lcecheck_golden.output_scales(c, "d_hidden", o)["rnds"], 5.8e-4 + 1.8e-3)
        self.assertEqual(lcecheck_golden.output_scales(c, "d_hidden", o)["outv"], 0.0)
        self.assertEqual(lcecheck_golden.output_scales(c, "lse", new)["rnds"], 0.0)
        entry = ("model", 0.0, 0.0, 0.0, (("rnds", 1.0), ("outv", 4.0)))
        self.assertEqual(lcecheck_golden.bound_at(entry, lcecheck_golden.output_scales(c, "d_hidden", new)),
                         3.7e-4 + 4 * 1.4e-5)

    def test_u_in_is_the_input_dtypes_unit_roundoff(self):
        # u is the d_logit format's (tf32 for tf32 cases), u_in the input dtype's (fp32 for tf32 cases): the
        # gradients' maxscaled floor u + u_in is 2u where the output is in the dtype, u_tf32 + u_fp32 for tf32.
        import lcecheck_golden_files as files
        for dtype, want in (("bf16", 2.0**-7), ("fp16", 2.0**-10), ("fp32", 2.0**-23), ("tf32", 2.0**-11 + 2.0**-24)):
            names = files.case_names(dtype, {"N": 1.0, "H": 1.0, "V": 1.0}, 1)
            self.assertEqual(names["u"] + names["u_in"], want, dtype)

    def test_entries_no_sample_defines_are_derived_from_the_policy_or_refused(self):
        # lse's bias and ulpfrac need 64 effective tokens; a matrix of few-token cases defines neither,
        # and a larger matrix judges both: bias takes relerr's entry (|bias| <= relerr), ulpfrac the
        # fixed whole output; loss's bias and ulpfrac (one element) are never judged and never derived.
        few = case("bf16.untied.tp1.n16.h32.v300.vp384.vc8.mean.ign25.prior.mixed.s1", "bf16")
        few["outputs"]["lse"].update(bias=None, ulpfrac=None)
        few["outputs"]["loss"].update(bias=None, ulpfrac=None)
        samples = lcecheck_golden.collect_measurements(measurement([few]))
        pol = lcecheck_golden.load_policy(POLICY)
        entries, _, _ = lcecheck_golden.propose(pol, samples)
        self.assertEqual(entries[(CLASS, "bf16", "lse", "bias")], entries[(CLASS, "bf16", "lse", "relerr")])
        self.assertEqual(entries[(CLASS, "bf16", "lse", "ulpfrac")], ("model", 0.0, 0.0, 0.0, (("1", 1.0),)))
        self.assertNotIn((CLASS, "bf16", "loss", "bias"), entries)
        self.assertEqual(len(entries), len(lcecheck_golden.JUDGED))
        del pol["unmeasured"][("lse", "bias")]
        with self.assertRaisesRegex(lcecheck_golden.Refusal, "fused-host bf16 lse bias: no sample"):
            lcecheck_golden.propose(pol, samples)

    def test_an_added_term_does_not_lower_the_fitted_ones(self):
        # add.rsum: rsum's coefficient is the policy's (1 at margin 2), added after the fit, so the constant
        # holds margin x every value by itself; fix.rsum subtracts rsum from the targets first.
        cid = "fp32.untied.tp2.n8.h32.v2048.vp2048.vc1.none.ign0.prior.flat.s9518"
        key = ("fused-host", "fp32", "d_hidden", "maxscaled")
        samples = {key: [{"id": cid, "value": 28.1 * 2.0**-24, "k": 2048, "cond": 1.0, "shape": {"N": 8, "H": 32, "V": 2048},
                          "scales": lcecheck_golden_fit.scales_of(cid, 1.0, 1.0, 2048, rsum=18.8 * 2.0**-24)}]}
        others = "".join(f"bound d_hidden {m} model terms=1 margin=1 fix.1=1\n" for m in ("relerr", "bias", "ulpfrac"))
        for how, const in (("add", 2 * 28.1), ("fix", 2 * 28.1 - 18.8)):
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "policy.txt")
                with open(p, "w") as f:
                    f.write(f"lcecheck-policy 1\nbound d_hidden maxscaled model terms=1,rsum margin=2 {how}.rsum=1/2\n"
                            + others + "ceiling * d_hidden maxscaled 1\n")
                pol = lcecheck_golden.load_policy(p)
            terms = dict(lcecheck_golden.propose(pol, samples)[0][key][4])
            self.assertAlmostEqual(terms["1"] / 2.0**-24, const, delta=1e-9, msg=how)
            self.assertEqual(terms["rsum"], 1.0)


if __name__ == "__main__":
    unittest.main()
