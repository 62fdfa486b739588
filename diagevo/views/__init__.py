"""Every view derived from the log, in one place: the memory at round N with its snapshots
(:mod:`~diagevo.views.memory`), the per-round statistics (:mod:`~diagevo.views.stats`), the
stories of causes (:mod:`~diagevo.views.stories`), the vector index (:mod:`~diagevo.views.index`),
verification of the log and of every saved state (:mod:`~diagevo.views.verify`), and the read
commands' values (:mod:`~diagevo.views.queries`).

A view only reads the log; what it saves is a cache (:class:`diagevo.log.ViewState`), read only
where the log vouches for it, and always rebuildable.
"""

INDEX_VIEW = "vector_index"
"""The name the vector index (:mod:`~diagevo.views.index`) saves its state under: here, so that
verification, which checks every view's saved states, knows it without loading the index's numpy."""
