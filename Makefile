# Two commands: `make lab` opens the course, `make test` runs every check.
# Both create .venv on first use and reuse it afterwards.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pip takes the 2.13.0 CPU build for this exact pin. On a machine whose pip
# would pick a CUDA build, pass the CPU wheel index, e.g.
#   make lab TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH_PIP_ARGS ?=
# Kernels and settings come from .venv, never from a user-wide Jupyter install.
export JUPYTER_PREFER_ENV_PATH := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: lab test unit nbval outputs install clean

install: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet "$$(grep -o 'torch==[0-9.]*' pyproject.toml)" $(TORCH_PIP_ARGS)
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (ipykernel)" >/dev/null
	@if $(PY) -m pip list --format=freeze 2>/dev/null | grep -i '^nvidia'; then \
	  echo "error: CUDA (nvidia-*) packages were installed; torch must be the CPU build" >&2; exit 1; fi
	touch $(STAMP)

# Jupyter refuses to run as root unless told; containers and CI machines often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: install
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) notebooks/00_start_here.ipynb

# Unit tests and doctests, then strict nbval of every notebook under 1 and 2 threads.
test: install unit nbval

unit: install
	$(PY) -m pytest -q tests course_utils --doctest-modules

nbval: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
	  --nbval-sanitize-with tests/sanitize.cfg notebooks
	OMP_NUM_THREADS=2 $(PY) -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
	  --nbval-sanitize-with tests/sanitize.cfg notebooks

# Re-execute every notebook in .venv and store its outputs (a clean Restart & Run All).
outputs: install
	$(PY) tools/notebooks.py execute notebooks/*.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
