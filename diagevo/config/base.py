"""The base of every config section, and how a config that is refused is named.

A run is configured by one TOML file of sections (tables). Each section is one class, beside the
lowest part of diagevo that reads it (the round protocol's in :mod:`diagevo.config.sections`, each
backend's beside the backend), derived from :class:`Section`: strict (an unknown name is
refused), checked again on assignment, and refusing with a :class:`ConfigError` that names the
field at fault by its dotted name, a nested one included, with the names it most likely means as
data. Only ``cli/`` spells those as command-line options; a message here names fields and TOML
tables, never a command.
"""

from __future__ import annotations

import difflib
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import getitem
from pathlib import Path
from typing import Annotated, Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from diagevo.config.errors import ConfigError
from diagevo.errors import BadInput, Call
from diagevo.text.parsing import MAX_CHARS, MAX_DEPTH, bad, depth, quoted
from diagevo.text.redaction import redact_config

S = TypeVar("S", bound=BaseModel)

# the ranges many fields share, each stated once (a field of another range declares it itself)
Count = Annotated[int, Field(ge=1)]
Share = Annotated[float, Field(ge=0, le=1)]  # a share or a probability
Cosine = Annotated[float, Field(ge=-1, le=1)]  # a cosine similarity
Logit = Annotated[float, Field(ge=-10, le=10)]
Positive = Annotated[float, Field(gt=0)]
PositiveShare = Annotated[float, Field(gt=0, le=1)]  # a top-p, a learning rate
NonNegative = Annotated[float, Field(ge=0)]

LARGEST_INT = 2**63 - 1
"""The largest whole number a config field takes, unless the field declares a narrower range:
a signed 64-bit integer, what SQLite and PostgreSQL store as a number."""


