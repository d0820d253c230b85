"""The ``rxstream`` command line on a tiny model built in-process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from reactivex import operators as ops

from rxstream.backends import OnnxModel, build_tiny_model
from rxstream.cli import build_parser, main


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("cli") / "tiny", seed=2)


def expected_text(tiny: Path, prompt: str, n: int) -> str:
    model = OnnxModel.load(tiny)
    ids = (
        model.generate(model.encode_chat([{"role": "user", "content": prompt}]), max_new_tokens=n)
        .pipe(ops.to_list())
        .run()
    )
    text: str = model.tokenizer.decode(ids)
    return text


def test_chat_streams_the_answer_and_reports_the_finish(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "chat",
            "What is the capital of France?",
            "--model",
            str(tiny),
            "--max-tokens",
            "12",
            "--provider",
            "cpu",
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0
    want = expected_text(tiny, "What is the capital of France?", 12)
    assert out == want + "\n"
    assert "[finish: " in err and "| cpu |" in err


def test_chat_stop_and_replace(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    full = expected_text(tiny, "hello", 30)
    cut = full[3:5]
    status = main(["chat", "hello", "--model", str(tiny), "--max-tokens", "30", "--stop", cut])
    out, err = capsys.readouterr()
    assert status == 0
    assert out == full[: full.index(cut)] + "\n"
    assert f"[finish: stop ({cut!r})" in err
    old = full[0]
    main(["chat", "hello", "--model", str(tiny), "--max-tokens", "30", "--replace", f"{old}=<X>"])
    out, _ = capsys.readouterr()
    assert out == full.replace(old, "<X>") + "\n"


def test_chat_show_tokens(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = OnnxModel.load(tiny)
    ids = (
        model.generate(model.encode_chat([{"role": "user", "content": "hello"}]), max_new_tokens=6)
        .pipe(ops.to_list())
        .run()
    )
    main(["chat", "hello", "--model", str(tiny), "--max-tokens", "6", "--show-tokens"])
    out, err = capsys.readouterr()
    shown = [int(i) for group in re.findall(r"\[(\d+(?: \d+)*)\]", out) for i in group.split()]
    assert shown == ids
    assert re.sub(r"\[\d+(?: \d+)*\]", "", out) == model.tokenizer.decode(ids) + "\n"
    assert f"{len(ids)} tokens" in err


def test_chat_with_a_bad_model_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["chat", "hi", "--model", str(tmp_path / "nothing-here")])
    _, err = capsys.readouterr()
    assert status == 1
    assert "nothing-here" in err


def test_bad_options_are_rejected() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chat", "x", "--replace", "no-equals-sign"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chat", "x", "--provider", "tpu"])


def test_models_list_and_unknown_pull(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "list", "--cache-dir", str(tmp_path)]) == 0
    out, _ = capsys.readouterr()
    assert "smollm2" in out and "not pulled" in out
    assert main(["models", "pull", "nonexistent", "--cache-dir", str(tmp_path)]) == 1
    _, err = capsys.readouterr()
    assert "unknown model" in err


def test_python_dash_m_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rxstream", "--help"], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0
    assert "chat" in result.stdout and "models" in result.stdout


def test_option_escapes_keep_non_ascii_text() -> None:
    """``--stop``/``--replace`` unescape backslash sequences and leave other text alone (they once
    turned 'é' into 'Ã©' by decoding UTF-8 bytes as Latin-1)."""
    args = build_parser().parse_args(
        ["chat", "x", "--stop", "é\\n", "--stop", "→", "--replace", "\\u00e9=e\\t", "--replace", "日本=ja"]
    )
    assert args.stop == ["é\n", "→"]
    assert args.replace == [("é", "e\t"), ("日本", "ja")]


RXSTREAM = str(Path(sys.executable).with_name("rxstream"))


@pytest.mark.parametrize(
    ("argv", "stdin"),
    [
        ([b"chat", b"ab\xffc"], b""),
        ([b"chat", b"--system", b"\xfe", b"hi"], b""),
        ([b"chat"], b"caf\xe9 au lait"),
        ([b"chat", b"--stop", b"\xff", b"hi"], b""),
        ([b"chat", b"--stop", b"\\x", b"hi"], b""),
    ],
)
def test_undecodable_text_gets_one_line(tiny: Path, argv: list[bytes], stdin: bytes) -> None:
    """Bytes that are not UTF-8 on the command line or stdin: exit 2 with one line, no traceback."""
    result = subprocess.run(
        [RXSTREAM.encode(), *argv, b"--model", str(tiny).encode()],
        input=stdin,
        capture_output=True,
        check=False,
        timeout=120,
    )
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("rxstream chat")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--temperature", "-1", "--temperature must be >= 0"),
        ("--top-p", "0", "--top-p must be in (0, 1]"),
        ("--top-k", "-2", "--top-k must be >= 0"),
        ("--repetition-penalty", "0", "--repetition-penalty must be > 0"),
        ("--seed", "-5", "--seed must be >= 0"),
        ("--max-tokens", "0", "--max-tokens must be >= 1"),
        ("--temperature", "nan", "--temperature must be a finite number"),
    ],
)
def test_sampling_options_are_checked_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    """The model directory does not exist: the option's error must come first, naming the option."""
    status = main(["chat", "hi", "--model", str(tmp_path / "absent"), option, value])
    _, err = capsys.readouterr()
    assert status == 2
    assert err.strip() == f"rxstream chat: {message}" or err.strip().startswith(f"rxstream chat: {message}")
    assert "absent" not in err and "generate:" not in err


