"""fuzz_bundle.py — `fuzz_campaign.py bundle-gpu` and `bundle`: fuzz targets built here (clang) and
packed, with what they need, into an ignored folder that another machine runs without clang (glue
only, no entry point)."""
import datetime
import platform
import re
import shutil
import sys
import zipfile
from pathlib import Path

from fuzz_common import GPU_BUNDLE_MARK, REPO, build_description, echo_run, head_commit, invocation


# What a GPU machine may lack, copied beside the fuzzer: MPFR and GMP (the device image has neither)
# into lib/, always on its library path; the C++ runtime into lib-fallback/, used there only when
# the machine's own is older than the one this build linked against (scripts/gpu_fuzz.sh decides).
BUNDLE_LIBS = ("libmpfr.so", "libgmp.so")
BUNDLE_FALLBACK_LIBS = ("libstdc++.so", "libgcc_s.so")


def ldd_paths(binary):
    """{soname: resolved path} of binary's shared libraries, from ldd."""
    proc = echo_run(["ldd", binary], capture_output=True, text=True, check=True)
    found = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found, proc.stdout


def cmd_bundle_gpu(args):
    """Configures and builds fuzz_subject with fused-cuda, then copies it and its libraries to
    args.out; checks here that the binary knows fused-cuda (exit 77 without a GPU, not "unknown subject")."""
    build, out = Path(args.build).resolve(), Path(args.out).resolve()
    env = {"CC": "clang"}
    echo_run(["cmake", "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DLCE_BUILD_FUZZERS=ON",
              "-DLCE_FUZZ_WITH_CUDA=ON", "-DLCE_BUILD_TESTS=OFF", "-DCMAKE_CUDA_HOST_COMPILER=g++",
              "-DCMAKE_CUDA_ARCHITECTURES=90"], env, check=True)
    cache = (build / "CMakeCache.txt").read_text(errors="replace")
    if not re.search(r"^CMAKE_CUDA_COMPILER:\w+=.*nvcc", cache, re.M):
        sys.exit("fuzz_campaign: the build found no CUDA compiler (nvcc): fused-cuda would be missing")
    echo_run(["cmake", "--build", build, "-j", str(args.jobs), "--target", "fuzz_subject"], check=True)
    fuzzer = build / "fuzz_subject"
    probe = echo_run([fuzzer, "-runs=0"], {"LCE_FUZZ_SUBJECT": "fused-cuda", "LCE_FUZZ_FINDINGS": str(build / "probe"),
                                           "LCE_GOLDEN_DIR": str(REPO / "golden")},
                     capture_output=True, text=True)
    if probe.returncode not in (0, 77) or "unknown subject" in probe.stderr:
        sys.exit(f"fuzz_campaign: {fuzzer} does not run fused-cuda (exit {probe.returncode}):\n{probe.stderr[-2000:]}")
    shutil.rmtree(out, ignore_errors=True)
    (out / "lib").mkdir(parents=True)
    (out / "lib-fallback").mkdir()
    shutil.copy2(fuzzer, out / "fuzz_subject")
    libs, ldd_text = ldd_paths(fuzzer)
    copied = []
    for soname, path in sorted(libs.items()):
        for prefixes, sub in ((BUNDLE_LIBS, "lib"), (BUNDLE_FALLBACK_LIBS, "lib-fallback")):
            if soname.startswith(prefixes):
                shutil.copy2(path, out / sub / soname)  # copy2 follows the symlink: the real file, named as loaded
                copied.append(f"{sub}/{soname}")
    missing = [p for p in BUNDLE_LIBS if not any(c.startswith("lib/" + p) for c in copied)]
    if missing:
        sys.exit(f"fuzz_campaign: ldd of {fuzzer} lists no {', '.join(missing)}")
    (out / "BUILD_INFO").write_text(
        f"{GPU_BUNDLE_MARK}, built {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"at commit {head_commit(REPO)} (working tree as it was then)\n"
        f"build: {build_description(build)}; CUDA objects nvcc sm_90, host compiler g++, no sanitizers\n"
        f"command: {invocation()}\n"
        f"copied: {' '.join(copied)}\n\nldd here:\n{ldd_text}")
    print(f"fuzz_campaign: {out} holds fuzz_subject and {' '.join(copied)}; here it exits "
          f"{probe.returncode} for fused-cuda ({'no GPU: skipped' if probe.returncode == 77 else 'GPU present'})")
    note_unignored(out)
    return 0