class Section(BaseModel):
    """A table of the config file."""

    # strict: a number is a number (TOML's `rounds = true` or "3" is no count), a flag a boolean;
    # paths, which TOML and the stored config hold as strings, are the fields that relax it.
    # No infinity or NaN (`inf`, `nan`, `1e309`): the log stores JSON, where one becomes null,
    # and a config read back with a null where a number was is no config
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)

    ordered: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Pairs of fields ``(low, high)`` whose values a section holds in that order."""

    # pydantic calls a model's own __init__ for each nested section too: the innermost refusal
    # travels out as a ConfigError inside pydantic's error, and :func:`first_error` takes it out
    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(first_error(exc), type(self)) from None

    def __setattr__(self, name: str, value: Any) -> None:  # checked again on assignment, refused alike
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise config_error(first_error(exc), type(self)) from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise config_error(first_error(exc), cls) from None

    def overridden(self, overrides: Sequence[str]) -> Self:
        """This config with ``overrides`` (``section.field=value``) applied, checked as a new one
        (a refusal names the override): how a saved config is changed, by a fork, a what-if, a
        ``round start --set`` or a resumed run, is one rule."""
        return checked(type(self), apply_overrides(self.model_dump(mode="json"), overrides), overrides=overrides)

    @model_validator(mode="after")
    def _in_order(self) -> Self:
        for low, high in self.ordered:
            if getattr(self, low) > getattr(self, high):
                raise ValueError(f"need {low} <= {high}")
        return self

    @field_validator("*", mode="after", check_fields=False)
    @classmethod
    def _whole_number_in_range(cls, value: Any) -> Any:
        """A whole number of any field is within :data:`LARGEST_INT` either way (a field declares
        a narrower range itself): what the log's databases store as a number, so that a typo's
        ``10**30`` is a config error, never a number that overflows later."""
        if isinstance(value, int) and not isinstance(value, bool) and not -LARGEST_INT <= value <= LARGEST_INT:
            digits = len(str(abs(value)))
            raise ValueError(f"Input should be at most {LARGEST_INT:,} either way, not a number of {digits} digits")
        return value


def first_error(exc: ValidationError) -> dict[str, Any]:
    """The first error of ``exc`` with its whole location. A section's own :class:`ConfigError`
    (raised while a section nested in it was validated, or by a check of its own) is reported by
    pydantic as a value error where it was raised: it is taken out, its location prefixed."""
    err: dict[str, Any] = dict(exc.errors(include_url=False)[0])
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, ConfigError):
        return {**inner.error, "loc": (*err["loc"], *inner.error["loc"])}
    return err


def checked(model: type[S], data: Any, *, overrides: Sequence[str] = (), path: Path | None = None) -> S:
    """``data`` validated as ``model``, a refusal named where the data came from: an override
    (``section.field=value``) of ``overrides``, or the TOML file at ``path``."""
    try:
        return model.model_validate(data)
    except ConfigError as exc:
        raise config_error(exc.error, model, overrides, path) from None


def config_error(
    error: Mapping[str, Any], model: type[BaseModel], overrides: Sequence[str] = (), path: Path | None = None
) -> ConfigError:
    """A refusal of ``model`` as one line naming the field: ``config: grpo.top_p: Input should be
    ...``; an unknown section or field named where it was given (an override of ``overrides`` or
    the TOML file ``path``) with the names it most likely means."""
    loc = tuple(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden" and loc:
        return _unknown(loc, error, model, overrides, path)
    where = ".".join(loc)
    msg = str(error["msg"]).removeprefix("Value error, ")
    return ConfigError(f"config: {where}: {msg}" if where else f"config: {msg}", error=error)


# --- fields, sections and the names meant ---------------------------------------------------


def _section_type(info: FieldInfo) -> type[BaseModel] | None:
    sub = info.annotation
    return sub if isinstance(sub, type) and issubclass(sub, BaseModel) else None


def _tree(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo, type[BaseModel] | None]]:
    """Every field of ``model``, dotted (``memory.k``), with its section's class where it is a
    section, in the order a TOML file lists them: a table's own keys, then its tables, each
    followed by what it holds."""
    for name, info in sorted(model.model_fields.items(), key=lambda item: _section_type(item[1]) is not None):
        sub = _section_type(info)
        yield prefix + name, info, sub
        if sub:
            yield from _tree(sub, f"{prefix}{name}.")


def run_setting(**kwargs: Any) -> Any:
    """A field of how a run is carried out (on what, where, how long to wait), not of the method
    (the paper's Tables 7-9 and its ablations): a section holds both where one part of diagevo
    reads both; what a run changed of the method (``field_names(method=True)``) leaves it out."""
    return Field(json_schema_extra={"method": False}, **kwargs)


def field_names(model: type[BaseModel], *, method: bool = False) -> list[str]:
    """Every settable field of ``model``, dotted (``memory.k``), in the file's order; with
    ``method``, the method's alone (no :func:`run_setting`)."""
    return [
        name
        for name, info, sub in _tree(model)
        if not sub and not (method and info.json_schema_extra == {"method": False})
    ]


def section_names(model: type[BaseModel]) -> list[str]:
    """Every section (TOML table) of ``model``, dotted (``sim.params``), in the file's order,
    then the tables a config carries for others (``other_tables``)."""
    sections = [name for name, _, sub in _tree(model) if sub]
    return list(dict.fromkeys([*sections, *getattr(model, "other_tables", ())]))


def suggest_fields(model: type[BaseModel], key: str) -> list[str]:
    """The fields an unknown ``key`` most likely means: the field of a flat name the config
    takes (``k`` -> ``memory.k``), the fields whose last part is the key's, else the closest."""
    if len(key) > 100:  # no one misspells a name this long
        return []
    flat: Mapping[str, str] = getattr(model, "flat_names", {})
    if key in flat:
        return [flat[key]]
    names = field_names(model)
    last = key.rsplit(".", 1)[-1]
    # a section and its field joined into one name (``grpo.solver_group_size``, ``hf.solver_model``)
    joined = [f"{s}.{last[len(s) + 1 :]}" for s in section_names(model) if last.startswith(s.rsplit(".")[-1] + "_")]
    if any(name in names for name in joined):
        return [name for name in joined if name in names]
    same = [n for n in names if n.rsplit(".", 1)[-1] == last]
    if same:
        return same[:4]
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.75)
    if close:
        return close
    lasts = difflib.get_close_matches(last, sorted({n.rsplit(".", 1)[-1] for n in names}), n=2, cutoff=0.75)
    return [n for n in names if n.rsplit(".", 1)[-1] in lasts][:4]


def suggest_sections(model: type[BaseModel], key: str) -> list[str]:
    """The sections an unknown section ``key`` (dotted) most likely means: those whose last part
    is the key's (``params`` -> ``sim.params``), else the closest of its siblings, else the
    closest names, case aside."""
    if len(key) > 100:
        return []
    names = section_names(model)
    parent, _, last = key.lower().rpartition(".")
    same = [n for n in names if n.rsplit(".", 1)[-1] == last]
    if same:
        return same[:3]
    siblings = [n for n in names if n.rpartition(".")[0] == parent]
    close = difflib.get_close_matches(key.lower(), siblings, n=2, cutoff=0.6)
    return close or difflib.get_close_matches(key.lower(), names, n=2, cutoff=0.75)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]{1,40}")


def _toml_key(parts: Sequence[str]) -> str:
    """A dotted name as a TOML key: bare parts as they are, any other quoted (and shortened)."""
    return ".".join(p if _BARE_KEY.fullmatch(p) else quoted(p, 40) for p in parts)


def _in_table(dotted: str) -> str:
    """``memory.k`` -> ``k in [memory]``; a top-level field is its name."""
    table, _, name = dotted.rpartition(".")
    return f"{name} in [{table}]" if table else name


