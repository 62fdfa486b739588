"""How much untrusted text the log keeps and the HTTP clients read, and how many requests one
call may draw (``[limits]``).

Not the method's: a setting of how the log stores the texts it is given (:mod:`diagevo.schemas`
bounds each text field with it), of how much of a reply the clients read, and of what a typo can
ask for. It sits low, beside the event schemas that apply it; a stored config carries it and the
readers validate it here.
"""

from __future__ import annotations

from diagevo.config.base import Section, run_setting


class LimitsConfig(Section):
    """``[limits]``: how much untrusted text (replies, responses, questions, notes) the log keeps
    and the HTTP clients read, and how many requests one call draws. A longer text is stored cut,
    and its event's data names the whole text's length and SHA-256 under ``cut``."""

    text_bytes: int = run_setting(
        default=65536,
        ge=1024,
        le=2**30,
        description="Longest stored text of a reply, a response, a question or a reference, in UTF-8 bytes "
        "(64 KiB: the paper's 8k-token completions fit).",
    )
    phrase_bytes: int = run_setting(
        default=4096,
        ge=64,
        le=2**20,
        description="Longest stored short phrase (a cause description, a node label, a reason, a note), in "
        "UTF-8 bytes.",
    )
    reply_factor: int = run_setting(
        default=16,
        ge=1,
        le=1024,
        description="The HTTP clients stop reading a reply body past reply_factor x text_bytes (per choice asked "
        "for) and count the call as failed.",
    )

    requests: int = run_setting(
        default=100_000,
        ge=1,
        le=10_000_000,
        description="The most generation requests one call draws (Round.requests, round requests --n): more is "
        "refused before any is drawn (a round of the paper asks for a few hundred).",
    )

    lock_wait_s: float = run_setting(
        default=60.0,
        gt=0,
        le=3600,
        description="PostgreSQL: the longest an append waits for the log's append lock, in seconds; then it fails "
        "naming the session that holds it.",
    )

    @property
    def reply_bytes(self) -> int:
        """The most bytes of one reply body the HTTP clients read."""
        return self.reply_factor * self.text_bytes
