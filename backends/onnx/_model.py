""":class:`OnnxModel`: a decoder-only ONNX model with KV cache that generates ``Observable[int]``.

The facade: loading (:mod:`._loader`), text (tokenizer, chat template), a raw forward pass, and
the two generation entry points, whose runs live in :mod:`._generation` and :mod:`._batch`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Unpack, overload

import numpy as np
import numpy.typing as npt
from reactivex import Observable, abc
from tokenizers import Tokenizer

from rxstream import FinishCallback, Piece, SamplingOptions, SamplingParams
from rxstream.chat import ChatTemplate
from rxstream.structured import Grammar, GrammarTokenizer

from ._batch import RowFinishCallback, batch_observable
from ._batch_config import idle_stats
from ._batch_row import batched_observable
from ._config import DecoderConfig, Quantization
from ._forward import forward_pass
from ._generation import GenerateCall, generate_observable
from ._grammar import ModelGrammars
from ._kvcache import batch_layout
from ._loader import check_load_args, load_directory, open_float_session, open_plain_session
from ._model_checks import batch_config, check_call_args, check_prompt, check_prompts, row_finish
from ._model_text import ModelText
from ._pretrained import pretrained_path
from ._sampling import check_int, check_logprobs
from ._scheduler import BatchConfig, BatchScheduler
from ._session import DecoderSession, Provider, Spinning

__all__ = ["OnnxModel"]


class OnnxModel(ModelText):
    """A decoder-only language model run by ONNX Runtime, producing token ids as ``Observable[int]``.

    Load with :meth:`load` (a model directory in the Hugging Face Optimum layout, or one written by
    the onnxruntime-genai builder) or :meth:`from_pretrained` (the default model, downloaded and
    converted on first use). Thread-safe: many generations can run at once on one model.

    Concurrent :meth:`generate` subscriptions share one :class:`BatchScheduler` (continuous
    batching: one decode step for all of them, each row joining after its prefill and leaving as
    soon as it ends) unless batching is off (``batching=False``), the call names its own
    ``scheduler`` (then that subscription runs its own loop there, as :meth:`generate_batch`
    always does), or the graph cannot batch rows of different lengths (see :attr:`batching`).
    """

    def __init__(
        self,
        directory: Path,
        session: DecoderSession,
        tokenizer: Tokenizer,
        config: DecoderConfig | None,
        eos_token_ids: frozenset[int],
        chat_template: ChatTemplate | None,
        provider_request: Provider,
        threads: int | None,
        spinning: Spinning = True,
        default_sampling: SamplingParams | None = None,
        batching: BatchConfig | None = None,
    ) -> None:
        self.directory = directory
        self.default_sampling = default_sampling if default_sampling is not None else SamplingParams()
        """How :meth:`generate` samples when not told otherwise: the model's
        ``generation_config.json`` (see :func:`~rxstream.backends.onnx.sampling_defaults`)."""
        self._session = session
        self._batch_session: DecoderSession | None = session if session.has_position_ids else None
        self._tokenizer = tokenizer
        self.config = config
        self._eos = eos_token_ids
        self._chat_template = chat_template
        self._provider_request: Provider = provider_request
        self._threads = threads
        self._spinning = spinning
        self._active = 0
        self._active_lock = threading.Lock()
        self.vocab_size = (
            config.vocab_size if config is not None else tokenizer.get_vocab_size(with_added_tokens=True)
        )
        self._grammars = ModelGrammars(tokenizer, self.vocab_size, self._eos)
        self.max_length = config.max_position_embeddings if config is not None else 1 << 30
        self._batching = batching if batching is not None and batch_layout(session) is not None else None
        self._batcher: BatchScheduler | None = None
        self._batcher_lock = threading.Lock()

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        provider: Provider = "auto",
        threads: int | None = None,
        spinning: Spinning = True,
        batching: BatchConfig | bool = True,
    ) -> OnnxModel:
        """Load a model directory.

        It must hold ``model.onnx`` (with its external data), ``tokenizer.json`` and ``config.json``
        (or onnxruntime-genai's ``genai_config.json``); ``generation_config.json`` and
        ``tokenizer_config.json`` (EOS ids, chat template) are read when present. ``provider``:
        ``"cpu"``, ``"cuda"`` (an error if CUDA cannot start) or ``"auto"`` (CUDA when it works,
        else CPU, quietly); :attr:`provider` says which one runs. ``threads``: ONNX Runtime intra-op
        threads (default: one per physical core). ``spinning``: whether those threads spin between
        kernels (``True``, ONNX Runtime's default; fastest when the cores are otherwise idle), block
        (``False``: better when the cores are shared with other busy work), or spin within each
        forward pass and stop when it returns (``"step"``: what ``rxstream serve`` runs, where the
        event loop and the clients need the cores between steps). ``batching``: a :class:`BatchConfig`
        (``True``: the default one) to run concurrent generations in one batch, ``False`` for one
        loop per generation.
        """
        threads = check_load_args("OnnxModel.load", provider, threads, spinning)
        config = batch_config("OnnxModel.load", batching)
        parts = load_directory(path, provider, threads, spinning)
        return cls(
            parts.directory,
            parts.session,
            parts.tokenizer,
            parts.config,
            parts.eos_token_ids,
            parts.chat_template,
            provider,
            threads,
            spinning,
            parts.default_sampling,
            config,
        )

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path = "smollm2",
        *,
        provider: Provider = "auto",
        quantization: Quantization = "fp32",
        cache_dir: str | Path | None = None,
        progress: bool = True,
        threads: int | None = None,
        spinning: Spinning = True,
        batching: BatchConfig | bool = True,
    ) -> OnnxModel:
        """Load a model directory, or a known model by name (``"smollm2"``), pulling it on first use.

        How ``name_or_path`` is read, in this order:

        1. A path: a :class:`~pathlib.Path` (or other ``os.PathLike``), or a string that contains a
           path separator or starts with ``.`` or ``~`` (``"./smollm2"``, ``"models/x"``,
           ``"~/m"``). It is loaded as a model directory (``FileNotFoundError`` if it is missing);
           known names are not consulted.
        2. A known model name (``"smollm2"``): the model is pulled into the cache (see
           :func:`~rxstream.backends.pull_model`, progress on stderr when ``progress``) and
           loaded, even when a directory of that name exists in the current directory. That case
           is ambiguous, so it also warns (``UserWarning``); write ``"./smollm2"`` to load the
           directory instead.
        3. Any other bare name of an existing directory (``"my-model"``) is loaded as a directory.

        Anything else raises ``ValueError`` listing the known names. ``quantization="int4"`` asks
        for the int4 build of a known model (exact), ``"int4-a8"`` for the faster one with 8-bit
        activations (not exact: docs/benchmarks.md gives its accuracy); with a directory either
        is a ``ValueError`` (a directory is loaded as it is, never converted).
        """
        threads = check_load_args("OnnxModel.from_pretrained", provider, threads, spinning)
        batch_config("OnnxModel.from_pretrained", batching)
        path = pretrained_path(name_or_path, quantization, cache_dir, progress)
        return cls.load(path, provider=provider, threads=threads, spinning=spinning, batching=batching)

    # ------------------------------------------------------------------ properties
    @property
    def tokenizer(self) -> Tokenizer:
        """The model's ``tokenizers.Tokenizer``."""
        return self._tokenizer

    @property
    def provider(self) -> str:
        """The execution provider that actually runs: ``"cpu"`` or ``"cuda"``."""
        return self._session.provider

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """The ids that end a generation (generation_config.json, config.json, tokenizer_config.json)."""
        return self._eos

    @property
    def context_length(self) -> int | None:
        """Prompt plus generated ids at most (``max_position_embeddings``), or None when unknown."""
        return self.max_length if self.config is not None else None

    @property
    def batching(self) -> BatchConfig | None:
        """How concurrent :meth:`generate` subscriptions are batched, or None when each runs its
        own loop (batching off, or a graph whose attention cannot take rows of different lengths:
        fused attention other than GroupQueryAttention without ``position_ids``)."""
        return self._batching

    def batch_stats(self) -> dict[str, Any] | None:
        """The batch's occupancy and KV memory (rows, slots, KV positions and bytes, steps), or None
        without batching. ``kv_bytes`` is 0 when no generation is running."""
        if self._batching is None:
            return None
        scheduler = self._batcher
        if scheduler is None:
            draft = self._batching.draft_tokens_for(self._session)
            return idle_stats(batch_layout(self._session), self._batching, self.max_length, draft)
        return scheduler.stats()

    def _scheduler(self) -> BatchScheduler:
        with self._batcher_lock:
            if self._batcher is None:
                assert self._batching is not None
                opened = (self._provider_request, self._threads, self.config, self._spinning)
                twin = lambda: open_float_session(self.directory, self._session, *opened)  # noqa: E731
                self._batcher = BatchScheduler(self._session, self._batching, self.max_length, twin)
            return self._batcher

    def prepare_batches(self) -> None:
        """Open what several-row passes use (an exact int4 build's float graph) now, not at the
        first such pass (``rxstream serve`` calls it at start-up)."""
        if self._batching is not None:
            self._scheduler().prepare()

    @property
    def active_generations(self) -> int:
        """How many generation loops are running right now (0 once every subscription has ended)."""
        return self._active

    # ------------------------------------------------------------------ raw forward
    def forward(
        self,
        input_ids: npt.ArrayLike,
        attention_mask: npt.ArrayLike | None = None,
        position_ids: npt.ArrayLike | None = None,
        past: Sequence[np.ndarray] | None = None,
    ) -> tuple[npt.NDArray[np.float32], list[np.ndarray]]:
        """One forward pass with numpy arrays: returns ``(logits [B, S, V], present)``.

        ``past`` is the ``present`` of the previous call (None: empty cache). ``attention_mask``
        defaults to all ones over past + new tokens, ``position_ids`` to the positions after the cache.
        """
        ids = np.asarray(input_ids, dtype=np.int64)
        if ids.ndim != 2:
            raise ValueError(f"forward: input_ids must be [batch, seq], got shape {ids.shape}")
        plain = position_ids is not None and not self._session.has_position_ids
        graph = self._plain_session() if plain else self._session
        return forward_pass(graph, ids, attention_mask, position_ids, past)

    # ------------------------------------------------------------------ generation
    @overload
    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        ready: Callable[[], bool] | None = None,
        logprobs: None = None,
        grammar: Grammar | None = None,
        **sampling: Unpack[SamplingOptions],
    ) -> Observable[int]: ...

    @overload
    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        ready: Callable[[], bool] | None = None,
        logprobs: int,
        grammar: Grammar | None = None,
        **sampling: Unpack[SamplingOptions],
    ) -> Observable[Piece]: ...

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        ready: Callable[[], bool] | None = None,
        logprobs: int | None = None,
        grammar: Grammar | None = None,
        **sampling: Unpack[SamplingOptions],
    ) -> Observable[int] | Observable[Piece]:
        """A cold ``Observable[int]`` of generated token ids (of pieces, with ``logprobs``).

        Each subscription is one generation. With :attr:`batching` (the default) and no
        ``scheduler``, it joins the model's batch (:class:`BatchScheduler`: one worker thread
        steps every running generation at once and emits each id on that thread, so a subscriber
        that blocks in ``on_next`` holds up the whole batch: hand slow work to another thread, or
        pass ``ready``); otherwise it
        runs its own loop on ``scheduler`` (default: a scheduler passed to ``subscribe``, else the
        shared :func:`default_scheduler` pool). Either way each id is emitted as soon as it is
        sampled. It completes on an EOS id (not emitted; ``Finish(EOS)``), on one of
        ``stop_token_ids`` (not emitted; ``Finish(STOP, stop=id)``), or after ``max_new_tokens`` ids
        or at the model's context length (``Finish(LENGTH)``), calling ``on_finish`` before
        ``on_completed``. Disposing stops the loop before the next forward pass (``Finish(CANCELLED)``)
        and drops its KV cache. Failures go to ``on_error`` (``Finish(ERROR)`` first).
        ``ignore_eos`` keeps generating past EOS (benchmarks). Bad arguments raise at once.
        ``ready``: asked before each step; while it returns False the generation waits (its
        consumer is behind) without holding up the others in the batch.

        Sampling: ``params`` (a :class:`~rxstream.SamplingParams`), else the model's own defaults
        (:attr:`default_sampling`), updated by keyword arguments (``temperature=0.7``, ...).

        ``logprobs=k`` (an int from 0 to 20) emits, for each id, a :class:`~rxstream.Piece` with no
        text carrying the id, its log-probability and the ``k`` most likely ids with theirs
        (``top_logprobs``, best first); :func:`~rxstream.operators.detokenize` takes those pieces
        and, with ``aligned=True``, keeps each token's numbers with its text. The numbers are the
        model's own distribution: ``log_softmax`` of the raw logits, before temperature, top-k,
        top-p and the repetition penalty (as vLLM reports by default; see
        :func:`~rxstream.backends.onnx.token_logprobs`).

        ``grammar`` (:func:`~rxstream.structured.compose`) constrains decoding: ids it forbids get
        ``-inf`` logits before sampling (the logprobs stay the model's own), EOS only where it is
        complete; one that does not compile raises :class:`~rxstream.structured.GrammarError`.
        """
        args = SamplingParams.from_kwargs(params, sampling, "generate", self.default_sampling)
        prompt = check_prompt(prompt_ids, "generate", self.vocab_size, self.max_length)
        stops = check_call_args("generate", args.stop_token_ids, on_finish, scheduler, self.vocab_size)
        if ready is not None and not callable(ready):
            raise TypeError(f"generate: ready must be callable or None, got {ready!r}")
        k = check_logprobs("generate", logprobs)
        call = self._call(
            self._session, args, stops, scheduler, k, self._grammars.checked(grammar, "generate")
        )
        if self._batching is not None and scheduler is None:
            return batched_observable(self._scheduler, call, prompt, on_finish, args.seed, ready)
        return generate_observable(call, prompt, on_finish, ready)

    def generate_n(
        self,
        prompt_ids: Sequence[int],
        n: int,
        params: SamplingParams | None = None,
        *,
        on_finish: RowFinishCallback | None = None,
        ready: Callable[[], bool] | None = None,
        logprobs: int | None = None,
        grammar: Grammar | None = None,
        **sampling: Unpack[SamplingOptions],
    ) -> list[Observable[Any]]:
        """``n`` generations of one prompt (OpenAI's ``n``): a list of cold ``Observable[int]``
        (of pieces, with ``logprobs``, as :meth:`generate` emits them).

        Each observable is a :meth:`generate` of its own (row ``i`` samples with seed ``seed + i``;
        ``on_finish(i, Finish)``). Subscribed together, they are prefilled once: the batch copies
        the prompt's KV cache and last logits to the others (any rows with equal prompts that
        arrive while one of them is being prefilled, or while one holds its prompt in the cache,
        share it the same way). ``ready``, ``logprobs`` and ``grammar`` apply to every row, as in
        :meth:`generate`. Without :attr:`batching` each prefills its own prompt.
        """
        n = check_int("generate_n", "n", n, minimum=1)
        args = SamplingParams.from_kwargs(params, sampling, "generate_n", self.default_sampling)
        if on_finish is not None and not callable(on_finish):
            raise TypeError(f"generate_n: on_finish must be callable or None, got {on_finish!r}")
        check_logprobs("generate_n", logprobs)
        out: list[Observable[Any]] = []
        for i in range(n):
            seed = None if args.seed is None else args.seed + i
            finish_i = None if on_finish is None else row_finish(on_finish, i)
            params_i = args.replace(seed=seed)
            out.append(
                self.generate(
                    prompt_ids, params_i, on_finish=finish_i, ready=ready, logprobs=logprobs, grammar=grammar
                )
            )
        return out

    def chat(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Observable[Any]:
        """:meth:`generate` on the chat-template prompt of ``messages`` (same keyword arguments)."""
        return self.generate(self.encode_chat(messages), **kwargs)

    def _track(self, delta: int) -> None:
        with self._active_lock:
            self._active += delta

    def _call(
        self,
        session: DecoderSession,
        args: SamplingParams,
        stops: frozenset[int],
        scheduler: abc.SchedulerBase | None,
        logprobs: int | None = None,
        grammar: Grammar | None = None,
    ) -> GenerateCall:
        """What a checked generate call needs to run on ``session``."""
        eos: frozenset[int] = frozenset() if args.ignore_eos else self._eos
        grammars = self._grammars.tokenizer() if grammar is not None else None
        fixed = (session, self.max_length, self.vocab_size, args, stops, eos, scheduler, self._track)
        return GenerateCall(*fixed, logprobs, grammar, grammars)

    @property
    def grammar_tokenizer(self) -> GrammarTokenizer:
        """The tokenizer as the grammar engine sees it, and the grammars compiled for it."""
        return self._grammars.tokenizer()

    # ------------------------------------------------------------------ batches
    def _plain_session(self) -> DecoderSession:
        """The plain-attention session for left-padded batches (opened on first use)."""
        if self._batch_session is None:
            opened = (self._provider_request, self._threads, self.config, self._spinning)
            self._batch_session = open_plain_session(self.directory, self._session, *opened)
        return self._batch_session

    def generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        *,
        on_finish: RowFinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        logprobs: int | None = None,
        **sampling: Unpack[SamplingOptions],
    ) -> Observable[tuple[int, Any]]:
        """Generate for several prompts at once (left-padded batch) as ``Observable[(row, token_id)]``.

        Each row ends on its own (EOS, stop id, budget), reported as ``on_finish(row, Finish)``; the
        observable completes when every row has ended. Each row's ids equal what :meth:`generate`
        gives for that prompt alone (up to float rounding). Row ``i`` samples with seed ``seed + i``.
        Disposing stops the loop before the next forward pass (every unfinished row: CANCELLED).
        ``logprobs=k``: items are ``(row, Piece)`` as :meth:`generate` emits them.
        """
        args = SamplingParams.from_kwargs(params, sampling, "generate_batch", self.default_sampling)
        rows = check_prompts(prompts, "generate_batch", self.vocab_size, self.max_length)
        stops = check_call_args("generate_batch", args.stop_token_ids, on_finish, scheduler, self.vocab_size)
        k = check_logprobs("generate_batch", logprobs)
        needs_padding = len({len(r) for r in rows}) > 1
        plain = needs_padding and not self._session.has_position_ids
        session = self._plain_session() if plain else self._session
        pad = next(iter(sorted(self._eos)), 0)
        return batch_observable(self._call(session, args, stops, scheduler, k), rows, pad, on_finish)
