# Two commands for a fresh machine:  `make demo`  and  `make test`.
# The virtual environment reuses a torch that is already installed on the system;
# otherwise it installs the CPU build pinned below before anything can pull a CUDA build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PIN ?= torch==2.13.0

.PHONY: setup demo test lint mutants bench gallery clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

# A second `make demo` writes runs/demo-2, runs/demo-3, ...: an earlier run is never touched.
demo: setup
	@d=runs/demo; i=1; while [ -e $$d ]; do i=$$((i+1)); d=runs/demo-$$i; done; \
	$(VENV)/bin/shortrun train --out $$d && \
	$(VENV)/bin/shortrun eval $$d && \
	$(VENV)/bin/shortrun sample $$d --n 2000 --out $$d/samples.png && \
	echo "demo run: $$d (eval.json, samples/, samples.png)"

test: setup
	$(PY) -m ruff check src tests bench examples
	$(PY) -m pytest -q -rs

# Every listed single-line mutant (tests/mutants/mutants.py) must fail its tests; 2 jobs. The
# result (killed / total, wall time, CPU, commit) is appended to bench/results/mutants.txt.
mutants: setup
	$(PY) tests/mutants/run.py --jobs 2 --record bench/results/mutants.txt

# The latent-model pictures of docs/lebm.md, docs/dual_mcmc.md, docs/text.md (bench/gallery.py):
# finished runs in runs/gallery are reused, missing ones trained (2 at a time): about 2 CPU hours
# from scratch (see docs/img/gallery_numbers.json); the pictures alone take a few CPU minutes.
gallery: setup
	$(PY) bench/gallery.py --runs runs/gallery --out docs/img $(GALLERY_ARGS)

# The speed table of issue 16 on this machine:
# bench/results/<cpu-model>-<vector-tier>-f<family>m<model>.md (< 20 min on 2 cores;
# MNIST rows need SHORTRUN_DATA). BENCH_ARGS=--quick for a smoke run.
bench: setup
	$(PY) bench/run_all.py $(BENCH_ARGS)

lint: setup
	$(PY) -m ruff check src tests bench examples

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
