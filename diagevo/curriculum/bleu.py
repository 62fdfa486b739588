"""sacrebleu's sentence BLEU for every pair of a batch, vectorised.

Defaults of ``sacrebleu.sentence_bleu``: 13a tokenizer, no lowercasing, n-gram orders 1-4,
``exp`` smoothing, effective order. ``pairwise_bleu(texts)[i, j]`` equals
``sacrebleu.sentence_bleu(texts[i], [texts[j]]).score / 100``.

How: clipped matches ``sum_g min(c_i(g), c_j(g))`` are symmetric in (i, j), and
``min(a, b) = sum_{k >= 1} [a >= k][b >= k]``. Each text is therefore one binary row over the
features (n-gram g, occurrence k) and every order's match counts for all pairs come out of one
sparse product ``X X^T`` (:func:`_shared`). The BLEU formula is then evaluated on whole matrices;
the n-gram totals and the brevity penalty only need the two lengths.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

MAX_ORDER = 4
# a column of X held by at least 1/DENSE_SHARE of the texts goes into the dense product
# (benchmarks/bench_bleu.py measures the split)
DENSE_SHARE = 32
_TOKENIZER = Tokenizer13a()


def tokenize(text: str) -> list[str]:
    """sacrebleu's preprocessing for BLEU: right-strip, 13a tokenization, whitespace split."""
    return _TOKENIZER(text.rstrip()).split()


