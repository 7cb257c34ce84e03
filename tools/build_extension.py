"""Build the Blender extension zip(s) of this repository and validate them.

Usage (from the repository root, with the project's venv)::

    .venv/bin/python tools/build_extension.py [--platform linux-x64 ...] [--output-dir dist]
                                              [--no-split] [--offline]

Steps:

1. ``pip download --only-binary=:all: --no-deps --python-version 3.11 --platform <tag>`` the pinned
   binary wheels (numba, llvmlite, scipy; lxml for the URDF importer) for every platform of the manifest,
   and once the pure-Python wheels (threadpoolctl; the URDF importer's yourdfpy, trimesh, six,
   pycollada, python-dateutil, tzdata), into ``wheels/`` (git-ignored, never committed). numpy is
   not bundled: Blender ships it. Wheels already there are reused.
2. Copy the extension's sources into ``build/extension/abd_joints`` and write a build copy of
   ``blender_manifest.toml`` that lists those wheels (``wheels = ["./wheels/<file>.whl", ...]``);
   the manifest in the repository stays free of machine-specific file lists.
3. Build with the ``blender_ext.py`` command line that ships in the ``bpy`` wheel (no Blender
   binary needed), one zip per platform (``--split-platforms``) into ``dist/``, and validate each
   zip with its ``validate`` subcommand.

Exit status 0 on success; non-zero with a message on stderr otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = "blender_manifest.toml"

#: Pinned versions (requirements.txt pins the same ones for the development venv).
#: Binary wheels: one per platform.
#: SciPy 1.15 is the newest that imports with NumPy 1.24.3, what Blender 4.2 (the manifest's
#: blender_version_min) ships; 1.16 and later need NumPy >= 1.25 (``numpy.exceptions``).
#: ipctk (contact, solver/contact.py) installs a top-level ``ipc`` folder next to its module.
WHEEL_REQUIREMENTS = ("numba==0.68.1", "llvmlite==0.50.0", "scipy==1.15.3", "lxml==6.1.3", "ipctk==1.6.1")
#: Pure-Python wheels (``py3-none-any``): one for every platform. threadpoolctl for the solver;
#: yourdfpy needs lxml, trimesh,
#: six and numpy (numpy comes with Blender); trimesh's core needs numpy only, its COLLADA (.dae)
#: loader pycollada, which needs python-dateutil (and that tzdata) and numpy.
PURE_WHEEL_REQUIREMENTS = (
    "threadpoolctl==3.8.0", "yourdfpy==0.0.60", "trimesh==5.2.0", "six==1.17.0",
    "pycollada==0.9.3", "python-dateutil==4.0.0", "tzdata==2026.6",
)

#: The newest macOS major version a bundled macOS wheel may require.
MACOS_NEWEST = 12
#: pip ``--platform`` tags per Blender platform name. pip matches a wheel against any of them.
PLATFORM_TAGS = {
    "linux-x64": ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"),
    "windows-x64": ("win_amd64",),
    # No tag above macOS 12 (MACOS_NEWEST): numba's and llvmlite's wheels need macOS 12, and given
    # macosx_14_0 pip picks SciPy's macOS 14 wheel (Apple Accelerate), which would not load on
    # macOS 12 or 13.
    "macos-arm64": ("macosx_12_0_arm64", "macosx_11_0_arm64"),
}

#: What goes into the build copy (the manifest's [build] paths_exclude_pattern filters it again).
SOURCE_PATHS = ("__init__.py", "abd_addon", "solver", "README.md", "LICENSE")


def blender_ext_cli() -> Path:
    """Path of ``blender_ext.py`` inside the installed ``bpy`` wheel (found without importing bpy)."""
    import importlib.util

    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: the bpy wheel is not installed in this Python (needed for blender_ext.py)")
    bpy_dir = Path(list(spec.submodule_search_locations)[0])
    found = sorted(bpy_dir.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not found:
        raise SystemExit(f"error: blender_ext.py not found under {bpy_dir}")
    return found[-1]


def manifest_platforms(manifest_text: str) -> list[str]:
    """The ``platforms = [...]`` list of a manifest's text."""
    match = re.search(r"^platforms\s*=\s*\[(.*?)\]", manifest_text, re.MULTILINE | re.DOTALL)
    if not match:
        return []
    return re.findall(r'"([^"]+)"', match.group(1))


def wheel_platform(filename: str) -> str | None:
    """The Blender platform name a wheel file is for: ``"any"`` for a pure-Python wheel, None when
    it matches none of ours."""
    tag = filename[: -len(".whl")].split("-")[-1]
    if tag == "any":
        return "any"
    if tag == "win_amd64":
        return "windows-x64"
    if "linux" in tag and tag.endswith("x86_64"):
        return "linux-x64"
    if tag.startswith("macosx") and (tag.endswith("arm64") or tag.endswith("universal2")):
        # macOS 12 at most, the floor numba's wheels set (see PLATFORM_TAGS), so that a newer
        # wheel left in wheels/ by an earlier build is never bundled.
        return "macos-arm64" if int(tag.split("_")[1]) <= MACOS_NEWEST else None
    return None


