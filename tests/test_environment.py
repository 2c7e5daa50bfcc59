"""pyproject.toml is the single source of truth; the conda and Binder files must agree with it."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# pip name -> conda-forge name, where they differ.
CONDA_NAME = {"torch": "pytorch-cpu"}
CONDA_ONLY = {"python", "pip"}
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$")


def _split(requirement: str) -> tuple[str, str]:
    name, spec = REQUIREMENT.match(requirement).groups()
    return name.lower(), spec.replace(" ", "")


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return dict(_split(r) for r in reqs)


def conda_requirements(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The conda packages and the pip packages (its `pip:` subsection) of an environment file."""
    env = yaml.safe_load(path.read_text())
    assert env["channels"] == ["conda-forge"], f"{path.name}: use conda-forge only"
    conda = dict(_split(d) for d in env["dependencies"] if isinstance(d, str))
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    return conda, dict(_split(r) for r in (pip[0] if pip else []))


def _conda_spec(pip_spec: str) -> str:
    return pip_spec.replace("==", "=")


@pytest.mark.parametrize("path", ["environment.yml", "binder/environment.yml"])
def test_conda_files_list_the_same_packages_and_versions_as_pyproject(path):
    conda, pip = conda_requirements(ROOT / path)
    wanted = pyproject_requirements()
    expected_conda = {CONDA_NAME.get(n, n): _conda_spec(spec) for n, spec in wanted.items() if n not in pip}
    got_conda = {name: spec for name, spec in conda.items() if name not in CONDA_ONLY}
    assert got_conda == expected_conda
    assert pip == {n: wanted[n] for n in pip}, "packages installed by pip must match pyproject.toml too"
    assert "pip" in conda, "list pip itself when the file has a pip: section"


@pytest.mark.parametrize("path", ["environment.yml", "binder/environment.yml"])
def test_conda_files_use_the_cpu_only_torch(path):
    names, pip = conda_requirements(ROOT / path)
    assert "torch" not in pip
    assert "pytorch-cpu" in names and "pytorch" not in names and "pytorch-gpu" not in names


def test_torch_is_pinned_to_one_exact_release():
    # A range or no pin makes pip pull the CUDA build and several GB of nvidia-* packages.
    assert pyproject_requirements()["torch"] == "==2.13.0"


def test_no_nvidia_package_is_installed():
    nvidia = sorted(d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"].lower().startswith("nvidia"))
    assert nvidia == []


def test_installed_torch_is_the_cpu_build():
    import torch

    assert torch.__version__.startswith("2.13.0")
    assert torch.version.cuda is None


def test_binder_post_build_installs_course_utils():
    script = (ROOT / "binder" / "postBuild").read_text()
    assert re.search(r"pip install .*(-e )?\.\s*$", script, re.MULTILINE)
    assert (ROOT / "binder" / "postBuild").stat().st_mode & 0o111, "postBuild must be executable"


def test_course_utils_is_installed_from_this_checkout():
    import course_utils

    assert Path(course_utils.__file__).resolve().parent == ROOT / "course_utils"
