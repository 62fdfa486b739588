"""The embedder every install has: all-MiniLM-L6-v2 distilled to static token vectors.

A core install carries no torch, so it cannot run MiniLM; screening (stages 2a and 4a) and the
simulator's challenger still need cosine similarities of short phrases. model2vec's distillation
gives them: MiniLM encodes each token of its vocabulary alone (``[CLS] token [SEP]``, mean
pooled), PCA keeps 256 dimensions, and each row is weighted by its SIF coefficient from the
token's Zipf rank, so that frequent tokens weigh less. A text's vector is the mean of its
tokens' rows, normalised. The table (int8 rows with one scale each, and MiniLM's vocabulary) is
package data, built once from the model of the ``embed`` extra by the recipe in
``tests/test_diagnosis_static.py``, whose slow test builds it again and compares. Tokenizing
follows MiniLM's (BERT's uncased WordPiece) in plain Python, so nothing here needs more than numpy.

Thresholds belong to an embedder (:mod:`diagevo.diagnosis.calibration` measures this one).
"""

from __future__ import annotations

import unicodedata
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from diagevo.diagnosis.embedder import Cached

STATIC_MODEL_NAME = "all-MiniLM-L6-v2-static256"
TABLE = "minilm-l6-static256.npz"
_MAX_WORD_CHARS = 100  # BERT's WordPiece: a longer word is one [UNK]
# control, format, private-use and surrogate characters; unassigned ones stay (and make [UNK])
_DROPPED = frozenset({"Cc", "Cf", "Co", "Cs"})


def _is_punctuation(ch: str) -> bool:
    """BERT's punctuation: ASCII symbols ($, ^, `) count too, besides Unicode's P categories."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B920 <= cp <= 0x2CEAF  # tokenizers' BertNormalizer starts here, not at BERT's 0x2B820
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _normalized(text: str) -> str:
    """BERT's normaliser as MiniLM's tokenizer runs it: control characters dropped, whitespace
    made a space, CJK ideographs spaced apart, accents stripped (NFD without marks), lower case."""
    out = []
    for ch in text:
        cp = ord(ch)
        if ch in "\t\n\r" or unicodedata.category(ch) == "Zs":
            out.append(" ")
        elif cp == 0 or cp == 0xFFFD or unicodedata.category(ch) in _DROPPED:
            continue
        elif _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    # lower case one character at a time: str.lower() makes a word-final sigma ς, MiniLM's tokenizer σ
    return "".join(ch.lower() for ch in decomposed if unicodedata.category(ch) != "Mn")


def _words(text: str) -> list[str]:
    """Whitespace-separated words, each punctuation character a word of its own."""
    words: list[str] = []
    for chunk in _normalized(text).split():
        start = 0
        for i, ch in enumerate(chunk):
            if _is_punctuation(ch):
                if i > start:
                    words.append(chunk[start:i])
                words.append(ch)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


class WordPiece:
    """MiniLM's tokenizer (BERT uncased): words split greedily into the longest vocabulary
    pieces, continuations prefixed ``##``; a word that cannot be split is ``[UNK]``."""

    def __init__(self, vocab: list[str]) -> None:
        self.ids = {token: i for i, token in enumerate(vocab)}
        self.unk = self.ids["[UNK]"]

    def _pieces(self, word: str) -> list[int]:
        if len(word) > _MAX_WORD_CHARS:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    break
                end -= 1
            else:
                return [self.unk]
            start = end
        return pieces

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without ``[CLS]`` and ``[SEP]``."""
        return [i for word in _words(text) for i in self._pieces(word)]


def table_path() -> Path:
    return Path(str(resources.files("diagevo.diagnosis").joinpath(TABLE)))


@cache
def _table() -> tuple[WordPiece, np.ndarray]:
    with np.load(table_path(), allow_pickle=False) as data:
        rows = data["rows"].astype(np.float32) * data["scale"][:, None]
        return WordPiece(data["vocab"].tolist()), rows


class StaticEmbedder(Cached):
    """MiniLM distilled to one vector per token (see the module): the default embedder, offline,
    about a microsecond a token, the same vectors on every machine (no batch, no thread count)."""

    name = STATIC_MODEL_NAME
    kept = False  # computing a vector again costs less than reading it from LanceDB

    def load(self) -> None:
        _table()

    def _compute(self, texts: list[str]) -> np.ndarray:
        tokenizer, rows = _table()
        out = np.zeros((len(texts), rows.shape[1]), dtype=np.float32)
        for i, text in enumerate(texts):
            ids = tokenizer.encode(text)
            if ids:
                out[i] = rows[ids].mean(axis=0)
        return out