def _wheel_files(wheel_dir: Path, requirement: str, platform: str) -> list[Path]:
    """The wheels of ``requirement`` (``name==version``) in ``wheel_dir`` for ``platform`` (or "any")."""
    name, version = requirement.split("==")
    # A wheel's file name spells a "-" in the project name as "_" (PEP 427: python_dateutil-...).
    return [
        path
        for path in sorted(wheel_dir.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        if wheel_platform(path.name) == platform
    ]


def _download(requirement: str, platform: str, wheel_dir: Path, offline: bool) -> Path:
    """The wheel of ``requirement`` for ``platform`` (``"any"``: pure Python), downloaded if missing."""
    have = _wheel_files(wheel_dir, requirement, platform)
    if not have:
        if offline:
            raise SystemExit(f"error: {requirement} wheel for {platform} missing in {wheel_dir} (offline)")
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--only-binary=:all:", "--no-deps", "--python-version", "3.11",
            "--implementation", "cp", "--dest", str(wheel_dir), requirement,
        ]
        for tag in PLATFORM_TAGS.get(platform, ("any",)):
            command += ["--platform", tag]
        print(f"downloading {requirement} for {platform}", flush=True)
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode != 0:
            raise SystemExit(
                f"error: pip download {requirement} for {platform} failed:\n{completed.stderr.strip()}"
            )
        have = _wheel_files(wheel_dir, requirement, platform)
        if not have:
            raise SystemExit(f"error: pip download gave no {requirement} wheel for {platform}")
    return have[-1]


def download_wheels(platforms: list[str], wheel_dir: Path, offline: bool) -> list[Path]:
    """Make sure ``wheel_dir`` holds the binary wheels for each platform and the pure-Python
    wheels once; return them (pure wheels first)."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    for platform in platforms:
        if platform not in PLATFORM_TAGS:
            raise SystemExit(f"error: no wheel platform tags known for {platform!r}")
    result = [_download(requirement, "any", wheel_dir, offline) for requirement in PURE_WHEEL_REQUIREMENTS]
    for platform in platforms:
        result += [_download(requirement, platform, wheel_dir, offline) for requirement in WHEEL_REQUIREMENTS]
    return result


def manifest_with_wheels(manifest_text: str, wheels: list[Path], platforms: list[str]) -> str:
    """The manifest text with ``wheels = [...]`` listing ``wheels`` and ``platforms`` narrowed."""
    lines = ",\n".join(f'  "./wheels/{path.name}"' for path in wheels)
    block = f"wheels = [\n{lines},\n]\n"
    text = re.sub(r"^wheels\s*=\s*\[.*?\]\s*\n", "", manifest_text, flags=re.MULTILINE | re.DOTALL)
    platforms_line = "platforms = [" + ", ".join(f'"{p}"' for p in platforms) + "]"
    text = re.sub(r"^platforms\s*=\s*\[.*?\]", platforms_line, text, count=1, flags=re.MULTILINE | re.DOTALL)
    # Top-level keys must come before the first table ([permissions]).
    head, sep, tail = text.partition("\n[")
    return head.rstrip("\n") + "\n\n" + block + (sep + tail if sep else "")


def make_build_copy(build_dir: Path, wheels: list[Path], manifest_text: str) -> Path:
    """Copy the extension's sources and the wheels into ``build_dir/abd_joints``; return that folder."""
    source = build_dir / "abd_joints"
    if source.exists():
        shutil.rmtree(source)
    source.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
    for name in SOURCE_PATHS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        elif path.is_file():
            shutil.copy2(path, source / name)
    (source / "wheels").mkdir()
    for wheel in wheels:
        target = source / "wheels" / wheel.name
        try:
            os.link(wheel, target)
        except OSError:
            shutil.copy2(wheel, target)
    (source / MANIFEST).write_text(manifest_text, encoding="utf-8")
    return source


def run_cli(cli: Path, *args: str) -> None:
    """Run ``blender_ext.py`` with ``args``; exit with its message when it fails."""
    completed = subprocess.run([sys.executable, str(cli), *args], capture_output=True, text=True)
    output = (completed.stdout + completed.stderr).strip()
    if output:
        print(output, flush=True)
    if completed.returncode != 0 or "FATAL_ERROR" in output or "Error" in output:
        raise SystemExit(f"error: blender_ext.py {args[0]} failed (exit {completed.returncode})")


def build(platforms: list[str] | None, output_dir: Path, split: bool, offline: bool) -> list[Path]:
    """Download wheels, build and validate; return the paths of the zips written."""
    manifest_text = (ROOT / MANIFEST).read_text(encoding="utf-8")
    all_platforms = manifest_platforms(manifest_text)
    platforms = platforms or all_platforms
    unknown = sorted(set(platforms) - set(all_platforms))
    if unknown:
        raise SystemExit(f"error: platforms {unknown} are not declared in {MANIFEST}: {all_platforms}")
    wheels = download_wheels(platforms, ROOT / "wheels", offline)
    cli = blender_ext_cli()
    build_manifest = manifest_with_wheels(manifest_text, wheels, platforms)
    source = make_build_copy(ROOT / "build" / "extension", wheels, build_manifest)
    run_cli(cli, "validate", str(source))
    output_dir.mkdir(parents=True, exist_ok=True)
    before = {path: path.stat().st_mtime_ns for path in output_dir.glob("abd_joints-*.zip")}
    build_args = ["build", "--source-dir", str(source), "--output-dir", str(output_dir)]
    if split:
        build_args.append("--split-platforms")
    run_cli(cli, *build_args)
    zips = [
        path for path in sorted(output_dir.glob("abd_joints-*.zip"))
        if before.get(path) != path.stat().st_mtime_ns
    ]
    if not zips:
        raise SystemExit("error: the build wrote no zip")
    for path in zips:
        run_cli(cli, "validate", str(path))
        print(f"built and validated {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
              f"({path.stat().st_size / 2**20:.1f} MiB)", flush=True)
    return zips


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--platform", action="append", dest="platforms",
                        help="build for this platform only (repeatable; default: all in the manifest)")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "dist")
    parser.add_argument("--no-split", action="store_true", help="one zip with every platform's wheels")
    parser.add_argument("--offline", action="store_true", help="use wheels/ only; never download")
    args = parser.parse_args(argv)
    build(args.platforms, args.output_dir.resolve(), split=not args.no_split, offline=args.offline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
