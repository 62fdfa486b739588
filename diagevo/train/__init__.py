"""Training: the co-evolution loop and its backends.

:mod:`~diagevo.train.run` trains a run (its id, its config when resumed, the preflight, the
backend, this process's rank in a launch); :mod:`~diagevo.train.loop` is the loop a round at a
time; :mod:`~diagevo.train.backend` the interface to the models, which :mod:`~diagevo.train.sim`
(the CPU simulator) and :mod:`~diagevo.train.hf` (transformers + TRL, the ``hf`` extra) implement;
:mod:`~diagevo.train.config` the config of a run, which the round protocol's commands, ``doctor``
and ``models`` read without loading any of the rest."""
