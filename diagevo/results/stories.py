"""One cause's story: ``memory why``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the story's types are the view's, below this layer only for the type checker
    from diagevo.views.stories import Entry, Story


@dataclass(frozen=True)
class CauseStory:
    """``memory why --json``: one cause's description and node and its timeline (creation,
    attributions with their failures, promotions, reactivations, merges) in log order;
    ``attributions`` counts them all, ``more_attributions`` those left out of ``timeline``."""

    run: str
    story: Story
    attributions: int

    @property
    def cause_id(self) -> str:
        return self.story.cause_id

    @property
    def timeline(self) -> list[Entry]:
        return self.story.timeline

    @property
    def more_attributions(self) -> int:
        return max(0, self.attributions - self.story.attributions())

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            **self.story.to_dict(),
            "attributions": self.attributions,
            "more_attributions": self.more_attributions,
        }
