"""Route specs by family name (``route(name)``): the specs of :mod:`rxstream.families`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ._spec import RouteSpec

__all__ = ["PRESETS", "preset"]


class _Presets(Mapping[str, RouteSpec]):
    """Family name -> its :class:`RouteSpec` (read from the family registry on first use)."""

    def _specs(self) -> dict[str, RouteSpec]:
        from ..families import families

        return {f.name: f.spec for f in families()}

    def __getitem__(self, name: str) -> RouteSpec:
        return self._specs()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs())

    def __len__(self) -> int:
        return len(self._specs())

    def __repr__(self) -> str:
        return f"PRESETS({', '.join(sorted(self))})"


PRESETS: Mapping[str, RouteSpec] = _Presets()
"""Family name -> :class:`RouteSpec` (channels ``reasoning``, ``content``, ``tool_call``): one
per module of :mod:`rxstream.families`."""


def preset(name: str) -> RouteSpec:
    """The spec of the family called ``name`` or one of its aliases; ValueError naming the known
    ones."""
    from ..families import family

    return family(name, "route").spec