def note_unignored(out):
    """A bundle inside the checkout must be ignored by git: the device tool carries it then, instead of
    copying it as untracked files."""
    rel = "/" + out.relative_to(REPO).as_posix() + "/" if out.is_relative_to(REPO) else None
    if rel and echo_run(["git", "-C", REPO, "check-ignore", "-q", rel.strip("/")]).returncode != 0:
        print(f"fuzz_campaign: note: git does not ignore {rel}; ignore it (.gitignore or .git/info/exclude) so that "
              f"the device tool carries it (carry [\"{rel.strip('/')}\"]) instead of copying it as untracked files",
              file=sys.stderr)


# `bundle`: two builds of the CPU targets, MPFR and GMP linked statically (nothing to find at run time).
# bin-asan/ holds every C target under ASan + UBSan (the builds the campaigns record); bin-release/
# the slow judging targets without sanitizers, several times faster, for throughput.
STATIC_LIBS = [f"-D{name.upper()}_LIBRARY=/usr/lib/{platform.machine()}-linux-gnu/lib{name}.a" for name in ("mpfr", "gmp")]
RELEASE_TARGETS = ("fuzz_subject", "fuzz_tiers")
# The tree a bundle mirrors, so that fuzz_campaign.py finds options, corpora and goldens where it
# looks in a checkout (REPO/fuzz, REPO/golden) and the Python harness its modules (REPO/scripts).
BUNDLE_SCRIPTS = ("fuzz_campaign.py", "fuzz_common.py", "fuzz_targets.py", "fuzz_bundle.py",
                  "lcecheck_golden_files.py", "lcecheck_golden_fit.py")


def configure_and_build(build, flags, targets, jobs):
    echo_run(["cmake", "-S", REPO, "-B", build, "-DCMAKE_C_COMPILER=clang-14", "-DLCE_BUILD_FUZZERS=ON",
              "-DLCE_BUILD_TESTS=OFF", *STATIC_LIBS, *flags], check=True)
    echo_run(["cmake", "--build", build, "-j", str(jobs), "--target", *targets], check=True)


def copy_binaries(build, names, dest, what):
    """The binaries into dest, stripped, with a BUILD_INFO whose first line says how they were built;
    refuses one whose ldd names a library that is missing here or that is not the C runtime's. Stripped
    (a quarter smaller): the machines they go to have no llvm-symbolizer, so their sanitizer reports are
    module+offset either way, which llvm-symbolizer resolves here against the build's own binary."""
    dest.mkdir(parents=True)
    ldd_text = []
    for name in names:
        shutil.copy2(build / name, dest / name)
        echo_run(["strip", "--strip-all", dest / name], check=True)
        libs, text = ldd_paths(dest / name)
        foreign = [s for s in libs if not s.startswith(("libc.", "libm.", "libpthread.", "libdl.", "librt.",
                                                        "libgcc_s.", "libstdc++.", "ld-linux"))]
        if "not found" in text or foreign:
            sys.exit(f"fuzz_campaign: {dest / name} needs {', '.join(foreign) or 'a library not found'}:\n{text}")
        ldd_text.append(f"{name}:\n{text}")
    (dest / "BUILD_INFO").write_text(f"{build_description(build)}{what}\nunstripped, for llvm-symbolizer: {build}\n"
                                     f"\nldd here:\n" + "".join(ldd_text))


def bundle_atheris(site, dest):
    """atheris's modules and extensions (debug info stripped: 60 MB become about 3) from a site
    directory into dest, for `import atheris` with dest on PYTHONPATH."""
    (dest / "atheris").mkdir(parents=True)
    for f in sorted((site / "atheris").iterdir()):
        if f.suffix == ".so" or (f.suffix == ".py" and not f.stem.endswith("_test")):
            shutil.copy2(f, dest / "atheris" / f.name)
            if f.suffix == ".so":
                echo_run(["strip", "--strip-debug", dest / "atheris" / f.name], check=True)


def atheris_for(version, work, dest):
    """atheris (the version scripts/requirements.txt pins) for CPython `version` into dest: this
    interpreter's own installation, or a manylinux wheel pip downloads for another version."""
    pin = next(line.strip() for line in (REPO / "scripts" / "requirements.txt").read_text().splitlines()
               if line.startswith("atheris=="))
    if version == f"{sys.version_info.major}.{sys.version_info.minor}":
        import atheris  # noqa: F401 (where this interpreter has it)
        return bundle_atheris(Path(atheris.__file__).parent.parent, dest)
    wheels = work / f"wheels-{version}"
    echo_run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
              version, "--implementation", "cp", "--platform", "manylinux2014_x86_64", "--platform",
              "manylinux_2_17_x86_64", "-d", wheels, pin], check=True)
    site = work / f"site-{version}"
    shutil.rmtree(site, ignore_errors=True)
    with zipfile.ZipFile(next(wheels.glob("atheris-*.whl"))) as whl:
        whl.extractall(site, [n for n in whl.namelist() if n.startswith("atheris/")])
    bundle_atheris(site, dest)


