"""The engines a gateway sends to (:class:`ReplicaSet`): the least outstanding work first, health
checks that eject a replica and readmit it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from rxstream.backends.openai import OpenAIBackend

__all__ = ["Replica", "ReplicaSet", "engine_root"]

log = logging.getLogger("rxstream.backends")


def engine_root(url: str) -> str:
    """An engine's root URL (``http://host:port``) from what a user gives: the root, or the API's
    base (``.../v1``), with or without a trailing slash."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"GatewayModel: an upstream must be an http(s) URL, got {url!r}")
    root = url.rstrip("/")
    return root.removesuffix("/v1")


class Replica:
    """One engine: its client, whether it is in rotation, and what it has in flight."""

    __slots__ = (
        "backend",
        "healthy",
        "ids_in_logprobs",
        "in_flight",
        "last_error",
        "picked",
        "tokens",
        "url",
    )

    def __init__(self, url: str, backend: OpenAIBackend) -> None:
        self.url = url
        self.backend = backend
        self.healthy = True
        self.in_flight = 0
        """Requests sent and not ended."""
        self.tokens = 0
        """Their prompt ids plus budgets (the work they may still take)."""
        self.picked = 0
        """When it was last picked (a counter): ties go to the one picked longest ago."""
        self.last_error: str | None = None
        self.ids_in_logprobs = False
        """Whether the engine is known to ignore ``return_token_ids`` (it streamed text without
        ids): its requests then read the ids from ``logprobs`` tokens spelled ``token_id:N``."""

    def __repr__(self) -> str:
        state = "healthy" if self.healthy else "ejected"
        return f"Replica({self.url!r}, {state}, in_flight={self.in_flight})"


class ReplicaSet:
    """The replicas of one model, with a health-check thread (every ``health_interval`` seconds;
    None: no thread, :meth:`check` only when called).

    A replica is ejected when a request to it cannot connect or its stream breaks, or when its
    health check fails (``GET /health``; where that is 404, ``GET /v1/models``); a passing check
    readmits it. :meth:`acquire` picks, among the replicas not yet tried for a request, a healthy
    one with the fewest requests in flight (then the fewest tokens, then the one picked longest
    ago); an ejected one only when no healthy one is left to try.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 60.0,
        health_interval: float | None = 5.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        roots = [engine_root(u) for u in ([urls] if isinstance(urls, str) else list(urls))]
        if not roots:
            raise ValueError("GatewayModel: at least one upstream URL is needed")
        if len(set(roots)) != len(roots):
            raise ValueError(f"GatewayModel: an upstream is given twice: {roots}")
        if health_interval is not None and (
            isinstance(health_interval, bool)
            or not isinstance(health_interval, int | float)
            or health_interval <= 0
        ):
            raise ValueError(
                f"GatewayModel: health_interval must be a positive number or None, got {health_interval!r}"
            )
        self.replicas = tuple(
            Replica(
                root,
                OpenAIBackend(
                    root + "/v1",
                    api_key=api_key,
                    model=model,
                    timeout=timeout,
                    headers=headers,
                    transport=transport,
                ),
            )
            for root in roots
        )
        auth = {} if api_key is None else {"Authorization": f"Bearer {api_key}"}
        self._health = httpx.Client(
            timeout=httpx.Timeout(min(timeout, 5.0)), headers={**auth, **(headers or {})}, transport=transport
        )
        self._lock = threading.Lock()
        self._picks = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if health_interval is not None:
            self._thread = threading.Thread(
                target=self._watch,
                args=(float(health_interval),),
                name="rxstream-gateway-health",
                daemon=True,
            )
            self._thread.start()

    # -- picking ---------------------------------------------------------------------------------
    def acquire(self, tried: Sequence[Replica], tokens: int) -> Replica | None:
        """The replica for a request's next try (counted in flight until :meth:`release`), or None
        when every replica has been tried."""
        with self._lock:
            left = [r for r in self.replicas if r not in tried]
            if not left:
                return None
            best = min(left, key=lambda r: (not r.healthy, r.in_flight, r.tokens, r.picked))
            self._picks += 1
            best.picked = self._picks
            best.in_flight += 1
            best.tokens += tokens
            return best

    def hold(self, replica: Replica, tokens: int) -> None:
        """Count one more request in flight on ``replica`` (a request sent again to it)."""
        with self._lock:
            replica.in_flight += 1
            replica.tokens += tokens

    def release(self, replica: Replica, tokens: int) -> None:
        """A request that :meth:`acquire` gave ``replica`` has ended."""
        with self._lock:
            replica.in_flight -= 1
            replica.tokens -= tokens

    # -- health ----------------------------------------------------------------------------------
    def eject(self, replica: Replica, reason: str) -> None:
        """Take ``replica`` out of rotation until a health check passes."""
        with self._lock:
            was, replica.healthy = replica.healthy, False
            replica.last_error = reason
        if was:
            log.warning("rxstream gateway: ejected %s: %s", replica.url, reason)

    def check(self) -> None:
        """Check every replica's health once (ejecting and readmitting)."""
        for replica in self.replicas:
            reason = self._probe(replica.url)
            if reason is not None:
                self.eject(replica, reason)
                continue
            with self._lock:
                was, replica.healthy = replica.healthy, True
            if not was:
                log.warning("rxstream gateway: readmitted %s", replica.url)

    def _probe(self, root: str) -> str | None:
        """None when the engine at ``root`` answers its health check, else why not."""
        try:
            response = self._health.get(root + "/health")
            if response.status_code == 404:
                response = self._health.get(root + "/v1/models")
        except httpx.HTTPError as exc:
            return f"health check failed: {type(exc).__name__}: {exc}"
        if response.status_code >= 400:
            return f"health check answered HTTP {response.status_code}"
        return None

    def _watch(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.check()

    def snapshot(self) -> list[dict[str, Any]]:
        """Each replica's URL, health and load (for ``/health`` pages and logs)."""
        with self._lock:
            return [
                {"url": r.url, "healthy": r.healthy, "in_flight": r.in_flight, "last_error": r.last_error}
                for r in self.replicas
            ]

    def close(self) -> None:
        """Stop the health checks and close the connection pools."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)
        self._health.close()
        for replica in self.replicas:
            replica.backend.close()
