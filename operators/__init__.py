"""rxstream operators: functions returning ``Callable[[Observable[T]], Observable[R]]`` for ``pipe``.

Text operators (``Observable[str] -> Observable[str]``): :func:`replace`, :func:`hold_back`,
:func:`stop`, :func:`deltas`, :func:`snapshots`. Token-id operators: :func:`stop_on_tokens`,
:func:`max_tokens`. Threading: :func:`serialize`.
"""

__all__: list[str] = []
