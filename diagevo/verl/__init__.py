"""verl as the trainer of a DiagEvo run: the reward functions verl calls, and the files between them.

verl (Ray; FSDP or Megatron; vLLM or SGLang rollouts) trains both roles; diagevo keeps the
memory, through the round protocol, between verl's runs:

- :func:`export_round` (``diagevo export verl``) writes a round as Parquet in the layout of
  verl's ``RLHFDataset``: the challenger's update prompts, the requests Q^cur is generated from,
  the generated questions as solver prompts and, once recorded, the retained questions with
  their pseudo-labels; and the manifest ``verl.json`` (the batch settings to train with, and what
  a rollout dump must match);
- :func:`generated_candidates` (``diagevo round record --from-verl``) reads verl's generation of
  the solver's construction responses back as the round's candidates;
- :func:`compute_score` is the solver's reward and :func:`challenger_score` the challenger's (a
  batch function); verl loads them with ``reward.custom_reward_function.path=pkg://diagevo.verl``
  (or the path of this file) and ``.name``, the challenger's through the reward manager
  ``diagevo.verl.manager.StepRewardManager``, which hands it a whole step;
- :func:`rollout_failures` (``diagevo diagnose --from-verl``) reads verl's rollout dumps
  (``trainer.rollout_data_dir``) back into the round's failures, for diagnosis.

Importing this module needs neither verl nor pyarrow: verl needs diagevo, not the other way
round (only ``diagevo.verl.manager``, which verl loads, imports verl), and only the export and
the reading of verl's generation output need pyarrow. The recipe: `diagevo docs how-to/verl`; its verl
configs and script ship with diagevo (`diagevo docs --path examples/verl_round.sh`).
"""

from diagevo.verl.dumps import rollout_failures
from diagevo.verl.parquet import VerlExport, VerlFile, export_round, generated_candidates
from diagevo.verl.rewards import challenger_score, compute_score

__all__ = [
    "VerlExport",
    "VerlFile",
    "challenger_score",
    "compute_score",
    "export_round",
    "generated_candidates",
    "rollout_failures",
]
