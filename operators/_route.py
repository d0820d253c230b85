"""The ``route`` operator: split a text or aligned stream into channel segments (SEMANTICS §8)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reactivex import Observable, abc
from reactivex.disposable import Disposable

from rxstream._finish import Finish, FinishCallback, FinishReason
from rxstream._piece import Piece
from rxstream.channels import RouteSpec, Segment, route_spec
from rxstream.channels._presets import preset
from rxstream.channels._router import CompiledRoute, Router

from ._sink import OperatorSink, attribute_probe, describe, operator

__all__ = ["resolve_spec", "route"]


def resolve_spec(spec: Any, *, default: str | None = None, owner: str = "route") -> RouteSpec:
    """A :class:`RouteSpec` from a spec, a preset name, a plain mapping or a response template."""
    if isinstance(spec, RouteSpec):
        if default is not None and default != spec.default:
            raise ValueError(f"{owner}: default={default!r} applies to a mapping spec, not a RouteSpec")
        return spec
    if isinstance(spec, str):
        return preset(spec)
    if isinstance(spec, Mapping):
        if "fields" in spec:  # a transformers response_template
            from rxstream.channels import load_response_template

            return load_response_template(spec).spec
        return route_spec(spec, default="content" if default is None else default)
    raise TypeError(
        f"{owner}: spec must be a RouteSpec, a preset name or a mapping {{channel: (open, close)}}, "
        f"got {type(spec).__name__}: {describe(spec)}"
    )


class _RouteSink(OperatorSink[Any, Segment]):
    __slots__ = ("compiled", "held_now", "kind", "prompt", "router")

    def __init__(
        self,
        observer: abc.ObserverBase[Segment],
        compiled: CompiledRoute,
        prompt: str,
        on_finish: FinishCallback | None,
    ) -> None:
        super().__init__("route", observer, on_finish)
        self.compiled = compiled
        self.prompt = prompt
        self.router: Router | None = None
        self.held_now = False
        self.kind: type = str

    def holding(self) -> bool:
        return self.router is not None and bool(self.router.held)

    def holding_probe(self) -> Callable[[], bool]:
        return attribute_probe(self, "holding", "held_now")  # set after each item: read in C

    def run(self, source: Observable[Any], scheduler: abc.SchedulerBase | None) -> abc.DisposableBase:
        self.subscribe_to(source, self._next, scheduler)
        return Disposable(self.dispose)

    def _next(self, value: Any) -> None:
        """``_guarded_next`` and ``on_next`` in one call (the per-item path)."""
        if self.done:
            return
        try:
            router = self.router
            if router is None or type(value) is not self.kind:
                router = self._start(value)
            segments = router.feed(value) if self.kind is str else router.feed_piece(value)
            self.held_now = router.holding  # for the meter: read after the item, without a call
            on_next = self.observer.on_next
            for segment in segments:
                if self.done:
                    return
                on_next(segment)
        except Exception as exc:
            if self.done:
                raise
            self.fail(exc)

    def on_next(self, value: Any) -> None:  # pragma: no cover - run() subscribes _next
        self._next(value)

    def _start(self, value: Any) -> Router:
        """The first item decides the input kind; a later item of another kind is an error."""
        router = self.router
        if router is None:
            if not isinstance(value, str | Piece):
                raise TypeError(
                    f"route: items must be str or Piece, got {type(value).__name__}: {describe(value)}"
                )
            self.kind = str if isinstance(value, str) else Piece
            router = self.router = Router(self.compiled, prompt=self.prompt, aligned=self.kind is Piece)
            if isinstance(value, self.kind):
                return router
        if not isinstance(value, self.kind):
            kind = "str" if self.kind is str else "Piece"
            raise TypeError(f"route: a stream of {kind} items got {type(value).__name__}: {describe(value)}")
        return router  # a subclass of str or Piece

    def on_completed(self) -> None:
        if self.router is not None:
            for segment in self.router.finish():
                if self.done:
                    return
                self.emit(segment)
        self.end(Finish(FinishReason.EOS), dispose=False)

    def take_held(self) -> tuple[int, ...]:
        router = self.router
        return () if router is None else router.take_held()

    def dispose(self) -> None:
        if not self.done:
            self.done = True
            self.report(Finish(FinishReason.CANCELLED))
        self.upstream.dispose()


def route(
    spec: RouteSpec | str | Mapping[str, Any],
    *,
    prompt: str = "",
    default: str | None = None,
    on_finish: FinishCallback | None = None,
) -> Callable[[Observable[Any]], Observable[Segment]]:
    r"""Split a stream of text (``str``) or aligned pieces (:class:`~rxstream.Piece`) into channels.

    Each item out is a :class:`~rxstream.channels.Segment`: a channel's ``open`` (its opening
    delimiter), ``chunk`` (channel text), ``close`` (its closing delimiter) or ``malformed``
    (a closing delimiter with no region open; a region still open at the end). Text goes out
    the moment no delimiter can still claim it, whatever the chunking (SEMANTICS §8); with
    aligned input every id is in exactly one segment.

    Args:
        spec: a :class:`~rxstream.channels.RouteSpec`; a model family's name or alias
            (:func:`rxstream.families.family_names`; :data:`rxstream.channels.PRESETS`); a mapping
            ``{channel: (open, close)}`` (delimiters: ``str``, :func:`rxstream.rx` rules,
            :class:`~rxstream.channels.SpecialToken`); or a transformers ``response_template``.
        prompt: the prompt text the generation continues; the state at its end is the initial
            state (a prompt ending inside ``<think>`` starts in the reasoning channel).
        default: the channel of text outside every region (mapping specs; ``"content"``).
        on_finish: called once with how the stream ended (``eos``, ``cancelled``, ``error``);
            with aligned input, ids held when it ends early are in ``Finish.dropped``.

    Raises:
        ValueError / TypeError: a bad spec (at construction); items of another type go to
        ``on_error``.

    Marble diagram (the tag is split across items; text goes out as soon as it cannot be one)::

        source:   -a-b-c-d-|      a="Hm <th", b="ink>why", c="</think>", d="Yes"
        operator: route({"reasoning": ("<think>", "</think>")})
        result:   -a-(bc)-d-e-|  a=Segment("content", "chunk", "Hm ")
        ...                      b=Segment("reasoning", "open", "<think>")
        ...                      c=Segment("reasoning", "chunk", "why")
        ...                      d=Segment("reasoning", "close", "</think>")
        ...                      e=Segment("content", "chunk", "Yes")
    """
    resolved = resolve_spec(spec, default=default)
    compiled = CompiledRoute(resolved)
    if not isinstance(prompt, str):
        raise TypeError(f"route: prompt must be a str, got {type(prompt).__name__}")
    Router(compiled, prompt=prompt)  # checks the prompt once, at construction

    def make_sink(observer: abc.ObserverBase[Any]) -> OperatorSink[Any, Any]:
        return _RouteSink(observer, compiled, prompt, on_finish)

    return operator("route", make_sink)
