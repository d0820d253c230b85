""":class:`OnnxModel`: a decoder-only ONNX model with KV cache that generates ``Observable[int]``."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Unpack

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
import reactivex
from reactivex import Observable, abc
from reactivex.disposable import Disposable
from reactivex.scheduler import ThreadPoolScheduler
from tokenizers import Tokenizer

from rxstream import Finish, FinishReason, SamplingOptions, SamplingParams

from ._chat import ChatTemplate
from ._config import DecoderConfig, sampling_defaults
from ._export import BATCH_MODEL_FILE, MODEL_FILE
from ._sampling import Sampler, check_int

__all__ = ["OnnxModel", "Provider", "default_scheduler"]

Provider = Literal["auto", "cpu", "cuda"]
FinishCallback = Callable[[Finish], None]
RowFinishCallback = Callable[[int, Finish], None]

log = logging.getLogger("rxstream.backends")

_DTYPES: dict[str, type[np.generic]] = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(bfloat16)": np.float32,
}

_scheduler_lock = threading.Lock()
_scheduler: ThreadPoolScheduler | None = None


def default_scheduler() -> ThreadPoolScheduler:
    """The shared pool that runs generations when no scheduler is given (8 workers, created on first use)."""
    global _scheduler
    with _scheduler_lock:
        if _scheduler is None:
            _scheduler = ThreadPoolScheduler(max_workers=8)
        return _scheduler


def _nvidia_device_present() -> bool:
    if sys.platform.startswith("linux"):
        return os.path.exists("/dev/nvidiactl") or os.path.isdir("/proc/driver/nvidia")
    return True


def _create_session(
    path: Path, provider: Provider, threads: int | None, spinning: bool = True
) -> tuple[ort.InferenceSession, str]:
    if provider not in ("auto", "cpu", "cuda"):
        raise ValueError(f"OnnxModel: provider must be 'auto', 'cpu' or 'cuda', got {provider!r}")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = threads
    # A decode step is hundreds of small kernels. Intra-op workers that spin between them (ORT's
    # default) keep the step fast when the cores are free: on 2 idle cores int4 decodes ~1.4x and
    # fp32 ~1.1x faster than with blocking waits. On cores busy with other work the spinning steals
    # the CPU instead; ``spinning=False`` makes the workers block (better there, worse when idle).
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    want_cuda = provider == "cuda" or (
        provider == "auto"
        and "CUDAExecutionProvider" in ort.get_available_providers()
        and _nvidia_device_present()
    )
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if want_cuda else ["CPUExecutionProvider"]
    try:
        session = ort.InferenceSession(str(path), options, providers=providers)
    except Exception as exc:
        raise ValueError(f"OnnxModel: cannot load {path}: {exc}") from exc
    running = "cuda" if "CUDAExecutionProvider" in session.get_providers() else "cpu"
    if provider == "cuda" and running != "cuda":
        raise RuntimeError(
            "OnnxModel: provider='cuda' was requested but ONNX Runtime could not start CUDA "
            "(no GPU, or the CUDA/cuDNN libraries are missing); use provider='cpu' or 'auto'"
        )
    if want_cuda and running != "cuda":
        log.info("CUDA is not usable here; running %s on CPU", path.name)
    log.debug("loaded %s on %s", path, running)
    return session, running


def fused_attention_off_device(device: str, ops: frozenset[str], kv_dtype: Any) -> bool:
    """True when the graph's fused attention cannot run on ``device``.

    ONNX Runtime's CUDA GroupQueryAttention kernel exists for float16 and bfloat16 only; a float32
    graph would have its attention nodes placed on the CPU, copying the KV cache across at every
    step. The plain-attention graph (standard ONNX ops) runs on CUDA in float32.
    """
    return device == "cuda" and "GroupQueryAttention" in ops and np.dtype(kv_dtype) == np.float32


def _check_load_args(who: str, provider: Any, threads: Any, spinning: Any) -> int | None:
    """Check the loading options before any file is read (or any model pulled); return ``threads``."""
    if provider not in ("auto", "cpu", "cuda"):
        raise ValueError(f"{who}: provider must be 'auto', 'cpu' or 'cuda', got {provider!r}")
    if not isinstance(spinning, (bool, np.bool_)):
        raise TypeError(f"{who}: spinning must be a bool, got {spinning!r}")
    # 0 lets ONNX Runtime choose (one thread per physical core), like None
    return None if threads is None else check_int(who, "threads", threads, minimum=0)


class _Graph:
    """One ONNX session plus the names and shapes of its KV cache."""

    def __init__(
        self,
        path: Path,
        provider: Provider,
        threads: int | None,
        config: DecoderConfig | None,
        spinning: bool = True,
    ) -> None:
        self.session, self.provider = _create_session(path, provider, threads, spinning)
        self.path = path
        ins = {i.name: i for i in self.session.get_inputs()}
        outs = {o.name: o for o in self.session.get_outputs()}
        layers = 0
        while f"past_key_values.{layers}.key" in ins:
            layers += 1
        problems: list[str] = []
        for required in ("input_ids", "attention_mask"):
            if required not in ins:
                problems.append(f"missing input {required!r}")
        if "logits" not in outs:
            problems.append("missing output 'logits'")
        if layers == 0:
            problems.append("no KV-cache inputs 'past_key_values.{i}.key/value'")
        self.past_names: list[str] = []
        self.present_names: list[str] = []
        for i in range(layers):
            for kind in ("key", "value"):
                p, q = f"past_key_values.{i}.{kind}", f"present.{i}.{kind}"
                if p not in ins:
                    problems.append(f"missing input {p!r}")
                if q not in outs:
                    problems.append(f"missing output {q!r}")
                self.past_names.append(p)
                self.present_names.append(q)
        known = {"input_ids", "attention_mask", "position_ids", *self.past_names}
        unexpected = sorted(set(ins) - known)
        if unexpected:
            problems.append(f"unexpected input(s) {unexpected}")
        if problems:
            raise ValueError(
                f"OnnxModel: {path} is not a decoder with KV cache in the Optimum layout: "
                + "; ".join(problems)
                + " (expected inputs input_ids, attention_mask, [position_ids], "
                "past_key_values.{i}.key/value; "
                "outputs logits, present.{i}.key/value)"
            )
        self.num_layers = layers
        self.has_position_ids = "position_ids" in ins
        past0 = ins["past_key_values.0.key"]
        self.kv_dtype = _DTYPES.get(past0.type, np.float32)
        shape = past0.shape
        kv_heads = shape[1] if isinstance(shape[1], int) else (config.num_kv_heads if config else None)
        head_dim = shape[3] if isinstance(shape[3], int) else (config.head_dim if config else None)
        if kv_heads is None or head_dim is None:
            raise ValueError(
                f"OnnxModel: {path}: KV-cache shape {shape} is symbolic and no config.json says it"
            )
        self.kv_heads, self.head_dim = int(kv_heads), int(head_dim)
        self.device = "cuda" if self.provider == "cuda" else "cpu"
        logits_meta = outs["logits"]
        self.logits_dtype = _DTYPES.get(logits_meta.type, np.float32)
        vocab = logits_meta.shape[-1] if logits_meta.shape else None
        self.vocab_out = int(vocab) if isinstance(vocab, int) else (config.vocab_size if config else 0)
        graph_ops = {n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node}
        self.ops = frozenset(graph_ops)
        # fused attention that can share past/present buffers (fp32 logits needed for the fixed buffer)
        self.shares_buffer = (
            "GroupQueryAttention" in graph_ops
            and self.logits_dtype is np.float32
            and self.vocab_out > 0
            and logits_meta.type == "tensor(float)"
        )

    def empty_past(self, batch: int) -> list[ort.OrtValue]:
        shape = [batch, self.kv_heads, 0, self.head_dim]
        return [
            ort.OrtValue.ortvalue_from_shape_and_type(shape, self.kv_dtype, self.device, 0)
            for _ in self.past_names
        ]

    def run_bound(self, binding: ort.IOBinding) -> None:
        """Run one forward pass on an IO binding (the single place every forward pass goes through)."""
        self.session.run_with_iobinding(binding)

    def step(
        self, feeds: Mapping[str, np.ndarray], past: Sequence[ort.OrtValue]
    ) -> tuple[npt.NDArray[np.float32], list[ort.OrtValue]]:
        """One forward pass with IO binding; the KV cache stays where the provider keeps it."""
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        for name, value in zip(self.past_names, past, strict=True):
            binding.bind_ortvalue_input(name, value)
        binding.bind_output("logits", "cpu")
        for name in self.present_names:
            binding.bind_output(name, self.device)
        self.run_bound(binding)
        outputs = binding.get_outputs()
        logits: npt.NDArray[np.float32] = outputs[0].numpy()
        return logits, list(outputs[1:])

    def new_cache(self, batch: int, needed: int, limit: int) -> _ConcatCache | _SharedCache:
        """A KV cache for one generation that will hold ``needed`` positions (at most ``limit``)."""
        if self.shares_buffer:
            return _SharedCache(self, batch, needed, limit)
        return _ConcatCache(self, batch)


class _ConcatCache:
    """KV cache for graphs that concatenate past and new keys: each step's present is the next past."""

    def __init__(self, graph: _Graph, batch: int) -> None:
        self.graph = graph
        self.past = graph.empty_past(batch)

    def step(self, feeds: Mapping[str, np.ndarray], total: int) -> npt.NDArray[np.float32]:
        logits, self.past = self.graph.step(feeds, self.past)
        return logits


