"""Flamenco: farm/flamenco/abd_bake.js is valid JavaScript, and its compileJob, run under Node with
a stand-in for Flamenco's ``author`` API (tests/farm/flamenco_stand_in.js), makes one ``exec``
task per file of a three-file job; the command lines it makes, run as a Worker's ``exec`` runs
them (the executable and its arguments, no shell), bake two files and fail on the broken one.

A stand-in is not Flamenco: this does not show that Flamenco's own JavaScript engine and Manager
accept the script, nor that a Worker runs its commands (the parameter names ``exe`` and ``args``
are those the Flamenco Worker's ``exec`` command reads in its source,
``internal/worker/command_exec.go``; the manual's table calls the command ``exec`` too); it shows
the script's syntax, the tasks it authors, and that their commands bake.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from farm_jobs import NAMES, ROOT, run

SCRIPT = ROOT / "farm" / "flamenco" / "abd_bake.js"
STAND_IN = ROOT / "tests" / "farm" / "flamenco_stand_in.js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js (node) is not installed: the job type cannot be run")


def compile_job(**settings) -> subprocess.CompletedProcess:
    """The stand-in's run of compileJob on a job with these settings."""
    return subprocess.run([NODE, STAND_IN, SCRIPT, json.dumps(settings)], capture_output=True, text=True, timeout=60)


def test_job_type_script_is_valid_javascript():
    """node --check parses the script."""
    result = subprocess.run([NODE, "--check", SCRIPT], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_compile_job_makes_one_exec_task_per_file_and_its_commands_bake(shots, tmp_path):
    """Three files: three blender tasks, each one exec command of the batch bake, which bakes two of them."""
    out = tmp_path / "baked"
    files = [str(shots / name) for name in NAMES]
    result = compile_job(blendfiles=";".join(files[:2]) + "\r\n" + files[2], out_dir=str(out), python=sys.executable,
                         abd_joints=str(ROOT))
    assert result.returncode == 0, result.stdout + result.stderr
    compiled = json.loads(result.stdout)
    settings = {setting["key"]: setting for setting in compiled["job_type"]["settings"]}
    assert settings["device"]["default"] == "cpu" and settings["device"]["choices"] == ["cpu", "cupy", "libuipc"]
    assert all(setting["type"] in ("string", "int32", "float", "bool") for setting in settings.values())
    tasks = compiled["tasks"]
    assert [task["name"] for task in tasks] == [f"bake-{name}" for name in NAMES]
    assert {task["type"] for task in tasks} == {"blender"}
    batch = f"{ROOT}/abd_addon/batch.py"
    for task, file in zip(tasks, files):
        assert task["commands"] == [{"name": "exec", "parameters": {
            "exe": sys.executable, "args": ["-P", batch, file, "--out-dir", str(out), "--device", "cpu"]}}]

    statuses = {}
    for task in tasks:
        parameters = task["commands"][0]["parameters"]
        baked = run(parameters["exe"], *parameters["args"])
        statuses[task["name"]] = baked.returncode
        assert "Traceback" not in baked.stderr, baked.stderr[-2000:]
    assert statuses == {"bake-drawer.blend": 0, "bake-broken.blend": 1, "bake-door.blend": 0}
    assert sorted(path.name for path in out.iterdir()) == ["door.blend", "drawer.blend"]


@pytest.mark.parametrize("files, message", [(" ; ", "no .blend file"),
                                            ("a/x.blend;b/x.blend", "two .blend files are named x.blend")])
def test_compile_job_refuses_no_files_and_two_files_with_one_name(files, message):
    """compileJob throws, naming the problem, for no file or two files of one name."""
    result = compile_job(blendfiles=files, out_dir="/baked")
    assert result.returncode == 1 and message in json.loads(result.stdout)["error"]


def test_compile_job_keeps_spaces_in_file_names():
    """Flamenco's job trimmed the spaces around each name, so a file named "shot.blend " (a
    trailing space) baked "shot.blend", another file: names are taken exactly as written."""
    result = compile_job(blendfiles="/shots/shot.blend ; /shots/ lead.blend;;  \n/shots/x.blend", out_dir="/baked",
                         python="python", abd_joints="/abd")
    assert result.returncode == 0, result.stdout + result.stderr
    files = [task["commands"][0]["parameters"]["args"][2] for task in json.loads(result.stdout)["tasks"]]
    assert files == ["/shots/shot.blend ", " /shots/ lead.blend", "/shots/x.blend"]
