"""Average-linkage agglomerative clustering cut at a distance threshold, in numpy.

The clusters are scikit-learn's ``AgglomerativeClustering(linkage="average",
metric="precomputed", distance_threshold=t)``, ties included. scikit-learn builds the tree with
scipy's nearest-neighbour chain and keeps the merges whose height is below ``t``; this module runs
the same chain: it starts at the lowest index still a cluster, follows nearest neighbours (the
lowest index among equal distances, the previous link of the chain before any other), merges the
first mutual pair into the higher index, and updates distances by Lance-Williams,
``(n_x d(x, i) + n_y d(y, i)) / (n_x + n_y)``, in the same floating-point operations. Average
linkage is reducible, so the chain yields the greedy algorithm's dendrogram in O(n^2) time, here
with O(n) numpy calls of O(n) work each.

scikit-learn's threshold is "the linkage distance threshold at or above which clusters will not be
merged": it sorts the merges by height, labels each as joining the clusters that hold its two
points, and keeps those below ``t``. The clusters are therefore the connected components of the
chain's merges below ``t``, which ``owner`` tracks merge by merge.
"""

from __future__ import annotations

import numpy as np

_COMPACT_FROM = 64  # the matrix shrinks to the clusters left each time they halve, down to this many


def average_linkage_clusters(distances: np.ndarray, threshold: float) -> np.ndarray:
    """One label (0, 1, ...) per point: the clusters that average linkage forms from the symmetric
    matrix ``distances`` when it merges only below ``threshold``."""
    d = np.array(distances, dtype=np.float64)
    n = len(d)
    np.fill_diagonal(d, np.inf)
    gone = np.zeros(n)  # inf for a row whose cluster was merged away: never a neighbour again
    size = np.ones(n, dtype=np.int64)
    point = np.arange(n)  # the point whose index names a row's cluster in the chain
    owner = np.arange(n)  # the cluster, by that name, that each point is in below the threshold
    chain: list[int] = []
    for alive in range(n, 1, -1):
        if 2 * alive <= len(d) and alive >= _COMPACT_FROM:  # drop the merged-away rows
            keep = np.flatnonzero(gone == 0)
            d, gone, size, point = d[np.ix_(keep, keep)], gone[keep], size[keep], point[keep]
            chain = np.searchsorted(keep, chain).tolist()
        if not chain:
            chain.append(int(np.argmin(gone)))
        while True:
            x = chain[-1]
            row = d[x] + gone
            y = int(row.argmin())
            if len(chain) > 1 and row[y] >= row[chain[-2]]:
                break
            chain.append(y)
        y = chain[-2]
        del chain[-2:]
        x, y = min(x, y), max(x, y)
        height = d[x, y]
        nx, ny = int(size[x]), int(size[y])
        d[y] = d[:, y] = (nx * d[x] + ny * d[y]) / (nx + ny)  # inf at x and y, from the diagonal
        gone[x] = np.inf
        size[y] = nx + ny
        if height < threshold:
            owner[owner == point[x]] = point[y]
    return np.unique(owner, return_inverse=True)[1].ravel()