class _SharedCache:
    """KV cache for GroupQueryAttention graphs: one buffer per layer, bound as both past and present.

    The attention op writes the new keys/values in place (ORT's past/present buffer sharing), so a
    decode step copies no cache. One IO binding is reused for the whole generation; only the ids,
    the mask and the logits are bound again each step. On CPU the buffers are numpy arrays that grow
    (doubling) when a generation outlives them; on CUDA they are allocated once for ``needed``.
    """

    _GROW_FROM = 256

    def __init__(self, graph: _Graph, batch: int, needed: int, limit: int) -> None:
        self.graph = graph
        self.batch = batch
        self.limit = limit
        self.binding = graph.session.io_binding()
        self.capacity = 0
        self.arrays: list[np.ndarray] = []
        self.values: list[ort.OrtValue] = []
        first = needed if graph.device == "cuda" else min(needed, max(self._GROW_FROM, 1))
        self._resize(min(max(first, 1), limit), used=0)
        self.logits_buffer: ort.OrtValue | None = None

    def _resize(self, capacity: int, used: int) -> None:
        g = self.graph
        shape = [self.batch, g.kv_heads, capacity, g.head_dim]
        if g.device == "cuda":
            if self.values:
                raise RuntimeError("generate: the CUDA KV cache is full (capacity fixed at the start)")
            self.values = [
                ort.OrtValue.ortvalue_from_shape_and_type(shape, g.kv_dtype, "cuda", 0) for _ in g.past_names
            ]
        else:
            arrays = [np.zeros(shape, dtype=g.kv_dtype) for _ in g.past_names]
            for new, old in zip(arrays, self.arrays, strict=False):
                new[:, :, :used] = old[:, :, :used]
            self.arrays = arrays
            self.values = [ort.OrtValue.ortvalue_from_numpy(a) for a in arrays]
        self.capacity = capacity
        for name, value in zip(g.past_names, self.values, strict=True):
            self.binding.bind_ortvalue_input(name, value)
        for name, value in zip(g.present_names, self.values, strict=True):
            self.binding.bind_ortvalue_output(name, value)

    def step(self, feeds: Mapping[str, np.ndarray], total: int) -> npt.NDArray[np.float32]:
        if total > self.capacity:
            if total > self.limit:
                raise RuntimeError(f"generate: {total} positions exceed the context length {self.limit}")
            self._resize(
                min(max(total, 2 * self.capacity), self.limit), used=total - feeds["input_ids"].shape[1]
            )
        b = self.binding
        for name, array in feeds.items():
            b.bind_cpu_input(name, array)
        seq = int(feeds["input_ids"].shape[1])
        logits = self.logits_buffer
        if logits is None or seq != 1:
            logits = ort.OrtValue.ortvalue_from_shape_and_type(
                [self.batch, seq, self.graph.vocab_out], np.float32, "cpu", 0
            )
            if seq == 1:
                self.logits_buffer = logits
        b.bind_ortvalue_output("logits", logits)
        self.graph.run_bound(b)
        out: npt.NDArray[np.float32] = logits.numpy()
        return out