def not_campaign_files(directory, names):
    """copytree's ignore for fuzz/: a campaign needs the corpora, .options, .dict and the Python
    harnesses, not the C sources, CMake files, READMEs or the tests."""
    if Path(directory).is_relative_to(REPO / "fuzz" / "corpus"):
        return []
    return [n for n in names if n == "tests" or (Path(directory, n).is_file()
                                                 and Path(n).suffix not in (".options", ".dict", ".py"))]


def cmd_bundle(args):
    """Builds the CPU targets twice (ASan + UBSan, and the slow ones without sanitizers) and packs them
    with the campaign script, the options, dictionaries, seed corpora, goldens and atheris into
    args.out, which `python3 scripts/fuzz_campaign.py run --target all --build bin-asan ...` runs from
    on a machine without clang or network."""
    root, out = Path(args.build_root).resolve(), Path(args.out).resolve()
    parsers = sorted(p.stem for p in (REPO / "fuzz" / "parsers").glob("fuzz_parse_*.c")
                     if (p.with_suffix(".options")).is_file())
    asan_targets = ["fuzz_subject", "fuzz_tiers", *parsers]
    if not args.release_only:
        configure_and_build(root / "build-bundle-asan", ["-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                            [*asan_targets, "fuzz_plugin_scripted"], args.jobs)
    configure_and_build(root / "build-bundle-release", ["-DCMAKE_BUILD_TYPE=Release",
                        "-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link", "-DLCE_FUZZING_ENGINE=-fsanitize=fuzzer"],
                        RELEASE_TARGETS, args.jobs)
    shutil.rmtree(out, ignore_errors=True)
    if not args.release_only:
        copy_binaries(root / "build-bundle-asan", asan_targets, out / "bin-asan", "")
        shutil.copy2(root / "build-bundle-asan" / "libfuzz_plugin_scripted.so", out / "bin-asan")  # fuzz_parse_plugin's
    copy_binaries(root / "build-bundle-release", RELEASE_TARGETS, out / "bin-release",
                  "\n(the judging targets without sanitizers, for throughput: findings are replayed under bin-asan)")
    (out / "scripts").mkdir()
    for name in BUNDLE_SCRIPTS + ("requirements.txt",):
        shutil.copy2(REPO / "scripts" / name, out / "scripts" / name)
    shutil.copytree(REPO / "golden", out / "golden", ignore=shutil.ignore_patterns("plots", "*.md", "CMakeLists.txt"))
    shutil.copytree(REPO / "fuzz", out / "fuzz", ignore=not_campaign_files)
    versions = [f"{sys.version_info.major}.{sys.version_info.minor}", *(args.python_version or ["3.12"])]
    for v in dict.fromkeys(versions) if not args.release_only else ():
        atheris_for(v, root / "build-bundle-python", out / "python" / ("cp" + v.replace(".", "")))
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    run_line = ("python3 scripts/fuzz_campaign.py run --target fuzz_subject --build bin-release --jobs N --seconds S "
                "--seed K" if args.release_only else
                "python3 scripts/fuzz_campaign.py run --target all --build bin-asan --jobs N --seconds S --deadline D "
                "--out results")
    (out / "BUNDLE_INFO").write_text(
        f"lcecheck CPU fuzz targets, built {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n"
        f"commit: {head_commit(REPO)} (working tree as it was then)\n"
        f"command: {invocation()}\n"
        + (f"bin-release only: {build_description(root / 'build-bundle-release')}\n" if args.release_only else
           f"bin-asan: {build_description(root / 'build-bundle-asan')}; bin-release: "
           f"{build_description(root / 'build-bundle-release')}; atheris for CPython {', '.join(dict.fromkeys(versions))}\n")
        + f"run: cd <this folder> && {run_line}\n")
    print(f"fuzz_campaign: {out}: {size / 2**20:.1f} MiB; run it with: cd {out} && {run_line}")
    note_unignored(out)
    return 0