def _unknown(
    loc: tuple[str, ...], error: Mapping[str, Any], model: type[BaseModel], overrides: Sequence[str], path: Path | None
) -> ConfigError:
    """An unknown section or field, named where it was given (an override or the TOML file),
    with the names it most likely means."""
    key = ".".join(loc)
    given = {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in overrides)}
    in_file = path is not None and not any(k == key or k.startswith(key + ".") for k in given)
    if isinstance(error.get("input"), Mapping):  # a table: an unknown section
        return _unknown_section(loc, error, model, path if in_file else None)
    meant = suggest_fields(model, key)
    if in_file:
        where = f"in [{_toml_key(loc[:-1])}]" if len(loc) > 1 else "at the top level"
        said = f"{path}: unknown field {_toml_key(loc[-1:])} {where}"
        table = key.rpartition(".")[0]
        shown = [g.rpartition(".")[2] if g.rpartition(".")[0] == table else _in_table(g) for g in meant]
    else:
        said, shown = f"unknown config field {quoted(key, 60)}", meant
    if not meant:  # ``diagevo config`` prints every field, described
        said += " (the fields are listed by"
        return ConfigError(
            said, error=error, unknown="field", fix=Call("Config", "diagevo.Config.model_fields"), then=")"
        )
    value = given.get(key)
    return ConfigError(said, error=error, unknown="field", meant=meant, shown=shown, value=value)


def _unknown_section(
    loc: tuple[str, ...], error: Mapping[str, Any], model: type[BaseModel], path: Path | None
) -> ConfigError:
    key = ".".join(loc)
    meant = suggest_sections(model, key)
    parent = key.rpartition(".")[0]
    if path is not None:
        said, shown = f"{path}: unknown table [{_toml_key(loc)}]", [f"[{g}]" for g in meant]
    else:
        said, shown = f"unknown config section {quoted(key, 60)}", meant
    if meant:
        return ConfigError(said, error=error, unknown="section", meant=meant, shown=shown)
    siblings = [s for s in section_names(model) if s.rpartition(".")[0] == parent]
    if siblings:
        known = ", ".join(f"[{s}]" if path else s for s in siblings)
        said += f" (the {'tables' if path else 'sections'}: {known})"
    else:
        said += f": {'[' + parent + ']' if path else parent} has no sections"
    return ConfigError(said, error=error, unknown="section")


# --- overrides and the rows of ``diagevo config`` -------------------------------------------


def toml_loads(text: str, where: str = "") -> dict[str, Any]:
    """Parse TOML with the same bounded depth as JSON (tomllib recurses); a syntax error is
    ``tomllib.TOMLDecodeError`` as usual, too deep or a number too long for Python to read is
    :class:`BadInput`."""
    if len(text) > MAX_CHARS:
        raise bad(where, f"{len(text):,} characters, more than the limit of {MAX_CHARS:,}")
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise bad(where, f"TOML nested deeper than {MAX_DEPTH} levels") from None
    except tomllib.TOMLDecodeError:
        raise
    except ValueError:  # Python reads no integer of more than sys.get_int_max_str_digits() digits
        raise bad(where, f"a whole number of more than {sys.get_int_max_str_digits():,} digits") from None
    if depth(data) > MAX_DEPTH + 1:  # the document itself is a table
        raise bad(where, f"TOML nested deeper than {MAX_DEPTH} levels")
    return data


def _coerce(value: str, key: str = "") -> Any:
    try:
        return toml_loads(f"v = {value}", f"config: {key}" if key else f"value {value[:40]!r}")["v"]
    except tomllib.TOMLDecodeError:
        return value


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``section.field=value`` pairs to ``data`` (a config as its file holds it); values
    are read as TOML scalars when they can be, else as text."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"override {item!r} is not of the form section.field=value")
        node = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise BadInput(f"override {item!r}: {part} is not a section")
        node[parts[-1]] = _coerce(value.strip(), key.strip())
    return data


@dataclass(frozen=True, slots=True)
class Setting:
    """One field of a resolved config, as ``diagevo config`` shows it."""

    key: str  # dotted: section.field
    value: Any  # JSON-ready; secrets redacted
    default: Any
    help: str


def settings(config: BaseModel) -> list[Setting]:
    """Every field of ``config`` in the file's order, with its value, default and description.
    Secrets (an API key, the password of a URL) are redacted."""
    values, defaults = (redact_config(c.model_dump(mode="json")) for c in (config, type(config)()))
    return [
        Setting(key, _at(values, key), _at(defaults, key), info.description or "")
        for key, info, sub in _tree(type(config))
        if not sub
    ]


def _at(data: Mapping[str, Any], dotted: str) -> Any:
    return reduce(getitem, dotted.split("."), data)
