"""One cause's story: ``memory why``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diagevo.results import JsonRow


@dataclass(frozen=True)
class CauseStory:
    """``memory why --json``: one cause's description and node and its timeline (creation,
    attributions with their failures, promotions, reactivations, merges) in log order;
    ``attributions`` counts them all, ``more_attributions`` those left out of ``timeline``."""

    run: str
    cause_id: str
    story: JsonRow  # the cause's fields as the log holds them, ``timeline`` included
    attributions: int
    more_attributions: int

    @property
    def timeline(self) -> list[JsonRow]:
        entries = self.story.get("timeline")
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            **self.story,
            "attributions": self.attributions,
            "more_attributions": self.more_attributions,
        }
