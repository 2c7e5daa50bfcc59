"""Execute notebooks under load and fail if any cell hangs: the instructor's check.

    python tools/stress.py [--rounds N] [--parallel P] [--burners B] [--cell-limit S] NOTEBOOK...

Each round executes every notebook once in each of P parallel workers (a clean
kernel per execution, as Restart & Run All does), while B processes keep the
CPU busy. Every cell gets at most S seconds; a cell that takes longer is a
hang, reported with its notebook and index, and the run fails. A summary line
per notebook gives the slowest cell seen.

``make stress`` runs it for several rounds. ``make test`` applies the same
limit inside strict nbval (``--nbval-cell-timeout``), whose two thread
settings already execute every notebook twice side by side.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from collections import defaultdict
from pathlib import Path


def _burn(stop: mp.Event) -> None:  # type: ignore[valid-type]
    """Spin until told to stop: one busy core."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def execute(path: str, cell_limit: float) -> tuple[str, dict[int, float], str]:
    """Execute one notebook in a fresh kernel; return the time of each code cell by index, and an error, if any."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=cell_limit, kernel_name="python3", record_timing=True,
                            resources={"metadata": {"path": str(Path(path).parent)}})
    times: dict[int, float] = {}
    error = ""
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            start = time.perf_counter()
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                error = f"cell {index} took more than {cell_limit:g} s"
                break
            except CellExecutionError as exc:
                if "raises-exception" not in cell.metadata.get("tags", []):
                    error = f"cell {index} raised: {str(exc).splitlines()[-1] if str(exc) else exc!r}"
                    break
            except DeadKernelError:
                error = f"the kernel died in cell {index}"
                break
            except Exception as exc:  # noqa: BLE001 - any other failure is reported, not raised
                error = f"cell {index}: {type(exc).__name__}: {exc}"
                break
            finally:
                times[index] = time.perf_counter() - start
                if times[index] >= cell_limit and not error:
                    # nbclient can read a reply only at its deadline and carry on without an error
                    # (seen with ipykernel 7 on a widget cell, its reply stamped 1.5 s in): a hang too.
                    error = f"cell {index} took the whole limit of {cell_limit:g} s"
                if times[index] > cell_limit / 2:  # when the kernel and the client each saw the cell end
                    marks = cell.metadata.get("execution", {})
                    print(f"slow: {Path(path).name} cell {index} {times[index]:.1f} s, kernel said "
                          f"busy {marks.get('iopub.status.busy')}, replied {marks.get('shell.execute_reply')}, "
                          f"idle {marks.get('iopub.status.idle')}; client done {time.strftime('%H:%M:%S', time.gmtime())}",
                          flush=True)
    return path, times, error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--burners", type=int, default=1)
    parser.add_argument("--cell-limit", type=float, default=30.0)
    args = parser.parse_args(argv)

    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    burners = [ctx.Process(target=_burn, args=(stop,), daemon=True) for _ in range(args.burners)]
    for b in burners:
        b.start()
    slowest: dict[str, tuple[float, int]] = defaultdict(lambda: (0.0, -1))
    failures = []
    start = time.perf_counter()
    try:
        with ctx.Pool(args.parallel) as pool:
            jobs = [(nb, args.cell_limit) for _ in range(args.rounds) for nb in args.notebooks for _ in range(args.parallel)]
            for path, times, error in pool.starmap(execute, jobs, chunksize=1):
                slowest[path] = max([slowest[path], *((t, i) for i, t in times.items())])
                if error:
                    failures.append(f"{path}: {error}")
    finally:
        stop.set()
        for b in burners:
            b.join(timeout=5)
    runs = args.rounds * args.parallel
    for path in args.notebooks:
        seconds, index = slowest[path]
        print(f"{Path(path).name}: {runs} executions, slowest cell {seconds:.1f} s (cell {index})")
    print(f"{len(args.notebooks) * runs} executions with {args.parallel} in parallel and {args.burners} CPU burner(s) "
          f"in {time.perf_counter() - start:.0f} s; cell limit {args.cell_limit:g} s")
    for failure in failures:
        print("HANG or FAILURE:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
