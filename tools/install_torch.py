"""Install the pinned PyTorch as a CPU build, on any platform, without a flag.

    python tools/install_torch.py          # run by `make install` with .venv's python

pip's default index serves the CUDA build of ``torch==X`` on Linux x86_64, with
several GB of ``nvidia-*`` packages; on macOS, Windows and machines that keep a
CPU wheel of their own it serves a CPU build. So this script first asks pip
what it *would* install (``pip install --dry-run --report``). If the answer
pulls any ``nvidia-*`` package or a ``+cu`` build, it installs from PyTorch's
CPU wheel index instead; otherwise it installs as pip would.

No step can hang on an unreachable index: every pip call has a socket timeout
and few retries, and the dry run a hard time limit. If the default index cannot
be asked, the CPU wheel index is tried; if that fails too, the script stops
with a message that says what to check.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Seconds pip waits on one socket before it gives up, and how often it retries.
NETWORK = ("--timeout", "20", "--retries", "2")
DRY_RUN_LIMIT = 300  # seconds: the dry run only reads metadata (about 35 s for the CUDA build)


def pinned_requirement(constraints: Path = ROOT / "constraints.txt") -> str:
    """The exact ``torch==X`` pin of the course's environments (constraints.txt)."""
    match = re.search(r"^(torch==[0-9][0-9A-Za-z.+]*)\s*$", constraints.read_text(), re.MULTILINE)
    if not match:
        raise SystemExit(f"{constraints.name} must pin torch exactly, as \"torch==X\"")
    return match.group(1)


def pulls_cuda(report: dict[str, Any]) -> list[str]:
    """The packages of a ``pip install --report`` that make it a CUDA install (empty for a CPU build).

    A CUDA install pulls ``nvidia-*`` packages, or a torch whose local version
    label is ``+cuNNN`` / ``+rocmX``.
    """
    found = []
    for item in report.get("install", []):
        name = item["metadata"]["name"].lower()
        version = item["metadata"]["version"]
        if name.startswith("nvidia-") or (name == "torch" and re.search(r"\+(cu|rocm)", version)):
            found.append(f"{name}=={version}")
    return found


@dataclass(frozen=True)
class DryRun:
    """What pip would install from the default index, or why it could not say."""

    report: dict[str, Any] | None
    problem: str = ""


def dry_run(requirement: str, *, extra: Sequence[str] = (), limit: float = DRY_RUN_LIMIT) -> DryRun:
    """Ask pip what ``pip install requirement`` would install, without installing anything."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--report", str(out), *NETWORK, *extra, requirement]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, check=False)
        except subprocess.TimeoutExpired:
            return DryRun(None, f"pip did not answer within {limit:g} s")
        if done.returncode != 0 or not out.exists():
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return DryRun(None, f"pip could not resolve {requirement}: {last}")
        return DryRun(json.loads(out.read_text()))


def installed_cpu_torch(requirement: str) -> bool:
    """True when this environment already has the pinned torch and no nvidia-* package."""
    wanted = requirement.split("==", 1)[1]
    try:
        have = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return False
    nvidia = [d.metadata["Name"] for d in metadata.distributions() if (d.metadata["Name"] or "").lower().startswith("nvidia-")]
    return have.split("+")[0] == wanted and not nvidia and not re.search(r"\+(cu|rocm)", have)


def install_args(requirement: str, probe: DryRun) -> tuple[list[str], str]:
    """The pip arguments to install `requirement` as a CPU build, and a line saying why."""
    if probe.report is None:
        return [requirement, "--index-url", CPU_INDEX], f"{probe.problem}; trying PyTorch's CPU wheel index"
    cuda = pulls_cuda(probe.report)
    if cuda:
        shown = ", ".join(cuda[:3]) + (", ..." if len(cuda) > 3 else "")
        return [requirement, "--index-url", CPU_INDEX], f"the default index would install a CUDA build ({shown}); using PyTorch's CPU wheel index"
    return [requirement], "the default index serves a CPU build; installing it"


def main(argv: Sequence[str] = ()) -> int:
    requirement = pinned_requirement()
    if installed_cpu_torch(requirement):
        print(f"install_torch: {requirement} (CPU build) is already installed")
        return 0
    args, why = install_args(requirement, dry_run(requirement, extra=argv))
    print(f"install_torch: {why}")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--progress-bar", "on", *NETWORK, *argv, *args],
                          check=False)
    if done.returncode != 0:
        print(
            f"install_torch: could not install {requirement}. Check the network or proxy, or point pip at an "
            f"index that serves it (PIP_INDEX_URL); the CPU wheels are at {CPU_INDEX}.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
