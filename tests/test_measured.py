"""The GPU measurement files: the loader's checks, the script's CPU parts, and agreement with the recording it reproduces."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from course_utils import measured
from course_utils.measured import FIELDS, MeasurementError, describe, load_measurements, validate

RECORDED = Path(__file__).parent / "data" / "gpu_recorded"  # ../shared/gpu/ as given with issue 24
H100 = load_measurements()
H200 = load_measurements(measured.DEFAULT.with_name("gpu_h200.json"))


def test_the_course_measurements_load_and_name_their_device_version_and_date():
    assert describe(H100) == (f"NVIDIA H100 80GB HBM3, PyTorch {H100['torch']} (CUDA {H100['cuda']}, cuDNN {H100['cudnn']}), "
                              f"measured {H100['date']}")
    assert H200["device"] == "NVIDIA H200"


@pytest.mark.parametrize("field", ["schema", "date", "device", "flash_vs_math", "grad_blocked"])
def test_a_file_missing_a_field_is_refused_with_its_name(tmp_path, field):
    data = copy.deepcopy(H100)
    del data[field]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    with pytest.raises(MeasurementError, match=field if field != "schema" else "schema is None"):
        load_measurements(path)


def test_a_record_missing_a_field_is_refused_with_its_section_and_index():
    data = copy.deepcopy(H100)
    del data["flash_vs_math"][3]["ms"]
    with pytest.raises(MeasurementError, match=r"missing field 'ms' in flash_vs_math\[3\]"):
        validate(data)


def test_another_schema_version_is_refused():
    with pytest.raises(MeasurementError, match="schema is 2; this course reads schema 1"):
        validate({**H100, "schema": 2})


def test_a_file_that_is_not_json_is_refused_by_name(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(MeasurementError, match="broken.json: not valid JSON"):
        load_measurements(path)


def _recorded_fields() -> dict[str, set[str]]:
    """Every section of the recording of issue 24 and the keys of its records ('rows' is our 'softmax_passes')."""
    fields: dict[str, set[str]] = {}
    for path in sorted(RECORDED.glob("*.json")):
        for section, value in json.loads(path.read_text()).items():
            if section in ("torch", "cuda", "device", "backend_enum"):  # the header, and a probe that failed there
                continue
            section = {"rows": "softmax_passes"}.get(section, section)
            records = value if isinstance(value, list) else [value]
            fields[section] = set().union(*(r.keys() for r in records if isinstance(r, dict)))
    return fields


def test_the_script_writes_every_section_and_field_of_the_recording_it_reproduces():
    for section, keys in _recorded_fields().items():
        assert section in FIELDS, f"section {section} of the recording is not in the schema"
        ours = H100[section]
        our_keys = set().union(*(r.keys() for r in (ours if isinstance(ours, list) else [ours]) if isinstance(r, dict)))
        renamed = {"per_SM_exp2_per_clock_at_1980MHz": "per_SM_exp2_per_clock"}
        missing = {renamed.get(k, k) for k in keys} - our_keys
        assert not missing, f"{section}: the recording has {sorted(missing)}, our run does not"


def _words(data: dict, section: str, key: tuple[str, ...], value: tuple[str, ...]) -> dict:
    return {tuple(str(r.get(k)) for k in key): tuple(str(r.get(v)).lower() for v in value) for r in data[section]}


CATEGORICAL = [
    ("fully_masked_cpu", ("dtype", "backend", "mask"), ("row", "dq row")),
    ("fully_masked_cuda", ("dtype", "backend", "mask"), ("row", "dq row")),
    ("modules_cuda", ("module", "mode", "need_weights"), ("padded seq", "weights")),
    ("default_dispatch", ("dtype", "shape", "mask"), ("choice", "default", "math", "efficient", "flash", "cudnn")),
    ("is_causal_alignment", ("L", "S", "backend"), ("upper-left", "lower-right")),
]


@pytest.mark.parametrize("section,key,value", CATEGORICAL, ids=[c[0] for c in CATEGORICAL])
def test_our_h100_run_reproduces_every_verdict_of_the_recording(section, key, value):
    source = next(p for p in RECORDED.glob("*.json") if section in json.loads(p.read_text()))
    recorded = _words(json.loads(source.read_text()), section, key, value)
    assert _words(H100, section, key, value) == recorded


@pytest.mark.parametrize("section,key,value", CATEGORICAL, ids=[c[0] for c in CATEGORICAL])
def test_the_h200_gives_the_h100s_verdicts(section, key, value):
    assert _words(H200, section, key, value) == _words(H100, section, key, value)


def test_which_backends_get_real_queries_of_causal_lower_right_wrong_is_the_recordings():
    def wrong(data):
        return {(r["dtype"], r["L"], r["S"], r["backend"]) for r in data["causal_lower_right"] if r.get("real queries wrong")}

    recorded = json.loads((RECORDED / "h100_torch2.11_lower_right_upcast_exp.json").read_text())
    assert wrong(H100) == wrong(recorded)


# --- the script's CPU parts ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the script would run its GPU parts")
    from benchmarks import gpu

    out = tmp_path_factory.mktemp("gpu") / "cpu.json"
    lines: list[str] = []
    data = gpu.measure(quick=True, log=lines.append)
    out.write_text(json.dumps(data, allow_nan=False))
    return load_measurements(out), lines


def test_without_cuda_the_script_writes_a_valid_file_with_the_cpu_parts_only(cpu_run):
    data, _ = cpu_run
    assert data["cuda"] is None and data["flash_vs_math"] is None and data["fully_masked_cuda"] is None
    assert len(data["fully_masked_cpu"]) == len(H100["fully_masked_cpu"])


def test_without_cuda_each_gpu_part_is_skipped_in_one_line_that_says_why(cpu_run):
    _, lines = cpu_run
    skipped = [line for line in lines if line.startswith("skipped")]
    assert len(skipped) == sum(1 for s in FIELDS if s not in ("fully_masked_cpu", "modules_cpu", "softmax16_cpu",
                                                                 "exp_float64", "sparsemax_empty_row"))
    assert all("no CUDA device" in line for line in skipped)


def test_the_cpu_parts_agree_with_the_cpu_parts_recorded_beside_the_h100(cpu_run):
    data, _ = cpu_run
    assert data["exp_float64"]["cpu"] == H100["exp_float64"]["cpu"]
    assert data["softmax16_cpu"] == H100["softmax16_cpu"]
    assert data["sparsemax_empty_row"]["cpu"] == H100["sparsemax_empty_row"]["cpu"]


def test_memory_mib_counts_from_the_allocation_before_the_call(monkeypatch):
    """The GPU's allocator counters, faked: 100 MiB exist before, the call peaks at 130 and keeps 112 while its result lives."""
    from benchmarks import gpu

    mib = 2**20
    state = {"now": 100 * mib, "peak": 100 * mib}
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: state.update(peak=state["now"]))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: state["now"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: state["peak"])

    def call():
        state.update(peak=130 * mib, now=112 * mib)
        return "a result"

    assert gpu.memory_mib(call) == (30.0, 12.0)
