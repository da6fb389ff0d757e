"""A strict YAML reader for hand-written configuration files such as ``params.yaml``.

Plain ``yaml.safe_load`` accepts four things that turn a careless or hostile file into silent
damage; this reader refuses each with a :class:`~veilbench.validation.UsageError` naming the file
and line:

* bytes that are not UTF-8 (the position of the first bad byte is named);
* a file larger than ``max_bytes`` (the default, 1 MiB, is 30 times the default ``params.yaml``);
* a key given twice in one mapping (``safe_load`` keeps the last one without a word, while DVC,
  which reads the same file, refuses it later);
* anchors, aliases and merge keys (``&a``, ``*a``, ``<<``): a few lines of aliases expand to
  gigabytes (the "billion laughs"), and nothing in a params file needs them;
* a mapping key that YAML reads as something other than a string, e.g. a dataset named ``no``
  or ``on`` (YAML 1.1 booleans) or ``1e3`` (a float): the key must be quoted;
* nesting deeper than :data:`MAX_DEPTH` (``[[[[…]]]]`` 10⁵ levels deep would exhaust the reader's
  recursion: an internal error instead of a message).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from veilbench.validation import UsageError

#: Default size limit of a configuration file, in bytes.
MAX_BYTES = 1 << 20
#: Deepest nesting of mappings and lists accepted (a params file needs about 6 levels).
MAX_DEPTH = 64


class YamlError(UsageError, ValueError):
    """A configuration file that is not strict YAML: the message names the file and line."""


def _where(name: str, mark: Any) -> str:
    return f"{name}, line {mark.line + 1}" if mark is not None else name


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without anchors, aliases, duplicate keys or non-string keys."""

    source_name = "<yaml>"
    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if self.depth >= MAX_DEPTH:
            raise YamlError(f"{_where(self.source_name, event.start_mark)}: nested more than {MAX_DEPTH} levels deep; "
                            f"a configuration file needs far fewer")
        self.depth += 1
        try:
            return self._compose_checked(event, parent, index)
        finally:
            self.depth -= 1

    def _compose_checked(self, event: Any, parent: Any, index: Any) -> Any:
        if isinstance(event, yaml.AliasEvent):
            raise YamlError(f"{_where(self.source_name, event.start_mark)}: YAML aliases (*{event.anchor}) are not "
                            f"allowed; write the value out")
        if getattr(event, "anchor", None) is not None:
            raise YamlError(f"{_where(self.source_name, event.start_mark)}: YAML anchors (&{event.anchor}) are not "
                            f"allowed; write the value out")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            return super().construct_mapping(node, deep=deep)
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise YamlError(f"{_where(self.source_name, key_node.start_mark)}: YAML merge keys (<<) are not "
                                f"allowed; write the keys out")
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise YamlError(
                    f"{_where(self.source_name, key_node.start_mark)}: the key {key_node.value!r} is read by YAML as "
                    f"the {type(key).__name__} {key!r}, not as a name; quote it ('{key_node.value}')")
            if key in seen:
                raise YamlError(f"{_where(self.source_name, key_node.start_mark)}: the key {key!r} is given twice in "
                                f"one mapping (first at line {seen[key].line + 1}); keep one")
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def loads(data: bytes, name: str = "<yaml>", max_bytes: int = MAX_BYTES) -> Any:
    """Parse the YAML document ``data`` (bytes, UTF-8) strictly; ``name`` is used in messages."""
    if len(data) > max_bytes:
        raise YamlError(f"{name}: {len(data)} bytes is larger than the limit of {max_bytes} bytes for a "
                        f"configuration file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise YamlError(f"{name}, line {line}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
                        f"save the file as UTF-8") from None
    loader = _StrictLoader(text)
    loader.source_name = name
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise YamlError(f"{name}: not valid YAML ({exc})") from None
    finally:
        loader.dispose()


def load(path: str | Path, max_bytes: int = MAX_BYTES) -> Any:
    """Read and strictly parse the YAML file at ``path`` (see :func:`loads`)."""
    p = Path(path)
    if not p.is_file():
        raise YamlError(f"{p}: file not found")
    if p.stat().st_size > max_bytes:
        raise YamlError(f"{p}: {p.stat().st_size} bytes is larger than the limit of {max_bytes} bytes for a "
                        f"configuration file")
    return loads(p.read_bytes(), str(p), max_bytes)
