"""nbclient's NotebookClient, made safe against a reply it was never woken for.

nbclient waits for a cell's reply with one poll of the kernel's shell socket
that lasts the whole cell timeout. After a widget cell that poll can miss the
reply, which the kernel sent at once, and only find it in its last look at the
deadline: the cell then "succeeds" after exactly the timeout (jupyter/nbclient
issue 312; seen here on lesson 02's overflow explorer, whose reply was sent
1.5 s after the cell started and read 30 s after). Polling in steps of one
second bounds that stall to a second. tools/notebooks.py and tools/stress.py
execute notebooks with this client; nbval uses a blocking client and is not
affected.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any, Awaitable, Callable

from nbclient import NotebookClient

STEP = 1.0  # seconds: the longest a missed wake-up can delay a reply


def stepped(get_msg: Callable[..., Awaitable[dict[str, Any]]], step: float = STEP) -> Callable[..., Awaitable[dict[str, Any]]]:
    """Wrap a channel's ``get_msg(timeout)`` so that it polls at most `step` seconds at a time, up to `timeout`."""

    async def stepped_get_msg(timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = step if deadline is None else max(0.0, min(step, deadline - time.monotonic()))
            try:
                return await get_msg(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    return stepped_get_msg


class SteppedClient(NotebookClient):
    """A NotebookClient whose shell channel is polled at most `STEP` seconds at a time."""

    async def async_start_new_kernel_client(self) -> Any:
        kc = await super().async_start_new_kernel_client()
        kc.shell_channel.get_msg = stepped(kc.shell_channel.get_msg)
        return kc
