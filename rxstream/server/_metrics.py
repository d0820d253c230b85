"""``GET /metrics``: the server's figures in Prometheus' text format (:class:`ServerMetrics`).

Where vLLM has the same concept its name is used (``vllm:...``, label ``model_name``), so that a
dashboard or an autoscaler made for vLLM reads an rxstream server, or a gateway in front of
vLLM, unchanged; rxstream's own figures are ``rxstream:...``.

What is timed per request (time to first token, the gaps between deltas, the whole request)
is observed on the event loop as the response takes each delta: a histogram observation per
delta. Counts that already exist (running, waiting, the batch's KV use, the upstream engines)
are read at scrape time, costing nothing per token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from rxstream.operators import MeterReport

from .._finish import FinishReason

__all__ = ["CONTENT_TYPE", "ServerMetrics", "vllm_reason"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
_GAP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_HELD_BUCKETS = (0.0, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_E2E_BUCKETS = (0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0)


def vllm_reason(reason: FinishReason) -> str:
    """vLLM's ``finished_reason`` for an rxstream finish: ``stop`` (an end token or a stop
    string), ``length``, ``abort`` (the client left, the server shut down), ``error``."""
    if reason in (FinishReason.EOS, FinishReason.STOP):
        return "stop"
    if reason is FinishReason.LENGTH:
        return "length"
    if reason is FinishReason.CANCELLED:
        return "abort"
    return "error"


class _Live(Collector):
    """The gauges read at scrape time from the server's state."""

    def __init__(self, model_name: str, read: Callable[[], dict[str, Any]]) -> None:
        self.model_name = model_name
        self.read = read

    def describe(self) -> list[Any]:
        return []  # collected afresh on each scrape

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        live = self.read()
        label = [self.model_name]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=["model_name"])
            family.add_metric(label, value)
            return family

        yield gauge("vllm:num_requests_running", "Requests generating now.", live["running"])
        yield gauge("vllm:num_requests_waiting", "Requests waiting for a generation slot.", live["waiting"])
        batch = live.get("batch")
        if batch:
            capacity = batch.get("kv_capacity") or 0
            used = batch.get("kv_allocated_tokens") or 0
            yield gauge(
                "vllm:kv_cache_usage_perc",
                "KV-cache positions in use, as a fraction of the batch's (1 means full).",
                used / capacity if capacity else 0.0,
            )
            yield gauge(
                "rxstream:prefix_cache_hits",
                "Prompts that reused a stored prefix's KV since the start.",
                batch.get("prefix_cache_hits", 0),
            )
            # prompt lookup, under vLLM's names for speculative decoding's counts
            for name, doc, key in (
                ("vllm:spec_decode_num_draft_tokens", "Draft tokens read (prompt lookup).", "drafted_tokens"),
                (
                    "vllm:spec_decode_num_accepted_tokens",
                    "Draft tokens kept: emitted without a forward pass of their own.",
                    "kept_draft_tokens",
                ),
            ):
                counter = CounterMetricFamily(name, doc, labels=["model_name"])
                counter.add_metric(label, batch.get(key, 0))
                yield counter
        upstream = live.get("upstream") or []
        if upstream:
            healthy = GaugeMetricFamily(
                "rxstream:upstream_healthy", "1 while an upstream engine is in rotation.", labels=["upstream"]
            )
            flight = GaugeMetricFamily(
                "rxstream:upstream_requests_in_flight",
                "Requests sent to an upstream engine and not ended.",
                labels=["upstream"],
            )
            for replica in upstream:
                healthy.add_metric([replica["url"]], 1.0 if replica.get("healthy") else 0.0)
                flight.add_metric([replica["url"]], replica.get("in_flight", 0))
            yield healthy
            yield flight
        replay = live.get("replay")
        if replay:
            yield from _replay_families(replay, label)


