# Two commands: `make lab` opens the course, `make test` runs every check.
# Both create .venv on first use and reuse it afterwards; make test adds the test tools to make lab's set.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Two install sets, one on the other: what a learner needs (make lab), then the test tools
# (make test). Every pip call takes the exact versions of constraints.txt.
LAB_STAMP := $(VENV)/.installed-lab
STAMP := $(VENV)/.installed
PIP_INSTALL := $(PY) -m pip install --progress-bar on -c constraints.txt
NO_CUDA := if $(PY) -m pip list --format=freeze 2>/dev/null | grep -i '^nvidia'; then \
  echo "error: CUDA (nvidia-*) packages were installed; torch must be the CPU build" >&2; exit 1; fi
# tools/install_torch.py installs the pinned torch as a CPU build on every platform:
# it asks pip what it would install and, where that is a CUDA build (Linux with the
# default index), takes PyTorch's CPU wheel index instead. Extra pip options, if any:
TORCH_PIP_ARGS ?=
# Kernels and settings come from .venv, never from a user-wide Jupyter install.
export JUPYTER_PREFER_ENV_PATH := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# A cell that takes longer than CELL_LIMIT seconds is a hang, and fails the run.
CELL_LIMIT := 30
NBVAL := -p no:cacheprovider --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout=$(CELL_LIMIT)
ROUNDS ?= 5
# Jupyter refuses to run as root unless told; containers and CI machines often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: lab test unit nbval nbval-pair browser browser-deps bench-sliders outputs install install-lab stress oldest robust solutions site handout site-check grade-check clean

# The learner's set: PyTorch (CPU), NumPy, Matplotlib, ipywidgets, anywidget, entmax, JupyterLab, course_utils.
install-lab: $(LAB_STAMP)
# And the test set on top: pytest, hypothesis, nbval, SciPy, repo2docker, Playwright.
install: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(LAB_STAMP): pyproject.toml constraints.txt tools/install_torch.py binder/overrides.json | $(PY)
	@echo "== install 1 of 2: PyTorch, the CPU build (about 200 MB to download)"
	$(PY) tools/install_torch.py $(TORCH_PIP_ARGS)
	@echo "== install 2 of 2: NumPy, Matplotlib, ipywidgets, anywidget, entmax, JupyterLab and course_utils"
	$(PIP_INSTALL) -e '.[lab]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (ipykernel)" >/dev/null
	@# JupyterLab's defaults for the course: every cell in the page, for screen readers (binder/postBuild says why)
	mkdir -p $(VENV)/share/jupyter/lab/settings && cp binder/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@$(NO_CUDA)
	touch $(LAB_STAMP)

$(STAMP): $(LAB_STAMP) requirements-ci.txt
	@echo "== the test tools: pytest, hypothesis, mpmath, nbval, repo2docker and Playwright"
	$(PIP_INSTALL) -e '.[lab,test]' -r requirements-ci.txt
	@$(NO_CUDA)
	touch $(STAMP)

lab: install-lab
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) notebooks/00_start_here.ipynb

# Unit tests, strict nbval of the notebooks without sliders and the slider notebooks (and the start page) in
# JupyterLab in Chromium, their outputs compared with the stored ones as nbval compares them: every notebook
# rerun once, with 2 threads on the code paths of another CPU (outputs are stored with 1 thread on this CPU's
# own). All three side by side: nbval runs beside the browser's runs and the unit tests (then a CPU burner), no
# cell longer than CELL_LIMIT s (the hang check); the sliders are timed once the others have ended. See
# tools/run_checks.py; `make nbval` alone runs strict nbval on every notebook.
test: install browser-deps
	@$(PY) tools/run_checks.py $(NBVAL)

# The robustness check, which CI runs after make test: the unit tests on the other code paths of this CPU
# (AVX2 and baseline), then every conclusion of lessons 03, 08, 08b, 09, 09b and the sources page over 10 seed
# sets on each code path (native, AVX2, baseline), written to benchmarks/robustness.md. See tools/robustness.py;
# options for it: make robust ROBUST_ARGS="--notebooks 08_scale_in_training --seed-sets 2".
ROBUST_ARGS ?=
robust: install
	@$(PY) tools/robustness.py --unit-tests; unit=$$?; \
	 $(PY) tools/robustness.py $(ROBUST_ARGS); notebooks=$$?; \
	 test $$unit -eq 0 && test $$notebooks -eq 0