def _token_ids(tokens: list[list[str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenated token ids, the text each position belongs to, and the text lengths."""
    vocab: dict[str, int] = {}
    flat = [vocab.setdefault(t, len(vocab)) for toks in tokens for t in toks]
    lens = np.fromiter((len(t) for t in tokens), dtype=np.int64, count=len(tokens))
    owner = np.repeat(np.arange(len(tokens), dtype=np.int64), lens)
    return np.asarray(flat, dtype=np.int64), owner, lens


def _columns(g: np.ndarray, t: np.ndarray, n_texts: int) -> tuple[np.ndarray, np.ndarray]:
    """The ones of X for the n-gram ``g[e]`` occurring in text ``t[e]``: their columns (one per
    n-gram and copy number k) and rows, sorted by column."""
    order = np.argsort(g * n_texts + t)
    g, t = g[order], t[order]
    idx = np.arange(len(g))
    new = np.ones(len(g), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (t[1:] != t[:-1])
    rank = idx - np.maximum.accumulate(np.where(new, idx, 0))  # k - 1 for the k-th copy
    col = g * (int(rank.max(initial=0)) + 1) + rank
    order = np.argsort(col)
    return col[order], t[order]


def _shared(col: np.ndarray, t: np.ndarray, n_texts: int) -> np.ndarray:
    """``X X^T`` off the diagonal, from X's ones as :func:`_columns` sorts them. Columns held by
    many texts go into one dense float32 product (BLAS; exact, the counts stay far below 2**24);
    the others add their pairs one by one, counted by ``np.unique``."""
    first = np.ones(len(col), dtype=bool)
    first[1:] = col[1:] != col[:-1]
    start = np.flatnonzero(first)
    held = np.diff(np.append(start, len(col)))  # texts holding each column
    dense = np.repeat(held >= max(2, n_texts // DENSE_SHARE), held)
    x = np.zeros((n_texts, int(first[dense].sum())), dtype=np.float32)
    x[t[dense], np.cumsum(first[dense]) - 1] = 1.0
    counts = x @ x.T
    # the pairs (a, b), a before b, of the entries of one sparse column: each adds to (i, j) and (j, i)
    after = np.repeat(start + held, held)[~dense] - np.flatnonzero(~dense) - 1  # entries after a
    a = np.repeat(np.flatnonzero(~dense), after)
    b = a + 1 + np.arange(len(a)) - np.repeat(np.cumsum(after) - after, after)
    pair, n_pairs = np.unique(t[a] * n_texts + t[b], return_counts=True)
    i, j = np.divmod(pair, n_texts)
    counts[i, j] += n_pairs
    counts[j, i] += n_pairs
    return counts.astype(np.int64)


def _match_counts(ids: np.ndarray, owner: np.ndarray, lens: np.ndarray, n_texts: int) -> list[np.ndarray]:
    """Clipped n-gram match counts for every pair, one symmetric int matrix per order."""
    starts = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64) if n_texts else lens
    pos_in_text = np.arange(len(ids), dtype=np.int64) - np.repeat(starts, lens)
    vocab = int(ids.max()) + 1 if len(ids) else 1
    code = ids.copy()  # n-gram id of the n-gram starting at each position (order 1: the token)
    out: list[np.ndarray] = []
    for n in range(1, MAX_ORDER + 1):
        if n > 1:
            # extend every (n-1)-gram by the token that follows it, then renumber densely;
            # positions whose n-gram crosses a text boundary get codes that are never used
            nxt = np.zeros_like(ids)
            shifted = ids[n - 1 :]
            nxt[: len(shifted)] = shifted
            code = np.unique(code * vocab + nxt, return_inverse=True)[1].astype(np.int64).ravel()
        valid = pos_in_text + n <= np.repeat(lens, lens)
        counts = _shared(*_columns(code[valid], owner[valid], n_texts), n_texts)
        np.fill_diagonal(counts, np.maximum(lens - n + 1, 0))  # a text matches all its own n-grams
        out.append(counts)
    return out


def pairwise_bleu(texts: Sequence[str]) -> np.ndarray:
    """``B[i, j]`` = sentence BLEU of hypothesis ``texts[i]`` against reference ``texts[j]``,
    in [0, 1] (sacrebleu's score / 100). Not symmetric."""
    n_texts = len(texts)
    if n_texts == 0:
        return np.zeros((0, 0))
    ids, owner, lens = _token_ids([tokenize(t) for t in texts])
    correct = _match_counts(ids, owner, lens, n_texts)

    log_sum = np.zeros((n_texts, n_texts))
    smooth = np.ones((n_texts, n_texts))
    with np.errstate(divide="ignore", invalid="ignore"):
        for n in range(1, MAX_ORDER + 1):
            total = np.maximum(lens - n + 1, 0)
            active = (total > 0)[:, None]  # sacrebleu stops at the first order with no n-grams
            t = np.where(total > 0, total, 1).astype(np.float64)[:, None]
            c = correct[n - 1]
            zero = c == 0
            smooth = np.where(zero & active, smooth * 2.0, smooth)
            prec = np.where(zero, 100.0 / (smooth * t), 100.0 * c / t)
            log_sum += np.where(active, np.log(prec), 0.0)
        eff = np.minimum(lens, MAX_ORDER).astype(np.float64)[:, None]
        hyp_len = lens.astype(np.float64)[:, None]
        ref_len = lens.astype(np.float64)[None, :]
        bp = np.where(hyp_len < ref_len, np.exp(1.0 - ref_len / hyp_len), 1.0)
        bp = np.where(hyp_len > 0, bp, 0.0)
        score = bp * np.exp(log_sum / np.where(eff > 0, eff, 1.0))
    any_match = np.zeros((n_texts, n_texts), dtype=bool)
    for c in correct:
        any_match |= c > 0
    return np.where(any_match & (eff > 0), score, 0.0) / 100.0


def bleu(hypothesis: str, reference: str) -> float:
    """One pair, same definition as :func:`pairwise_bleu`."""
    return float(pairwise_bleu([hypothesis, reference])[0, 1])


def pairwise_bleu_distance(texts: Sequence[str]) -> np.ndarray:
    """``d_ij = 1 - (BLEU(x_i, x_j) + BLEU(x_j, x_i)) / 2``, zero diagonal. BLEU is asymmetric,
    so both directions are averaged: the clustering then does not depend on the order of the
    batch, which R-Zero's "i is the hypothesis for i < j" would."""
    b = pairwise_bleu(texts)
    d = 1.0 - (b + b.T) / 2.0
    np.fill_diagonal(d, 0.0)
    return d
