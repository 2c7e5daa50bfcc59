"""The CPU-build decision of tools/install_torch.py, on recorded pip reports and unreachable indexes."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
_spec = importlib.util.spec_from_file_location("install_torch", ROOT / "tools" / "install_torch.py")
install_torch = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = install_torch  # dataclasses look their module up by name
_spec.loader.exec_module(install_torch)


def _report(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_the_pin_is_read_from_the_constraints_file(tmp_path):
    assert install_torch.pinned_requirement() == "torch==2.13.0"
    (tmp_path / "c.txt").write_text("# torch==1.0\nnumpy==2.4.6\ntorch>=2\n")
    with pytest.raises(SystemExit, match="must pin torch exactly"):
        install_torch.pinned_requirement(tmp_path / "c.txt")


def test_a_report_that_pulls_nvidia_packages_goes_to_the_cpu_index():
    probe = install_torch.DryRun(_report("pip-report-linux-default-index.json"))
    cuda = install_torch.pulls_cuda(probe.report)
    assert any(name.startswith("nvidia-cublas") for name in cuda)
    args, why = install_torch.install_args("torch==2.13.0", probe)
    assert args == ["torch==2.13.0", "--index-url", install_torch.CPU_INDEX]
    assert "CUDA build" in why


def test_a_report_with_a_cpu_wheel_installs_as_is():
    probe = install_torch.DryRun(_report("pip-report-cpu-wheel.json"))
    assert install_torch.pulls_cuda(probe.report) == []
    args, why = install_torch.install_args("torch==2.13.0", probe)
    assert args == ["torch==2.13.0"]
    assert "CPU build" in why


@pytest.mark.parametrize("version", ["2.13.0+cu130", "2.13.0+rocm6.4"])
def test_a_gpu_local_version_label_alone_counts_as_cuda(version):
    report = {"install": [{"metadata": {"name": "torch", "version": version}}]}
    assert install_torch.pulls_cuda(report) == [f"torch=={version}"]


def test_an_unanswered_dry_run_falls_back_to_the_cpu_index_and_says_why():
    args, why = install_torch.install_args("torch==2.13.0", install_torch.DryRun(None, "pip did not answer within 5 s"))
    assert args[-2:] == ["--index-url", install_torch.CPU_INDEX]
    assert why.startswith("pip did not answer within 5 s")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_index_gives_a_problem_not_a_report():
    index = f"http://127.0.0.1:{_closed_port()}/simple"
    probe = install_torch.dry_run("torch==2.13.0", extra=["--isolated", "--index-url", index, "--retries", "0"], limit=60)
    assert probe.report is None
    assert "could not resolve torch==2.13.0" in probe.problem


def test_an_index_that_never_answers_cannot_hang_the_install():
    """A server that accepts connections and never replies: the hard limit ends the dry run."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []

    def accept_and_stay_silent():
        server.settimeout(10)
        try:
            while True:
                accepted.append(server.accept()[0])
        except OSError:
            pass

    threading.Thread(target=accept_and_stay_silent, daemon=True).start()
    index = f"http://127.0.0.1:{server.getsockname()[1]}/simple"
    start = time.monotonic()
    try:
        probe = install_torch.dry_run("torch==2.13.0", extra=["--isolated", "--index-url", index], limit=2)
    finally:
        server.close()
        for conn in accepted:
            conn.close()
    assert probe.report is None
    assert probe.problem == "pip did not answer within 2 s"
    assert time.monotonic() - start < 30