class _Generation:
    """Cancellation flag and exactly-once finish reporting for one subscription."""

    __slots__ = ("_done", "_lock", "_on_finish", "cancelled")

    def __init__(self, on_finish: FinishCallback | None) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._on_finish = on_finish
        self.cancelled = False

    def claim(self) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
            return True

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            first = not self._done
            self._done = True
        if first and self._on_finish is not None:
            try:
                self._on_finish(Finish(FinishReason.CANCELLED))
            except Exception:  # the subscriber is gone; nothing to route it to
                log.exception("generate: on_finish raised on cancellation")

    def report(self, finish: Finish) -> None:
        if self._on_finish is not None:
            self._on_finish(finish)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"OnnxModel: {path} is not valid JSON ({exc})") from None
    return data if isinstance(data, dict) else {}


def _ids(value: Any) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, list):
        return {int(v) for v in value}
    return {int(value)}


class OnnxModel:
    """A decoder-only language model run by ONNX Runtime, producing token ids as ``Observable[int]``.

    Load with :meth:`load` (a model directory in the Hugging Face Optimum layout, or one written by
    the onnxruntime-genai builder) or :meth:`from_pretrained` (the default model, downloaded and
    converted on first use). Thread-safe: many generations can run at once on one model.
    """

    def __init__(
        self,
        directory: Path,
        graph: _Graph,
        tokenizer: Tokenizer,
        config: DecoderConfig | None,
        eos_token_ids: frozenset[int],
        chat_template: ChatTemplate | None,
        provider_request: Provider,
        threads: int | None,
        spinning: bool = True,
        default_sampling: SamplingParams | None = None,
    ) -> None:
        self.directory = directory
        self.default_sampling = default_sampling if default_sampling is not None else SamplingParams()
        """How :meth:`generate` samples when not told otherwise: the model's
        ``generation_config.json`` (see :func:`~rxstream.backends._config.sampling_defaults`)."""
        self._graph = graph
        self._batch_graph: _Graph | None = graph if graph.has_position_ids else None
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
        self.max_length = config.max_position_embeddings if config is not None else 1 << 30

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        provider: Provider = "auto",
        threads: int | None = None,
        spinning: bool = True,
    ) -> OnnxModel:
        """Load a model directory.

        It must hold ``model.onnx`` (with its external data), ``tokenizer.json`` and ``config.json``
        (or onnxruntime-genai's ``genai_config.json``); ``generation_config.json`` and
        ``tokenizer_config.json`` (EOS ids, chat template) are read when present. ``provider``:
        ``"cpu"``, ``"cuda"`` (an error if CUDA cannot start) or ``"auto"`` (CUDA when it works,
        else CPU, quietly); :attr:`provider` says which one runs. ``threads``: ONNX Runtime intra-op
        threads (default: one per physical core). ``spinning``: whether those threads spin between
        kernels (ONNX Runtime's default; fastest when the cores are otherwise idle) or block (better
        when the cores are shared with other busy work).
        """
        threads = _check_load_args("OnnxModel.load", provider, threads, spinning)
        directory = Path(path).expanduser()
        if not directory.exists():
            raise FileNotFoundError(f"OnnxModel.load: model directory {str(directory)!r} does not exist")
        if not directory.is_dir():
            raise NotADirectoryError(f"OnnxModel.load: {str(directory)!r} is not a directory")
        model_file = directory / MODEL_FILE
        if not model_file.is_file():
            candidates = sorted(p for p in directory.glob("*.onnx") if p.name != BATCH_MODEL_FILE)
            if len(candidates) != 1:
                raise FileNotFoundError(
                    f"OnnxModel.load: no {MODEL_FILE} in {str(directory)!r} "
                    f"(found: {sorted(p.name for p in directory.iterdir()) or 'nothing'})"
                )
            model_file = candidates[0]
        tok_file = directory / "tokenizer.json"
        if not tok_file.is_file():
            raise FileNotFoundError(f"OnnxModel.load: no tokenizer.json in {str(directory)!r}")
        try:
            tokenizer = Tokenizer.from_file(str(tok_file))
        except Exception as exc:
            raise ValueError(f"OnnxModel.load: cannot read {tok_file}: {exc}") from exc

        config: DecoderConfig | None = None
        eos: set[int] = set()
        if (directory / "config.json").is_file():
            config = DecoderConfig.read(directory / "config.json")
            eos |= set(config.eos_token_id)
        genai = _read_json(directory / "genai_config.json")
        if config is None and genai:
            config = _config_from_genai(genai, directory)
            eos |= set(config.eos_token_id)
        if config is None:
            raise FileNotFoundError(
                f"OnnxModel.load: no config.json (or genai_config.json) in {str(directory)!r}"
            )
        generation_config = _read_json(directory / "generation_config.json")
        eos |= _ids(generation_config.get("eos_token_id"))
        default_sampling = sampling_defaults(generation_config, str(directory / "generation_config.json"))
        tok_config = _read_json(directory / "tokenizer_config.json")
        eos_token = _token_text(tok_config.get("eos_token"))
        bos_token = _token_text(tok_config.get("bos_token"))
        eos_id = None if eos_token is None else tokenizer.token_to_id(eos_token)
        if not eos and eos_id is not None:
            eos.add(int(eos_id))
        template_src = tok_config.get("chat_template")
        if isinstance(template_src, list):  # [{"name": ..., "template": ...}]
            named = {t.get("name"): t.get("template") for t in template_src if isinstance(t, dict)}
            template_src = named.get("default") or next(iter(named.values()), None)
        if template_src is None and (directory / "chat_template.jinja").is_file():
            template_src = (directory / "chat_template.jinja").read_text(encoding="utf-8")
        template = (
            ChatTemplate(template_src, bos_token=bos_token or "", eos_token=eos_token or "")
            if isinstance(template_src, str)
            else None
        )

        graph = _Graph(model_file, provider, threads, config, spinning)
        if fused_attention_off_device(graph.device, graph.ops, graph.kv_dtype):
            plain = directory / BATCH_MODEL_FILE
            if plain.is_file():
                log.info("OnnxModel: %s uses float32 GroupQueryAttention, which has no CUDA kernel; "
                         "running %s on CUDA instead", model_file.name, plain.name)
                graph = _Graph(plain, provider, threads, config, spinning)
            else:
                log.warning("OnnxModel: %s uses float32 GroupQueryAttention, which has no CUDA kernel: "
                            "ONNX Runtime will run those nodes on the CPU (slow); export a float16 "
                            "model for CUDA", model_file.name)
        if config.num_layers != graph.num_layers:
            raise ValueError(
                f"OnnxModel.load: {model_file.name} has {graph.num_layers} layers of KV cache but "
                f"config.json "
                f"says num_hidden_layers={config.num_layers}"
            )
        return cls(
            directory,
            graph,
            tokenizer,
            config,
            frozenset(eos),
            template,
            provider,
            threads,
            spinning,
            default_sampling,
        )

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path = "smollm2",
        *,
        provider: Provider = "auto",
        quantization: Literal["fp32", "int4"] = "fp32",
        cache_dir: str | Path | None = None,
        progress: bool = True,
        threads: int | None = None,
        spinning: bool = True,
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

        Anything else raises ``ValueError`` listing the known names.
        """
        from ._pull import KNOWN_MODELS, pull_model

        threads = _check_load_args("OnnxModel.from_pretrained", provider, threads, spinning)
        if quantization not in ("fp32", "int4"):
            raise ValueError(
                f"OnnxModel.from_pretrained: quantization must be 'fp32' or 'int4', got {quantization!r}"
            )

        def load(path: Path) -> OnnxModel:
            return cls.load(path, provider=provider, threads=threads, spinning=spinning)

        if isinstance(name_or_path, os.PathLike):
            return load(Path(name_or_path).expanduser())
        if not isinstance(name_or_path, str):
            raise TypeError(
                "OnnxModel.from_pretrained: name_or_path must be a str or a path, "
                f"got {type(name_or_path).__name__}"
            )
        name = name_or_path
        if not name:
            raise ValueError("OnnxModel.from_pretrained: name_or_path is empty")
        separators = {os.sep} | ({os.altsep} if os.altsep else set())
        if any(sep in name for sep in separators) or name.startswith((".", "~")):
            return load(Path(name).expanduser())
        if name in KNOWN_MODELS:
            if Path(name).is_dir():
                warnings.warn(
                    f"OnnxModel.from_pretrained: {name!r} is a known model and also a directory here; "
                    f"loading the known model (write './{name}' to load the directory)",
                    UserWarning,
                    stacklevel=2,
                )
            return load(pull_model(name, cache_dir=cache_dir, progress=progress, quantization=quantization))
        if Path(name).is_dir():
            return load(Path(name))
        raise ValueError(
            f"OnnxModel.from_pretrained: {name!r} is neither a model directory nor a known model "
            f"({', '.join(sorted(KNOWN_MODELS))})"
        )

    # ------------------------------------------------------------------ properties
    @property
    def tokenizer(self) -> Tokenizer:
        """The model's ``tokenizers.Tokenizer``."""
        return self._tokenizer

    @property
    def provider(self) -> str:
        """The execution provider that actually runs: ``"cpu"`` or ``"cuda"``."""
        return self._graph.provider

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """The ids that end a generation (generation_config.json, config.json, tokenizer_config.json)."""
        return self._eos

    @property
    def context_length(self) -> int | None:
        """Prompt plus generated ids at most (``max_position_embeddings``), or None when unknown."""
        return self.max_length if self.config is not None else None

    @property
    def has_chat_template(self) -> bool:
        """Whether :meth:`encode_chat` can work."""
        return self._chat_template is not None

    @property
    def active_generations(self) -> int:
        """How many generation loops are running right now (0 once every subscription has ended)."""
        return self._active

    # ------------------------------------------------------------------ text
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def render_chat(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True) -> str:
        """The prompt text of ``messages`` under the model's chat template."""
        if self._chat_template is None:
            raise ValueError(
                f"OnnxModel: {self.directory} has no chat template (tokenizer_config.json chat_template)"
            )
        return self._chat_template.render(messages, add_generation_prompt=add_generation_prompt)

    def encode_chat(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True
    ) -> list[int]:
        """Token ids of ``messages`` rendered with the model's chat template."""
        return self.encode(self.render_chat(messages, add_generation_prompt))

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
        graph = self._graph if (self._graph.has_position_ids or position_ids is None) else self._plain_graph()
        batch, seq = ids.shape
        past_len = 0 if past is None else int(past[0].shape[2])
        mask = (
            np.ones((batch, past_len + seq), np.int64)
            if attention_mask is None
            else np.asarray(attention_mask, dtype=np.int64)
        )
        feeds: dict[str, np.ndarray] = {"input_ids": ids, "attention_mask": mask}
        if graph.has_position_ids:
            feeds["position_ids"] = (
                np.broadcast_to(np.arange(past_len, past_len + seq), (batch, seq)).copy()
                if position_ids is None
                else np.asarray(position_ids, dtype=np.int64)
            )
        if past is None:
            past = [
                np.zeros((batch, graph.kv_heads, 0, graph.head_dim), graph.kv_dtype) for _ in graph.past_names
            ]
        feeds.update(zip(graph.past_names, past, strict=True))
        outs = graph.session.run(["logits", *graph.present_names], feeds)
        return np.asarray(outs[0], dtype=np.float32), [np.asarray(o) for o in outs[1:]]

    # ------------------------------------------------------------------ generation
    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        on_finish: FinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **sampling: Unpack[SamplingOptions],
    ) -> Observable[int]:
        """A cold ``Observable[int]`` of generated token ids.

        Each subscription runs its own generation on ``scheduler`` (default: a scheduler passed to
        ``subscribe``, else the shared :func:`default_scheduler` pool) and emits each id as soon as it
        is sampled. It completes on an EOS id (not emitted; ``Finish(EOS)``), on one of
        ``stop_token_ids`` (not emitted; ``Finish(STOP, stop=id)``), or after ``max_new_tokens`` ids
        or at the model's context length (``Finish(LENGTH)``), calling ``on_finish`` before
        ``on_completed``. Disposing stops the loop before the next forward pass (``Finish(CANCELLED)``)
        and drops its KV cache. Failures go to ``on_error`` (``Finish(ERROR)`` first).
        ``ignore_eos`` keeps generating past EOS (benchmarks). Bad arguments raise at once.

        Sampling: ``params`` (a :class:`~rxstream.SamplingParams`), else the model's own defaults
        (:attr:`default_sampling`), updated by keyword arguments (``temperature=0.7``, ...).
        """
        args = SamplingParams.from_kwargs(params, sampling, "generate", self.default_sampling)
        prompt = self._check_prompt(prompt_ids, "generate")
        stops = self._check_call_args("generate", args.stop_token_ids, on_finish, scheduler)
        eos = frozenset() if args.ignore_eos else self._eos
        max_new_tokens = args.max_new_tokens

        def subscribe(
            observer: abc.ObserverBase[int], sched: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            run = _Generation(on_finish)
            sampler = Sampler(
                self.vocab_size,
                temperature=args.temperature,
                top_k=args.top_k,
                top_p=args.top_p,
                repetition_penalty=args.repetition_penalty,
                seed=args.seed,
                seen=prompt,
            )

            def action(_scheduler: abc.SchedulerBase, _state: Any = None) -> None:
                self._loop(prompt, run, observer, sampler, max_new_tokens, stops, eos)

            worker = scheduler or sched or default_scheduler()
            scheduled = worker.schedule(action)

            def dispose() -> None:
                run.cancel()
                scheduled.dispose()

            return Disposable(dispose)

        return reactivex.create(subscribe)

    def chat(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Observable[int]:
        """:meth:`generate` on the chat-template prompt of ``messages`` (same keyword arguments)."""
        return self.generate(self.encode_chat(messages), **kwargs)

    def _check_prompt(self, prompt_ids: Sequence[int], who: str, name: str = "prompt_ids") -> list[int]:
        if isinstance(prompt_ids, (str, bytes)) or not isinstance(prompt_ids, Iterable):
            raise TypeError(f"{who}: {name} must be a sequence of ints, got a {type(prompt_ids).__name__}")
        prompt = [check_int(who, f"{name}[{n}]", i) for n, i in enumerate(prompt_ids)]
        if not prompt:
            raise ValueError(f"{who}: {name} is empty")
        bad = [i for i in prompt if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(
                f"{who}: {name} has token id(s) {bad[:5]} outside the vocabulary (size {self.vocab_size})"
            )
        if len(prompt) >= self.max_length:
            raise ValueError(
                f"{who}: {name} of {len(prompt)} tokens does not fit the context ({self.max_length})"
            )
        return prompt

    def _check_call_args(
        self,
        who: str,
        stops: tuple[int, ...],
        on_finish: Callable[..., None] | None,
        scheduler: abc.SchedulerBase | None,
    ) -> frozenset[int]:
        """Check what the sampling parameters cannot know (stop ids against this vocabulary) and
        the callbacks of a generate call; return the stop ids."""
        bad = [s for s in stops if not 0 <= s < self.vocab_size]
        if bad:
            raise ValueError(
                f"{who}: stop_token_ids {bad[:5]} outside the vocabulary (size {self.vocab_size})"
            )
        if on_finish is not None and not callable(on_finish):
            raise TypeError(f"{who}: on_finish must be callable or None, got {on_finish!r}")
        if scheduler is not None and not callable(getattr(scheduler, "schedule", None)):
            raise TypeError(f"{who}: scheduler must be a reactivex scheduler or None, got {scheduler!r}")
        return frozenset(stops)

    def _track(self, delta: int) -> None:
        with self._active_lock:
            self._active += delta

    def _loop(
        self,
        prompt: list[int],
        run: _Generation,
        observer: abc.ObserverBase[int],
        sampler: Sampler,
        max_new_tokens: int,
        stops: frozenset[int],
        eos: frozenset[int],
    ) -> None:
        self._track(1)
        try:
            finish = self._decode(prompt, run, observer, sampler, max_new_tokens, stops, eos)
            if finish is not None and run.claim():
                run.report(finish)
                observer.on_completed()
        except Exception as exc:
            if run.claim():
                try:
                    run.report(Finish(FinishReason.ERROR, error=exc))
                finally:
                    observer.on_error(exc)
        finally:
            self._track(-1)

    def _decode(
        self,
        prompt: list[int],
        run: _Generation,
        observer: abc.ObserverBase[int],
        sampler: Sampler,
        max_new_tokens: int,
        stops: frozenset[int],
        eos: frozenset[int],
    ) -> Finish | None:
        graph = self._graph
        needed = min(len(prompt) + max_new_tokens, self.max_length)
        cache = graph.new_cache(1, needed, self.max_length)
        # every per-step input is a view of one buffer made here: a decode step allocates nothing
        ones = np.ones((1, needed), np.int64)
        positions = np.arange(needed, dtype=np.int64)[None, :]
        next_id = np.zeros((1, 1), np.int64)
        ids = np.asarray([prompt], dtype=np.int64)
        total = len(prompt)
        produced = 0
        has_positions = graph.has_position_ids
        while True:
            if run.cancelled:
                return None
            if produced >= max_new_tokens or total >= self.max_length:
                return Finish(FinishReason.LENGTH)
            feeds = {"input_ids": ids, "attention_mask": ones[:, :total]}
            if has_positions:
                feeds["position_ids"] = positions[:, total - ids.shape[1] : total]
            logits = cache.step(feeds, total)
            token = sampler(logits[0, -1])
            if token in stops:
                return Finish(FinishReason.STOP, stop=token)
            if token in eos:
                return Finish(FinishReason.EOS)
            if run.cancelled:
                return None
            observer.on_next(token)
            produced += 1
            total += 1
            next_id[0, 0] = token
            ids = next_id

    # ------------------------------------------------------------------ batches
    def _plain_graph(self) -> _Graph:
        if self._batch_graph is None:
            path = self.directory / BATCH_MODEL_FILE
            if not path.is_file():
                raise ValueError(
                    f"OnnxModel: {self._graph.path.name} uses fused attention without position_ids, which "
                    f"cannot run left-padded batches, and there is no {BATCH_MODEL_FILE} in {self.directory}"
                )
            self._batch_graph = _Graph(
                path, self._provider_request, self._threads, self.config, self._spinning
            )
        return self._batch_graph

    def generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        *,
        on_finish: RowFinishCallback | None = None,
        scheduler: abc.SchedulerBase | None = None,
        **sampling: Unpack[SamplingOptions],
    ) -> Observable[tuple[int, int]]:
        """Generate for several prompts at once (left-padded batch) as ``Observable[(row, token_id)]``.

        Each row ends on its own (EOS, stop id, budget), reported as ``on_finish(row, Finish)``; the
        observable completes when every row has ended. Each row's ids equal what :meth:`generate`
        gives for that prompt alone (up to float rounding). Row ``i`` samples with seed ``seed + i``.
        Disposing stops the loop before the next forward pass (every unfinished row: CANCELLED).
        """
        args = SamplingParams.from_kwargs(params, sampling, "generate_batch", self.default_sampling)
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Iterable):
            raise TypeError(
                "generate_batch: prompts must be a sequence of token-id sequences, "
                f"got {type(prompts).__name__}"
            )
        rows = [self._check_prompt(p, "generate_batch", f"prompts[{i}]") for i, p in enumerate(prompts)]
        if not rows:
            raise ValueError("generate_batch: no prompts")
        stops = self._check_call_args("generate_batch", args.stop_token_ids, on_finish, scheduler)
        max_new_tokens = args.max_new_tokens
        eos = frozenset() if args.ignore_eos else self._eos
        needs_padding = len({len(r) for r in rows}) > 1
        graph = self._plain_graph() if (needs_padding and not self._graph.has_position_ids) else self._graph

        def subscribe(
            observer: abc.ObserverBase[tuple[int, int]], sched: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            lock = threading.Lock()
            done = [False] * len(rows)
            state = {"cancelled": False}

            def finish_row(i: int, finish: Finish) -> bool:
                with lock:
                    if done[i]:
                        return False
                    done[i] = True
                if on_finish is not None:
                    on_finish(i, finish)
                return True

            samplers = [
                Sampler(
                    self.vocab_size,
                    temperature=args.temperature,
                    top_k=args.top_k,
                    top_p=args.top_p,
                    repetition_penalty=args.repetition_penalty,
                    seed=None if args.seed is None else args.seed + i,
                    seen=r,
                )
                for i, r in enumerate(rows)
            ]

            def action(_scheduler: abc.SchedulerBase, _state: Any = None) -> None:
                self._track(1)
                try:
                    self._batch_loop(
                        graph, rows, samplers, state, done, finish_row, observer, max_new_tokens, stops, eos
                    )
                except Exception as exc:
                    for i in range(len(rows)):
                        finish_row(i, Finish(FinishReason.ERROR, error=exc))
                    observer.on_error(exc)
                finally:
                    self._track(-1)

            scheduled = (scheduler or sched or default_scheduler()).schedule(action)

            def dispose() -> None:
                state["cancelled"] = True
                for i in range(len(rows)):
                    finish_row(i, Finish(FinishReason.CANCELLED))
                scheduled.dispose()

            return Disposable(dispose)

        return reactivex.create(subscribe)

    def _batch_loop(
        self,
        graph: _Graph,
        rows: list[list[int]],
        samplers: list[Sampler],
        state: dict[str, bool],
        done: list[bool],
        finish_row: Callable[[int, Finish], bool],
        observer: abc.ObserverBase[tuple[int, int]],
        max_new_tokens: int,
        stops: frozenset[int],
        eos: frozenset[int],
    ) -> None:
        batch, width = len(rows), max(len(r) for r in rows)
        pad = next(iter(sorted(self._eos)), 0)
        ids = np.full((batch, width), pad, dtype=np.int64)
        mask = np.zeros((batch, width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, width - len(r) :] = r
            mask[i, width - len(r) :] = 1
        positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
        past = graph.empty_past(batch)
        produced = 0
        while True:
            if state["cancelled"]:
                return
            if produced >= max_new_tokens or mask.shape[1] >= self.max_length:
                for i in range(batch):
                    finish_row(i, Finish(FinishReason.LENGTH))
                break
            feeds = {"input_ids": ids, "attention_mask": mask}
            if graph.has_position_ids:
                feeds["position_ids"] = positions
            logits, past = graph.step(feeds, past)
            next_ids = np.full((batch, 1), pad, dtype=np.int64)
            for i in range(batch):
                if done[i]:
                    continue
                token = samplers[i](logits[i, -1])
                if token in stops:
                    finish_row(i, Finish(FinishReason.STOP, stop=token))
                elif token in eos:
                    finish_row(i, Finish(FinishReason.EOS))
                else:
                    if state["cancelled"]:
                        return
                    observer.on_next((i, token))
                    next_ids[i, 0] = token
            produced += 1
            if all(done):
                break
            ids = next_ids
            mask = np.concatenate([mask, np.ones((batch, 1), np.int64)], axis=1)
            positions = positions[:, -1:] + 1
        if not state["cancelled"]:
            observer.on_completed()


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _config_from_genai(genai: dict[str, Any], directory: Path) -> DecoderConfig:
    """A :class:`DecoderConfig` from onnxruntime-genai's ``genai_config.json``."""
    try:
        model = genai["model"]
        dec = model["decoder"]
        heads = int(dec["num_attention_heads"])
        head_size = int(dec["head_size"])
        return DecoderConfig(
            vocab_size=int(model["vocab_size"]),
            hidden_size=heads * head_size,
            intermediate_size=int(dec.get("intermediate_size", 4 * heads * head_size)),
            num_layers=int(dec["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(dec.get("num_key_value_heads", heads)),
            max_position_embeddings=int(model.get("context_length", 2048)),
            eos_token_id=tuple(sorted(_ids(model.get("eos_token_id")))),
            bos_token_id=model.get("bos_token_id"),
            pad_token_id=model.get("pad_token_id"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"OnnxModel.load: {directory / 'genai_config.json'} lacks decoder fields ({exc})"
        ) from None
