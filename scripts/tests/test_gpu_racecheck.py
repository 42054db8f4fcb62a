"""scripts/gpu_racecheck.sh judged on made-up racecheck reports: a fake compute-sanitizer on PATH prints
a given report and exits with a given status, as the real tool does for a test binary."""
import os
import stat
import subprocess
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu_racecheck.sh")

CUBLAS = ("========= Error: Race reported between Write access at nvjet_sm90_tss_64x16_64x16_1x4_h_bx_splitK_NNT+0x2f00\n"
          "=========     and Write access at nvjet_sm90_tss_64x16_64x16_1x4_h_bx_splitK_NNT+0x2f80 [240 hazards]\n")
OURS = ("========= Error: Race reported between Write access at fc_chunk_stats_kernel(const float *, long)+0x1d0\n"
        "=========     and Read access at void fs_gemm_kernel<(int)1>(Params)+0x80 [3 hazards]\n")
# fused-sm90's kernels live in namespace lce_fs: the tool prints the qualified, demangled name.
OURS_NAMESPACED = ("========= Error: Race reported between Write access at void lce_fs::fs_gemm_kernel<lce_fs::fs_cfg, "
                   "(int)1>(T1::Params)+0x3c0\n"
                   "=========     and Read access at void lce_fs::fs_gemm_kernel<lce_fs::fs_cfg, (int)1>(T1::Params)+0x400 "
                   "[2 hazards]\n")
TOOL_FAILED = "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception.\n"


class GpuRacecheck(unittest.TestCase):
    def run_with(self, report, status):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "compute-sanitizer")
            with open(os.path.join(d, "report.in"), "w") as f:
                f.write(report)
            with open(fake, "w") as f:
                f.write(f'#!/bin/sh\ncat "{d}/report.in"\nexit {status}\n')
            os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
            env = dict(os.environ, PATH=d + os.pathsep + os.environ["PATH"])
            out = subprocess.run(["bash", SCRIPT, "./test_fused_cuda", os.path.join(d, "racecheck.txt")],
                                 env=env, capture_output=True, text=True, timeout=60)
            with open(os.path.join(d, "racecheck.txt")) as f:
                self.assertEqual(f.read(), report)  # the whole report is kept
            return out.returncode, out.stdout

    def test_clean(self):
        rc, out = self.run_with("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n", 0)
        self.assertEqual(rc, 0, out)

    def test_hazards_in_cublas_only_pass_and_are_listed(self):
        rc, out = self.run_with(CUBLAS, 99)
        self.assertEqual(rc, 0, out)
        self.assertIn("nvjet_sm90_tss_64x16_64x16_1x4_h_bx_splitK_NNT", out)

    def test_hazards_in_our_kernels_fail(self):
        rc, out = self.run_with(CUBLAS + OURS, 99)
        self.assertEqual(rc, 1, out)
        self.assertIn("fc_chunk_stats_kernel", out)
        self.assertIn("fs_gemm_kernel", out)

    def test_hazards_in_our_namespaced_kernels_fail(self):
        rc, out = self.run_with(CUBLAS + OURS_NAMESPACED, 99)
        self.assertEqual(rc, 1, out)
        self.assertIn("lce_fs::fs_gemm_kernel", out)

    def test_tool_error_fails(self):
        rc, out = self.run_with(TOOL_FAILED, 1)
        self.assertEqual(rc, 1, out)
        self.assertIn("Internal Sanitizer Error", out)

    def test_failing_test_fails(self):
        rc, out = self.run_with(CUBLAS, 1)
        self.assertEqual(rc, 1, out)
        self.assertIn("exit 1", out)


if __name__ == "__main__":
    unittest.main()
