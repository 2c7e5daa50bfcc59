"""Recorded measurements of attention on a GPU, loaded and checked against their schema.

The course runs on CPUs; learners train on GPUs, where the same PyTorch call can
return something else. ``python -m benchmarks.gpu`` measures on a CUDA machine
what the lessons claim on a CPU, and writes one JSON file. The lessons load the
file committed in ``course_utils/data/`` with :func:`load_measurements` and print
every number they use from it, naming the device, the torch version and the date.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT", "FIELDS", "HEADER", "SCHEMA", "MeasurementError", "describe", "load_measurements", "validate"]

#: The version of the file layout below; a file of another version is refused.
SCHEMA = 1
#: The measurements the course ships: one H100 run of ``python -m benchmarks.gpu``.
DEFAULT = Path(__file__).with_name("data") / "gpu_h100.json"

#: Every section of a measurement file and the fields of each of its records.
#: A section is a list of records (dicts with at least these keys) or, where marked "dict", one dict.
FIELDS: dict[str, tuple[str, ...] | dict[str, tuple[str, ...]]] = {
    "fully_masked_cpu": ("device", "dtype", "backend", "mask", "row"),
    "fully_masked_cuda": ("device", "dtype", "backend", "mask", "row"),
    "modules_cpu": ("device", "module", "mode", "padded seq"),
    "modules_cuda": ("device", "module", "mode", "padded seq"),
    "softmax16_cpu": {"dict": ("torch.float16", "torch.bfloat16", "fp16 ones .sum()")},
    "softmax16_cuda": {"dict": ("torch.float16", "torch.bfloat16", "fp16 ones .sum()")},
    "default_dispatch": ("dtype", "shape", "mask", "choice", "choice with grad", "default", "math", "efficient", "flash",
                         "cudnn"),
    "is_causal_alignment": ("L", "S", "backend"),
    "grad_blocked": {"dict": ("math", "efficient", "flash", "cudnn")},
    "grad_blocked_guarded": {"dict": ("math", "efficient", "flash", "cudnn")},
    "grad_default": {"dict": ("float16", "bfloat16")},
    "fill_overflow": ("dtype", "backend", "fill", "row"),
    "lower_right_leaks": ("dtype", "L", "S", "backend", "queries that moved", "queries", "queries with no key"),
    "causal_lower_right": ("dtype", "L", "S", "backend"),
    "math_upcast_L8192_B1_H16_D128": {"dict": ("allow_reduced=False", "allow_reduced=True")},
    "math_memory_by_hand": {"dict": ("L", "B", "H", "D", "extra_peak_MiB")},
    "exp_float64": {"dict": ("x", "cpu", "cuda", "softmax_cpu", "softmax_cuda")},
    "exp_bottleneck": {"dict": ("exp2_T_per_s", "exp_result_ok", "bf16_matmul_TFLOPs", "matmul_over_exp",
                                "sm_count", "sm_clock_MHz", "per_SM_exp2_per_clock")},
    "flash_vs_math": ("L", "B", "H", "D", "backend", "extra_peak_MiB", "ms", "TFLOPs"),
    "softmax_passes": ("shape", "pass", "ms", "GB_per_s"),
    "sparsemax_empty_row": {"dict": ("cpu", "cuda")},
}
#: Fields every file has: who measured what, where and when.
HEADER: tuple[str, ...] = ("schema", "date", "device", "torch", "cuda", "cudnn")


class MeasurementError(ValueError):
    """A measurement file that is missing a field, or has another schema version."""


def validate(data: Any, source: str = "measurements") -> dict[str, Any]:
    """Check `data` against :data:`FIELDS`; return it, or raise :class:`MeasurementError` naming the field.

    Examples
    --------
    >>> validate({"schema": 0})
    Traceback (most recent call last):
    ...
    course_utils.measured.MeasurementError: measurements: schema is 0; this course reads schema 1 (rerun python -m benchmarks.gpu)
    """
    if not isinstance(data, dict):
        raise MeasurementError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise MeasurementError(f"{source}: schema is {data.get('schema')!r}; this course reads schema {SCHEMA} "
                               "(rerun python -m benchmarks.gpu)")
    for key in HEADER + tuple(FIELDS):
        if key not in data:
            raise MeasurementError(f"{source}: missing field {key!r}")
    for section, fields in FIELDS.items():
        value = data[section]
        if value is None and data["cuda"] is None and section not in ("fully_masked_cpu", "modules_cpu", "softmax16_cpu"):
            continue  # a CPU-only run: the GPU sections are empty
        if isinstance(fields, dict):
            if not isinstance(value, dict):
                raise MeasurementError(f"{source}: {section!r} must be an object")
            records = [value]
            fields = fields["dict"]
        else:
            if not isinstance(value, list) or not value:
                raise MeasurementError(f"{source}: {section!r} must be a non-empty list of records")
            records = value
        for i, record in enumerate(records):
            for field in fields:
                if not isinstance(record, dict) or field not in record:
                    where = section if len(records) == 1 and isinstance(FIELDS[section], dict) else f"{section}[{i}]"
                    raise MeasurementError(f"{source}: missing field {field!r} in {where}")
    return data


def load_measurements(path: str | Path | None = None) -> dict[str, Any]:
    """Load a measurement file (the course's own by default) and check it against the schema.

    Parameters
    ----------
    path : str or Path, optional
        A file written by ``python -m benchmarks.gpu``; :data:`DEFAULT` if omitted.

    Raises
    ------
    MeasurementError
        If a field is missing or the schema version differs.

    Examples
    --------
    >>> data = load_measurements()
    >>> data["schema"], "flash_vs_math" in data
    (1, True)
    """
    path = Path(DEFAULT if path is None else path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise MeasurementError(f"{path.name}: not valid JSON ({err})") from None
    return validate(data, source=path.name)


def describe(data: dict[str, Any]) -> str:
    """One line naming where and when a measurement file was recorded.

    Examples
    --------
    >>> describe({"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": 91900,
    ...           "date": "2026-11-26"})
    'NVIDIA H100 80GB HBM3, PyTorch 2.11.0+cu130 (CUDA 13.0, cuDNN 91900), measured 2026-11-26'
    """
    return f"{data['device']}, PyTorch {data['torch']} (CUDA {data['cuda']}, cuDNN {data['cudnn']}), measured {data['date']}"
