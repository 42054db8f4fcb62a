"""scripts/gpu_detached.sh and the split wheels of scripts/subjects/site_wheels.sh, on this machine: a detached
command outlives the call that started it, a later call brings a file into its tree and collects its output and
exit status; a wheel split into parts installs only once every part is there."""
import base64
import hashlib
import os
import signal
import subprocess
import tarfile
import tempfile
import time
import unittest
import zipfile

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DETACHED = os.path.join(SCRIPTS, "gpu_detached.sh")
SITE_WHEELS = os.path.join(SCRIPTS, "subjects", "site_wheels.sh")

# Waits for a file that only a later `take` brings, copies it to OUT, exits 3.
WAITER = 'until [ -f later/part ]; do sleep 0.2; done; cat later/part > "$OUT/got"; echo finished; exit 3'


class GpuDetached(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.src = os.path.join(self.tmp.name, "src")
        os.makedirs(os.path.join(self.src, "later"))
        with open(os.path.join(self.src, "first.txt"), "w") as f:
            f.write("carried by the first call\n")
        os.makedirs(os.path.join(self.src, "build-gpu"))  # not copied: the command builds its own
        self.env = dict(os.environ, LCE_DETACHED_ROOT=os.path.join(self.tmp.name, "root"),
                        LCE_DETACHED_SOURCE=self.src, OUT=os.path.join(self.tmp.name, "out"))

    def tearDown(self):
        # Only this test's detached commands (another copy of this test may run beside it): each runs in a
        # session of its own, led by the pid it recorded.
        root = os.path.join(self.tmp.name, "root")
        for name in os.listdir(root) if os.path.isdir(root) else []:
            try:
                with open(os.path.join(root, name, "pid")) as f:
                    os.killpg(int(f.read()), signal.SIGTERM)
            except (OSError, ValueError):
                pass  # ended, or never started
        self.tmp.cleanup()

    def run_script(self, *args):
        p = subprocess.run(["bash", DETACHED, *args], env=self.env, capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    def test_outlives_the_call_takes_a_later_file_and_collects(self):
        rc, out = self.run_script("start", "--limit", "1", "--", "bash", "-c", WAITER)
        self.assertEqual(rc, 124, out)  # still running when the call's wait ends
        self.assertIn("running for", out)
        tree = os.path.join(self.tmp.name, "root", "run", "tree")
        self.assertTrue(os.path.isfile(os.path.join(tree, "first.txt")), out)
        self.assertFalse(os.path.exists(os.path.join(tree, "build-gpu")), out)
        rc, out = self.run_script("status")
        self.assertEqual(rc, 0, out)
        self.assertIn("running for", out)
        with open(os.path.join(self.src, "later", "part"), "w") as f:
            f.write("carried by a later call\n")
        rc, out = self.run_script("take", "later/part")
        self.assertEqual(rc, 0, out)
        rc, out = self.run_script("wait", "--limit", "30")
        self.assertEqual(rc, 3, out)  # the command's own exit status
        self.assertIn("exited with status 3", out)
        self.assertIn("finished", out)  # the log's tail
        with tarfile.open(os.path.join(self.tmp.name, "out", "run.tar")) as t:
            self.assertIn("log", t.getnames())
            self.assertEqual(t.extractfile("out/got").read(), b"carried by a later call\n")

    def test_refusals(self):
        for args, say in ((("launch",), "unknown verb 'launch'"),
                          (("start", "--"), "start: no command"),
                          (("wait",), "run was never started here"),
                          (("take", "nosuch"), "take: run was never started here"),
                          (("start", "--name", "../x", "--", "true"), "--name '../x'"),
                          (("wait", "--limit", "soon"), "--limit 'soon' is not a number")):
            rc, out = self.run_script(*args)
            self.assertEqual(rc, 2, (args, out))
            self.assertIn(say, out, args)
        rc, out = self.run_script("start", "--limit", "0", "--", "bash", "-c", WAITER)
        self.assertEqual(rc, 124, out)
        rc, out = self.run_script("start", "--", "true")
        self.assertEqual(rc, 2, out)
        self.assertIn("start: run is running since", out)
        rc, out = self.run_script("take", "later/none")
        self.assertEqual(rc, 2, out)
        self.assertIn("take: later/none does not exist", out)


def tiny_wheel(path):
    """A valid wheel of one module, `tinypkg`, for pip --no-index --target."""
    files = {"tinypkg/__init__.py": b"VALUE = 42\n",
             "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
             "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tinypkg-1.0.dist-info/RECORD,,")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("tinypkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")


class SplitWheels(unittest.TestCase):
    def site_wheels(self, root, site, wait_s=0):
        script = f'ROOT="{root}"; . "{SITE_WHEELS}"; site_wheels "{site}" 1; echo "rc=$?"'
        p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, LCE_WHEEL_WAIT_S=str(wait_s)))
        return p.stdout + p.stderr

    def test_installed_only_from_every_part(self):
        with tempfile.TemporaryDirectory() as d:
            folder = os.path.join(d, ".whl", "big")
            os.makedirs(folder)
            whl = os.path.join(folder, "tinypkg-1.0-py3-none-any.whl")
            tiny_wheel(whl)
            p = subprocess.run(["bash", "-c", f'. "{SITE_WHEELS}"; split_wheel "{whl}" 300'], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            os.unlink(whl)
            parts = sorted(f for f in os.listdir(folder) if ".part-" in f)
            self.assertGreaterEqual(len(parts), 2, parts)
            last = os.path.join(folder, parts[-1])
            os.rename(last, last + ".later")  # not carried yet
            site = os.path.join(d, "site")
            start = time.time()
            out = self.site_wheels(d, site, wait_s=6)
            self.assertGreaterEqual(time.time() - start, 5, out)  # it waited for the missing part
            self.assertIn("tinypkg-1.0-py3-none-any.whl left out", out)
            self.assertIn("a part missing or cut short", out)
            self.assertIn("rc=0", out)
            self.assertFalse(os.path.isdir(os.path.join(site, "tinypkg")), out)
            os.rename(last + ".later", last)
            out = self.site_wheels(d, site)
            self.assertIn("joined from its parts", out)
            self.assertIn("rc=0", out)
            self.assertTrue(os.path.isfile(os.path.join(site, "tinypkg", "__init__.py")), out)


if __name__ == "__main__":
    unittest.main()
