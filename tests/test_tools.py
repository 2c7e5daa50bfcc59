"""The notebook tools: the stepped shell poll that bounds nbclient's missed wake-ups, and the stress check."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from queue import Empty

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import nbexec  # noqa: E402
import stress  # noqa: E402


class _Socket:
    """A shell channel whose message arrives at `ready_at`, but which, like a missed wake-up, only
    notices it when a poll *starts* after that moment."""

    def __init__(self, ready_at: float):
        self.ready_at = ready_at
        self.polls: list[float] = []

    async def get_msg(self, timeout: float | None = None) -> dict:
        started = time.monotonic()
        self.polls.append(timeout)
        if started >= self.ready_at:
            return {"msg_type": "execute_reply"}
        await asyncio.sleep(timeout)
        raise Empty


def test_a_missed_wake_up_costs_one_step_not_the_whole_timeout():
    socket = _Socket(ready_at=time.monotonic() + 0.05)
    start = time.monotonic()
    msg = asyncio.run(nbexec.stepped(socket.get_msg, step=0.1)(timeout=30))
    assert msg["msg_type"] == "execute_reply"
    assert time.monotonic() - start < 1.0
    assert all(t <= 0.1 for t in socket.polls)


def test_the_stepped_poll_still_gives_up_at_the_timeout():
    socket = _Socket(ready_at=float("inf"))
    start = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(nbexec.stepped(socket.get_msg, step=0.1)(timeout=0.35))
    assert 0.3 <= time.monotonic() - start < 1.0


def test_the_stress_check_fails_a_notebook_whose_cell_outlasts_the_limit(tmp_path, capsys):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time; time.sleep(5)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "slow.ipynb"
    nbformat.write(nb, path)
    code = stress.main([str(path), "--rounds", "1", "--parallel", "1", "--burners", "0", "--cell-limit", "2"])
    out = capsys.readouterr().out
    assert code == 1
    assert "HANG or FAILURE" in out and "slow.ipynb" in out
