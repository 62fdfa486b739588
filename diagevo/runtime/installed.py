"""What is installed, looked up without importing it: a distribution's version, whether a module
can be imported, and the packages of each of diagevo's extras (read from its own metadata). What
:mod:`diagevo.doctor`'s checks and a GPU check's report read."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from collections.abc import Sequence


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def module_present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


EXTRAS = {
    "embed": 'the full MiniLM embedder (diagnosis.embedder = "local"); the default static one needs nothing',
    "index": "the vector index on disk for a slow or paid embedder (memory reindex)",
    "data": "Parquet: export dataset, export verl's files, eval's benchmark files, a run's frames in polars",
    "hf": "real models on a CPU or one GPU: the hf backend (TRL's GRPO), eval, models tiny / smollm2",
    "gpu": "several GPUs and vLLM's sampling",
    "verl": "verl trains both roles (its trainer loads diagevo.verl's rewards): diagevo docs how-to/verl",
    "test": "the test suite, the linters and the release build (working on diagevo)",
    "docs": "the documentation site, built offline with mkdocs",
    "bench": "the benchmarks' comparison with a peer (benchmarks/bench_peers.py)",
}
"""What each of diagevo's extras enables (tests/test_doctor_extras.py holds the names equal)."""

SHOWN = 4  # the packages an extra's line names with their versions (--json: all of them)
EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]*)\])?")


def extra_packages(requires: Sequence[str]) -> dict[str, list[str]]:
    """Each extra's distributions, from the package's ``Requires-Dist`` lines, an extra that names
    diagevo's own extras (``diagevo[embed,index,data]``) expanded."""
    direct: dict[str, list[tuple[str, list[str]]]] = {}
    for line in requires:
        marker = EXTRA_MARKER.search(line)
        named = REQUIREMENT.match(line)
        if marker and named:
            inner = [e.strip() for e in (named.group(2) or "").split(",") if e.strip()]
            direct.setdefault(marker.group(1), []).append((named.group(1), inner))

    def expand(extra: str, seen: frozenset[str]) -> list[str]:
        """The extra's own packages first, then those of the extras it names."""
        named = direct.get(extra, [])
        out = [name for name, _ in named if name.lower() != "diagevo"]
        nested = (e for name, inner in named if name.lower() == "diagevo" for e in inner if e not in seen)
        out += [d for e in nested for d in expand(e, seen | {e})]
        return list(dict.fromkeys(out))

    return {extra: expand(extra, frozenset({extra})) for extra in direct}
