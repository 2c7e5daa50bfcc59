"""Binder readiness: what repo2docker would build from this repository, printed without Docker."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dockerfile() -> str:
    exe = shutil.which("jupyter-repo2docker") or str(Path(__import__("sys").executable).parent / "jupyter-repo2docker")
    if not Path(exe).exists():
        pytest.skip("jupyter-repo2docker is not installed (make test installs it from requirements-ci.txt)")
    result = subprocess.run(
        [exe, "--no-build", "--debug", str(ROOT)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout + result.stderr


def test_repo2docker_builds_from_the_binder_folder(dockerfile):
    assert "Building conda environment" in dockerfile
    assert re.search(r'--file "binder/environment\.yml"', dockerfile), "the environment must come from binder/"
    assert 'file "environment.yml"' not in dockerfile


def test_the_binder_environment_names_every_package_with_a_cpu_only_torch(dockerfile):
    env = yaml.safe_load((ROOT / "binder" / "environment.yml").read_text())
    names = {re.split(r"[<>=!~ ]", d)[0].lower() for d in env["dependencies"] if isinstance(d, str)}
    pip = {re.split(r"[<>=!~ ]", d)[0].lower() for e in env["dependencies"] if isinstance(e, dict) for d in e["pip"]}
    for package in ("numpy", "matplotlib", "ipywidgets", "jupyterlab", "nbval", "pytorch-cpu"):
        assert package in names, f"binder/environment.yml lacks {package}"
    assert "entmax" in pip
    assert not names & {"pytorch", "pytorch-gpu", "torch"}, "Binder must get the CPU-only PyTorch"


def test_post_build_installs_course_utils(dockerfile):
    assert "./binder/postBuild" in dockerfile
    script = (ROOT / "binder" / "postBuild").read_text()
    assert re.search(r"pip install\b.*\s\.\s*$", script, re.MULTILINE), "postBuild must pip-install this package"


def test_the_readme_badge_opens_the_start_here_notebook_in_jupyterlab():
    readme = (ROOT / "README.md").read_text()
    badge = re.search(r"\(https://mybinder\.org/v2/gh/[^)]+\?urlpath=lab/tree/([^)]+)\)", readme)
    assert badge, "the README needs a Binder badge that opens JupyterLab"
    assert badge.group(1) == "notebooks/00_start_here.ipynb"
    assert (ROOT / badge.group(1)).is_file()


def test_binder_and_make_lab_give_jupyterlab_the_courses_settings_every_cell_in_the_page():
    """JupyterLab 4's default windowing ("contentVisibility") hides the cells out of view from the accessibility tree:
    a screen reader's lists of headings, tables and figures then reach a few of them (issue 37)."""
    import json

    settings = json.loads((ROOT / "binder" / "overrides.json").read_text())
    assert settings["@jupyterlab/notebook-extension:tracker"]["windowingMode"] == "none"
    post_build = (ROOT / "binder" / "postBuild").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "cp binder/overrides.json" in post_build and "share/jupyter/lab/settings" in post_build
    assert re.search(r"cp binder/overrides\.json \$\(VENV\)/share/jupyter/lab/settings/overrides\.json", makefile)