def test_show_tokens_places_ids_before_line_breaks_and_shows_no_empty_brackets(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rxstream.cli._chat import _with_ids

    assert _with_ids("a\n", (5,), lambda s: s) == "a[5]\n"
    assert _with_ids("\n\n", (5, 6), lambda s: s) == "[5 6]\n\n"
    assert _with_ids("tail", (), lambda s: s) == "tail"
    full = expected_text(tiny, "hello", 30)
    cut = full[5:7]
    main(["chat", "hello", "--model", str(tiny), "--max-tokens", "30", "--stop", cut, "--show-tokens"])
    out, _ = capsys.readouterr()
    assert "[]" not in out
    assert re.sub(r"\[\d+(?: \d+)*\]", "", out) == full[: full.index(cut)] + "\n"


def test_chat_samples_as_the_model_says_unless_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    directory = build_tiny_model(tmp_path / "sampling", seed=4)
    greedy = expected_text(directory, "hello", 20)
    config_file = directory / "generation_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "do_sample": True, "temperature": 1.5}))
    outs = set()
    for seed in range(3):
        assert (
            main(["chat", "hello", "--model", str(directory), "--max-tokens", "20", "--seed", str(seed)]) == 0
        )
        outs.add(capsys.readouterr().out)
    assert len(outs) > 1 and greedy + "\n" not in outs  # the model's temperature 1.5 was used
    assert main(["chat", "hello", "--model", str(directory), "--max-tokens", "20", "--temperature", "0"]) == 0
    assert capsys.readouterr().out == greedy + "\n"


def test_int4_with_a_model_directory_is_an_error(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", "hi", "--model", str(tiny), "--int4"]) == 1
    _, err = capsys.readouterr()
    assert err.strip().startswith("rxstream chat: OnnxModel.from_pretrained: int4 applies to the known")
    assert str(tiny) in err
    assert main(["chat", "hi", "--model", str(tiny), "--quantization", "int4-a8"]) == 1
    _, err = capsys.readouterr()
    assert err.strip().startswith("rxstream chat: OnnxModel.from_pretrained: int4-a8 applies to the known")


def test_ctrl_c_while_chat_waits_on_stdin_is_one_line(tiny: Path) -> None:
    """Piped stdin that never ends: Ctrl-C (SIGINT) gives exit 130 and one line, no traceback."""
    import signal
    import time

    proc = subprocess.Popen(
        [RXSTREAM, "chat", "--model", str(tiny)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # it is reading stdin by now (nothing to do before that but parse options)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == "rxstream chat: interrupted"


def test_python_dash_m_cli_and_server_entry_points() -> None:
    for module in ("rxstream.cli", "rxstream.server"):
        result = subprocess.run(
            [sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=False, timeout=60
        )
        assert result.returncode == 0, (module, result.stderr)
        assert "--port" in result.stdout or "chat" in result.stdout


def test_no_arguments_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: rxstream") and "chat" in out and "serve" in out and err == ""
    proc = subprocess.run([sys.executable, "-m", "rxstream"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: rxstream")


def test_provider_cuda_without_a_gpu_is_one_line_naming_the_flag(
    tiny: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from rxstream.backends.onnx import CudaUnavailableError, _session

    if _session._nvidia_device_present():
        pytest.skip("this machine has an NVIDIA device")
    with pytest.raises(
        CudaUnavailableError,
        match="provider='cuda' was requested but this machine has no NVIDIA GPU for CUDA",
    ):
        OnnxModel.load(tiny, provider="cuda")
    capfd.readouterr()
    status = main(["chat", "hi", "--model", str(tiny), "--provider", "cuda"])
    out, err = capfd.readouterr()  # the file descriptors: ONNX Runtime's own log lines too
    assert status == 1 and out == ""
    want = (
        "--provider cuda: this machine has no NVIDIA GPU for CUDA (no /dev/nvidiactl); "
        "use --provider cpu or auto"
    )
    assert err == f"rxstream chat: {want}\n"
