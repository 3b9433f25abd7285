# Two commands for a fresh machine:  `make demo`  and  `make test`.
# The virtual environment reuses a torch that is already installed on the system;
# otherwise it installs the CPU build pinned below before anything can pull a CUDA build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PIN ?= torch==2.13.0

.PHONY: setup demo test lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/shortrun train --out runs/demo
	$(VENV)/bin/shortrun eval runs/demo
	$(VENV)/bin/shortrun sample runs/demo --n 2000 --out runs/demo/samples.png

test: setup
	$(PY) -m ruff check src tests bench
	$(PY) -m pytest -q

lint: setup
	$(PY) -m ruff check src tests bench

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
