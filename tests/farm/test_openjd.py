"""Open Job Description: ``openjd run`` of farm/openjd/abd_bake.template.yaml on two example files
bakes them (one task each, after one warm-up) into OutDir, with the keys of the one-process batch."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from conftest import ROOT, assert_same_keys, baked_keys, run

TEMPLATE = ROOT / "farm" / "openjd" / "abd_bake.template.yaml"
OPENJD = Path(sys.executable).with_name("openjd")


def openjd(*args) -> "subprocess.CompletedProcess":  # noqa: F821
    return run(OPENJD if OPENJD.exists() else shutil.which("openjd"), *args)


def test_template_bakes_each_file_in_a_task(shots, one_process, tmp_path):
    assert openjd("check", TEMPLATE).returncode == 0
    out = tmp_path / "baked"
    parameters = {"BlendFiles": [str(shots / "drawer.blend"), str(shots / "door.blend")], "OutDir": str(out),
                  "Device": "cpu", "AbdJoints": str(ROOT), "Python": sys.executable}
    result = openjd("run", TEMPLATE, "--job-param", json.dumps(parameters))
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert log.count("warm_up=done") == 1 and "Chunks run: 2" in log, log[-3000:]
    assert f"out={out / 'drawer.blend'}" in log and f"out={out / 'door.blend'}" in log
    assert_same_keys(baked_keys(out / "drawer.blend", out / "door.blend"), one_process)


def test_a_broken_file_fails_its_task(shots, tmp_path):
    parameters = {"BlendFiles": [str(shots / "broken.blend")], "OutDir": str(tmp_path / "baked"),
                  "AbdJoints": str(ROOT), "Python": sys.executable}
    result = openjd("run", TEMPLATE, "--job-param", json.dumps(parameters))
    log = result.stdout + result.stderr
    assert result.returncode != 0 and "cannot open" in log, log[-3000:]
    assert not (tmp_path / "baked" / "broken.blend").exists()
