"""pyproject.toml's ranges, constraints.txt's exact pins, and the conda and Binder files must agree."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
# pip name -> conda-forge name, where they differ.
CONDA_NAME = {"torch": "pytorch-cpu"}
CONDA_ONLY = {"python", "pip"}


def _requirements(lines: list[str]) -> dict[str, Requirement]:
    reqs = [Requirement(line.split("#")[0]) for line in lines if line.split("#")[0].strip()]
    return {r.name.lower(): r for r in reqs}


def pyproject_requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return _requirements(project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra])


def ci_requirements() -> dict[str, Requirement]:
    return _requirements((ROOT / "requirements-ci.txt").read_text().splitlines())


def pins() -> dict[str, str]:
    """constraints.txt: package -> its one exact version."""
    found = _requirements((ROOT / "constraints.txt").read_text().splitlines())
    exact = {name: str(r.specifier).removeprefix("==") for name, r in found.items() if str(r.specifier).startswith("==")}
    assert exact.keys() == found.keys(), "constraints.txt pins every package to one version (==)"
    return exact


def conda_requirements(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The conda packages and the pip packages (its `pip:` subsection) of an environment file, name -> spec."""
    env = yaml.safe_load(path.read_text())
    assert env["channels"] == ["conda-forge"], f"{path.name}: use conda-forge only"
    split = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$")
    conda = dict(split.match(d).groups() for d in env["dependencies"] if isinstance(d, str))
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    return conda, dict(split.match(r.split("#")[0]).groups() for r in (pip[0] if pip else []))


def test_constraints_pin_every_package_the_course_and_its_tests_name_within_their_ranges():
    wanted = {**pyproject_requirements(), **ci_requirements()}
    exact = pins()
    assert exact.keys() == wanted.keys(), "constraints.txt pins exactly the packages of pyproject.toml and requirements-ci.txt"
    for name, requirement in wanted.items():
        assert requirement.specifier.contains(Version(exact[name]), prereleases=True), f"{name}=={exact[name]} outside {requirement}"


@pytest.mark.parametrize("path", ["environment.yml", "binder/environment.yml"])
def test_conda_files_list_the_same_packages_as_pyproject_at_the_pinned_versions(path):
    conda, pip = conda_requirements(ROOT / path)
    exact = pins()
    expected_conda = {CONDA_NAME.get(n, n): f"={exact[n]}" for n in pyproject_requirements() if n not in pip}
    assert {name: spec for name, spec in conda.items() if name not in CONDA_ONLY} == expected_conda
    assert pip == {n: f"=={exact[n]}" for n in pip}, "packages installed by pip are pinned as in constraints.txt too"
    assert "pip" in conda, "list pip itself when the file has a pip: section"


@pytest.mark.parametrize("path", ["environment.yml", "binder/environment.yml"])
def test_conda_files_use_the_cpu_only_torch(path):
    names, pip = conda_requirements(ROOT / path)
    assert "torch" not in pip
    assert "pytorch-cpu" in names and "pytorch" not in names and "pytorch-gpu" not in names


def test_the_environments_pin_one_torch_and_the_package_accepts_a_range():
    # In the course's environments, a range or no pin makes pip pull the CUDA build and several GB of nvidia-*
    # packages; tools/install_torch.py installs the pin as the CPU build. The package itself takes what is there.
    assert pins()["torch"] == "2.13.0"
    assert not str(pyproject_requirements()["torch"].specifier).startswith("==")


def test_this_environment_holds_the_pinned_versions():
    exact = pins()
    installed = {name: metadata.version(name) for name in exact}
    assert {n: v.split("+")[0] for n, v in installed.items()} == exact


def test_installing_the_course_where_torch_is_installed_keeps_that_torch(tmp_path):
    # As a learner on Colab or a lab server would: pip install of the package into an environment that has
    # torch already. pip's own resolver, asked what it would do (no index needed: everything is there).
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation",
                           "--quiet", "--report", str(report), "-e", str(ROOT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    installs = [item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]]
    assert installs == ["softmax-attention-course"], f"pip would also install {installs}"


def test_no_nvidia_package_is_installed():
    nvidia = sorted(d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"].lower().startswith("nvidia"))
    assert nvidia == []


def test_installed_torch_is_the_cpu_build():
    import torch

    assert torch.__version__.startswith(pins()["torch"])
    assert torch.version.cuda is None


def test_binder_post_build_installs_course_utils():
    script = (ROOT / "binder" / "postBuild").read_text()
    assert re.search(r"pip install .*(-e )?\.\s*$", script, re.MULTILINE)
    assert (ROOT / "binder" / "postBuild").stat().st_mode & 0o111, "postBuild must be executable"


def test_course_utils_is_installed_from_this_checkout():
    import course_utils

    assert Path(course_utils.__file__).resolve().parent == ROOT / "course_utils"


def test_setup_names_the_same_tested_torch_as_the_pin():
    from course_utils.reproducibility import TESTED_TORCH

    assert ".".join(map(str, TESTED_TORCH)) == ".".join(pins()["torch"].split(".")[:2])
    assert str(pyproject_requirements()["torch"].specifier) == ">=" + ".".join(map(str, TESTED_TORCH))


def _oldest():
    import importlib.util

    spec = importlib.util.spec_from_file_location("oldest", ROOT / "tools" / "oldest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_oldest_installs_each_lower_bound_of_the_learners_set(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\ndependencies = ["numpy>=2.0", "torch>=2.13"]\n'
        '[project.optional-dependencies]\nlab = ["ipykernel>=6.29,<7"]\ntest = ["pytest>=8"]\n')
    assert _oldest().lowest_requirements(tmp_path / "pyproject.toml") == ["numpy==2.0", "ipykernel==6.29"]
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["numpy"]\n[project.optional-dependencies]\nlab = []\n')
    with pytest.raises(ValueError, match="'numpy' has no lower bound"):
        _oldest().lowest_requirements(tmp_path / "pyproject.toml")
    names = {line.split("==")[0] for line in _oldest().lowest_requirements()}
    assert names == {n for n in pyproject_requirements() if n != "torch"} - {
        n for extra in ("test",) for n in _requirements(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra])}
