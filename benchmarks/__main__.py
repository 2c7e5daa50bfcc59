"""python -m benchmarks [--quick]: write benchmarks/results.md and benchmarks/results.png.

--quick uses small shapes and few repeats and skips timing the notebooks, to check that everything runs.
"""

import os
import sys

# Pin every thread pool to one thread before NumPy (and its BLAS) is imported.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

from .suite import HERE, SHAPES, main  # noqa: E402

QUICK_SHAPES = ((256, 512), (4, 4, 64, 64))

if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    notebooks = None if quick else sorted((HERE.parent / "notebooks").glob("*.ipynb"))
    print(main(shapes=QUICK_SHAPES if quick else SHAPES, repeats=2 if quick else 5, notebooks=notebooks))