def _replay_families(replay: dict[str, int], label: list[str]) -> Iterator[Any]:
    """The resumable streams' figures (SEMANTICS §13), read from the hub at scrape time."""
    for name, doc, key in (
        (
            "rxstream:resumable_streams",
            "Streams kept for resuming (running, or in their grace period).",
            "streams",
        ),
        ("rxstream:stream_followers", "Clients reading a stream now.", "readers"),
        ("rxstream:replay_buffer_bytes", "Bytes of events held in the replay buffers.", "buffered_bytes"),
    ):
        gauge = GaugeMetricFamily(name, doc, labels=["model_name"])
        gauge.add_metric(label, replay[key])
        yield gauge
    for name, doc, key in (
        ("rxstream:stream_resumes", "Requests that resumed or followed a stream (Last-Event-ID).", "resumes"),
        (
            "rxstream:stream_resumes_refused",
            "Resumes refused: unknown stream, cursor out of the buffer.",
            "refused",
        ),
        (
            "rxstream:streams_abandoned",
            "Generations cancelled when the grace period after their last client ended.",
            "abandoned",
        ),
    ):
        counter = CounterMetricFamily(name, doc, labels=["model_name"])
        counter.add_metric(label, replay[key])
        yield counter


class ServerMetrics:
    """The collectors of one app, on a registry of its own (several apps in one process keep
    their figures apart). ``read`` gives the live state at scrape time: ``running``,
    ``waiting``, ``batch`` (the batch's stats or None) and ``upstream`` (a gateway's engines)."""

    def __init__(self, model_name: str, read: Callable[[], dict[str, Any]]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.model_name = model_name
        labels = ["model_name"]
        reg = self.registry
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "From a request's arrival to its first delta of text (or of a tool call).",
            labels,
            buckets=_TTFT_BUCKETS,
            registry=reg,
        ).labels(model_name)
        self.gap = Histogram(
            "vllm:inter_token_latency_seconds",
            "Between two deltas of one generation, as the response takes them (a delta holds one "
            "token as a rule; text held back by a stop or a route comes later, in one delta).",
            labels,
            buckets=_GAP_BUCKETS,
            registry=reg,
        ).labels(model_name)
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "From a generation's request's arrival to its end.",
            labels,
            buckets=_E2E_BUCKETS,
            registry=reg,
        ).labels(model_name)
        self.prompt_tokens = Counter(
            "vllm:prompt_tokens", "Prompt tokens of the generations that ended.", labels, registry=reg
        ).labels(model_name)
        self.generation_tokens = Counter(
            "vllm:generation_tokens",
            "Tokens generated (as the pipelines received them).",
            labels,
            registry=reg,
        ).labels(model_name)
        self._success = Counter(
            "vllm:request_success",
            "Generations that ended, by vLLM's finished_reason (stop, length, abort, error).",
            ["model_name", "finished_reason"],
            registry=reg,
        )
        self._finished = Counter(
            "rxstream:generations_finished",
            "Generations that ended, by rxstream's finish reason (eos, stop, length, cancelled, error).",
            ["model_name", "finish_reason"],
            registry=reg,
        )
        self._held = Histogram(
            "rxstream:operator_held_seconds",
            "How long an operator of a generation's pipeline held text back in all (a stop string's "
            "possible start, a replacement's pending match, an incomplete character, a possible "
            "delimiter), per generation; the operator is the label.",
            ["model_name", "operator"],
            buckets=_HELD_BUCKETS,
            registry=reg,
        )
        self._holds = Counter(
            "rxstream:operator_holds",
            "Times an operator of a pipeline began holding text back.",
            ["model_name", "operator"],
            registry=reg,
        )
        reg.register(_Live(model_name, read))

    def ended(self, reason: FinishReason, prompt_tokens: int, tokens: int, seconds: float) -> None:
        """One generation ended."""
        self._success.labels(self.model_name, vllm_reason(reason)).inc()
        self._finished.labels(self.model_name, reason.value).inc()
        self.prompt_tokens.inc(prompt_tokens)
        self.generation_tokens.inc(tokens)
        self.e2e.observe(seconds)

    def held(self, report: MeterReport) -> None:
        """One generation's pipeline figures (from its :class:`~rxstream.operators.Meter`): each
        operator's held time, operators of the same name added up."""
        held: dict[str, float] = {}
        holds: dict[str, int] = {}
        for op in report.operators:
            held[op.name] = held.get(op.name, 0.0) + op.held
            holds[op.name] = holds.get(op.name, 0) + op.holds
        for name, seconds in held.items():
            self._held.labels(self.model_name, name).observe(seconds)
            if holds[name]:
                self._holds.labels(self.model_name, name).inc(holds[name])

    def exposition(self) -> bytes:
        """The figures now, in Prometheus' text format."""
        return generate_latest(self.registry)