# Every exercise's solution where the learner would paste it, which CI runs after make robust: each notebook with
# an exercise, run in a kernel up to its last exercise, with a cell after each check cell that runs the solution's
# code and checks it; each must print ✓. Report: test-artifacts/solutions.md. See tools/solutions.py; make test
# runs its fast half (tests/test_solutions.py), without a kernel.
solutions: install
	@$(PY) tools/solutions.py

# The course as a website, from the notebooks' stored outputs (nothing re-executed, nothing fetched): build/site/index.html.
site: install
	@$(PY) tools/site.py site build/site

# The handout: the notebooks without the answers to discuss, marked so that solution() and the hints are off, in
# build/handout/notebooks, and their website in build/handout/site. See tools/site.py.
handout: install
	@$(PY) tools/site.py handout build/handout

# The website and the handout, built and read in Chromium with no network (tests/test_site.py), which CI runs after
# make solutions: maths, alt texts, links, search, no answer in the handout, axe-core (WCAG 2.1 AA) on every page.
site-check: install browser-deps
	@$(PY) -m pytest -q -p no:cacheprovider -m browser tests/test_site.py

# The gradebook (tools/grade.py) on eleven sample submissions of lesson 01, each in a fresh kernel (right, wrong,
# hanging, raising, faked, crashing, another lesson's, corrupt, ...), which CI runs after make site-check.
grade-check: install
	@$(PY) -m pytest -q -p no:cacheprovider -m grading tests/test_grade.py

# Each stage of make test alone, as tools/run_checks.py defines it.
unit: install
	@$(PY) tools/run_checks.py --stage unit $(NBVAL)

nbval: install
	@$(PY) tools/run_checks.py --stage nbval $(NBVAL)

# Two strict nbval runs of every notebook (1 and 2 threads) side by side, beside a CPU burner.
nbval-pair: install
	@rm -f .nbval-1.log .nbval-2.log
	@$(PY) -c "while True: pass" & burner=$$!; \
	 OMP_NUM_THREADS=1 $(PY) -m pytest -q $(NBVAL) notebooks > .nbval-1.log 2>&1 & one=$$!; \
	 OMP_NUM_THREADS=2 $(PY) -m pytest -q $(NBVAL) notebooks > .nbval-2.log 2>&1; two=$$?; \
	 wait $$one; one=$$?; kill $$burner; \
	 echo "--- nbval, OMP_NUM_THREADS=1"; cat .nbval-1.log; echo "--- nbval, OMP_NUM_THREADS=2"; cat .nbval-2.log; \
	 rm -f .nbval-1.log .nbval-2.log; test $$one -eq 0 && test $$two -eq 0

# Debian's Chromium for the browser tests, where this machine can install it.
# Elsewhere the browser tests skip with one line saying why (in CI they fail).
browser-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	      || echo "warning: could not install chromium; the browser tests will not run"; \
	  else echo "note: no /usr/bin/chromium and no root apt-get; the browser tests will skip"; fi; \
	fi

browser: install browser-deps
	@$(PY) tools/run_checks.py --stage browser $(NBVAL)

# Each slider's median and 95th percentile (ms) against the 150/400 ms targets, with the CPU named; never fails on
# a target (make test holds each slider to a ratio instead). See benchmarks/README.md.
bench-sliders: install browser-deps
	@$(PY) -m benchmarks.sliders

# The instructor's check, longer: ROUNDS times over, every notebook twice side by side (1 and
# 2 threads) beside a CPU burner, no cell longer than CELL_LIMIT s.
stress: install
	@for round in $$(seq $(ROUNDS)); do echo "=== stress round $$round of $(ROUNDS)"; \
	  $(MAKE) --no-print-directory nbval-pair || exit 1; done

# Re-execute every notebook in .venv and store its outputs (a clean Restart & Run All).
outputs: install
	$(PY) tools/notebooks.py execute notebooks/*.ipynb

# Every notebook on the oldest versions pyproject.toml allows (errors only, outputs not compared),
# in a virtual environment of its own. See tools/oldest.py.
OLDEST := .venv-oldest
oldest:
	rm -rf $(OLDEST) && $(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python tools/install_torch.py $(TORCH_PIP_ARGS)
	$(OLDEST)/bin/python -m pip install --progress-bar on $$($(PYTHON) tools/oldest.py requirements) nbclient
	$(OLDEST)/bin/python -m pip install --no-deps -e .
	$(OLDEST)/bin/python tools/oldest.py run

clean:
	rm -rf $(VENV) $(OLDEST) .pytest_cache .hypothesis test-artifacts
