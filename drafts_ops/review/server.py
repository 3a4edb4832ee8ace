"""``drafts review``'s web server: the review page, its candidates and detail images, the
output directories' files, and label writes. Standard library only (``http.server``).

Routes: ``GET /`` the page; ``GET /api/candidates`` the list with each candidate's label;
``GET /api/candidate/<id>`` its provenance; ``GET /api/image/<id>.png?subbands=&smooth=``
its detail image; ``GET /files/<root>/<path>`` a file under the ``root``-th directory;
``POST /api/label`` ``{"id", "label", "note"}``.

Safe by construction: files are served only when their real path (symlinks resolved)
lies inside a given directory, labels only for candidates that exist, request bodies up
to :data:`MAX_BODY` bytes, and the page needs nothing from the internet.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import threading
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from drafts_ops.core.errors import DraftsError
from drafts_ops.review.catalogue import Catalogue
from drafts_ops.review.images import detail_png
from drafts_ops.review.labels import LabelStore
from drafts_ops.review.page import review_page

log = logging.getLogger(__name__)

#: Largest request body accepted, bytes (a label and its note).
MAX_BODY = 4096
#: Most sub-bands and smoothing pixels a detail image may ask for.
MAX_SUBBANDS, MAX_SMOOTH = 256, 64


class ReviewServer(ThreadingHTTPServer):
    """Serves one :class:`Catalogue`; ``who`` signs the labels written through it."""

    daemon_threads = True

    def __init__(self, catalogue: Catalogue, address: tuple[str, int], who: str = "") -> None:
        super().__init__(address, ReviewHandler)
        self.catalogue = catalogue
        self.who = who
        self.stores = [LabelStore(root) for root in catalogue.roots]
        self.images_lock = threading.Lock()  # matplotlib figures: one at a time

    def handle_error(self, request, client_address) -> None:
        """A browser that drops a connection (a detail image no longer wanted) is normal;
        other errors are logged."""
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            log.debug("%s closed the connection", client_address)
            return
        log.exception("review request from %s failed", client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def labels(self) -> dict[str, dict[str, str]]:
        """Each labelled candidate's latest label, over every directory."""
        out: dict[str, dict[str, str]] = {}
        for store in self.stores:
            out.update(store.latest())
        return out


class ReviewHandler(BaseHTTPRequestHandler):
    server: ReviewServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    # -- GET ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = urllib.parse.parse_qs(url.query)
        if path == "/":
            self._send(HTTPStatus.OK, review_page().encode(), "text/html; charset=utf-8")
        elif path == "/api/candidates":
            self._candidates()
        elif path.startswith("/api/candidate/"):
            self._provenance(path.removeprefix("/api/candidate/"))
        elif path.startswith("/api/image/") and path.endswith(".png"):
            self._image(path.removeprefix("/api/image/").removesuffix(".png"), query)
        elif path.startswith("/files/"):
            self._file(path.removeprefix("/files/"))
        else:
            self._error(HTTPStatus.NOT_FOUND, "no such page")

    def _candidates(self) -> None:
        labels = self.server.labels()
        rows = []
        for item in self.server.catalogue.items.values():
            row = item.summary()
            label = labels.get(item.id, {})
            rows.append({**row, "label": label.get("label", ""), "note": label.get("note", "")})
        roots = [str(r) for r in self.server.catalogue.roots]
        self._json(HTTPStatus.OK, {"candidates": rows, "roots": roots})

    def _provenance(self, item_id: str) -> None:
        try:
            item = self.server.catalogue.get(item_id)
        except KeyError:
            self._error(HTTPStatus.NOT_FOUND, f"no candidate {item_id!r}")
            return
        self._json(HTTPStatus.OK, self.server.catalogue.provenance(item))

    def _image(self, item_id: str, query: dict[str, list[str]]) -> None:
        try:
            item = self.server.catalogue.get(item_id)
            subbands = _bounded(query, "subbands", MAX_SUBBANDS)
            smooth = _bounded(query, "smooth", MAX_SMOOTH)
        except KeyError:
            self._error(HTTPStatus.NOT_FOUND, f"no candidate {item_id!r}")
            return
        except ValueError as err:
            self._error(HTTPStatus.BAD_REQUEST, str(err))
            return
        try:
            with self.server.images_lock:
                png = detail_png(item, subbands=subbands, smooth=smooth)
        except (DraftsError, OSError) as err:
            self._error(HTTPStatus.NOT_FOUND, str(err))
            return
        self._send(HTTPStatus.OK, png, "image/png")

    def _file(self, rest: str) -> None:
        index, _, relative = rest.partition("/")
        roots = self.server.catalogue.roots
        if not index.isdigit() or int(index) >= len(roots):
            self._error(HTTPStatus.NOT_FOUND, "no such directory")
            return
        target = safe_path(roots[int(index)], relative)
        if target is None:
            self._error(HTTPStatus.FORBIDDEN, "outside the reviewed directories")
        elif not target.is_file():
            self._error(HTTPStatus.NOT_FOUND, "no such file")
        else:
            kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            self._send(HTTPStatus.OK, target.read_bytes(), kind)

    # -- POST -----------------------------------------------------------------------------

    def do_POST(self) -> None:
        if urllib.parse.urlsplit(self.path).path != "/api/label":
            self._error(HTTPStatus.NOT_FOUND, "no such page")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"at most {MAX_BODY} bytes")
            return
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            item = self.server.catalogue.get(str(body["id"]))
        except (ValueError, KeyError, TypeError):
            self._error(HTTPStatus.BAD_REQUEST, "expected {id, label, note} of a candidate")
            return
        try:
            row = self.server.stores[item.root].add(item.id, str(body.get("label", "")),
                                                   note=str(body.get("note", "")),
                                                   who=self.server.who,
                                                   candidate=item.summary())  # fmt: skip
        except DraftsError as err:
            self._error(HTTPStatus.BAD_REQUEST, str(err))
            return
        self._json(HTTPStatus.OK, row)

    # -- replies --------------------------------------------------------------------------

    def _json(self, status: HTTPStatus, doc: Any) -> None:
        self._send(status, json.dumps(doc).encode(), "application/json")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json(status, {"error": message})

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)


def safe_path(root: Path, relative: str) -> Path | None:
    """``root / relative`` if its real path (symlinks resolved) lies inside ``root``'s real
    path, else ``None``."""
    base = Path(root).resolve()
    target = (base / relative).resolve()
    return target if target == base or target.is_relative_to(base) else None


def _bounded(query: dict[str, list[str]], name: str, most: int) -> int | None:
    value = (query.get(name) or [""])[0]
    if value in ("", "auto"):
        return None
    number = int(value)
    if not 1 <= number <= most:
        raise ValueError(f"{name} must be 1-{most}")
    return number
