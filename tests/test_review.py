"""``drafts review``: the candidates of a finished search served to a browser, labels
written safely, nothing served from outside the reviewed directories."""

from __future__ import annotations

import csv
import http.client
import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from drafts_ops.core.resources import resource_path
from drafts_ops.review.catalogue import load_catalogue
from drafts_ops.review.labels import LABELS_FILE, LabelStore
from drafts_ops.review.server import MAX_BODY, ReviewServer
from drafts_ops.search import SearchConfig, run_search


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("review") / "demo-out"
    run_search(resource_path("data", "demo.fil"), out, SearchConfig())
    return out


@pytest.fixture
def server(searched):
    (searched / LABELS_FILE).unlink(missing_ok=True)
    srv = ReviewServer(load_catalogue([searched]), ("127.0.0.1", 0), who="tester")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _request(srv, method: str, path: str, body: bytes | None = None, headers=None):
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=60)
    conn.request(method, path, body=body, headers=headers or {})
    reply = conn.getresponse()
    data = reply.read()
    conn.close()
    return reply.status, data


def _label(srv, item_id: str, label: str, note: str = "") -> int:
    body = json.dumps({"id": item_id, "label": label, "note": note}).encode()
    return _request(srv, "POST", "/api/label", body, {"Content-Type": "application/json"})[0]


def test_the_list_holds_every_candidate_with_its_products(server, searched):
    status, data = _request(server, "GET", "/api/candidates")
    rows = json.loads(data)["candidates"]
    assert status == 200 and len(rows) == 5
    assert sum(r["has_h5"] for r in rows) == 4 and {r["file"] for r in rows} == {"demo.fil"}
    status, data = _request(server, "GET", f"/api/candidate/{rows[0]['id']}")
    doc = json.loads(data)
    assert doc["observation"]["nchans"] == 256 and "options" in doc["run"]
    for link in doc["links"].values():
        assert _request(server, "GET", link)[0] == 200
    for row in (rows[0], rows[-1]):  # from the .h5 file, and made again from the file
        status, png = _request(server, "GET", f"/api/image/{row['id']}.png?subbands=8&smooth=2")
        assert status == 200 and png[:4] == b"\x89PNG", png[:200]


def test_labels_are_kept_per_candidate_and_bad_ones_refused(server, searched):
    rows = json.loads(_request(server, "GET", "/api/candidates")[1])["candidates"]
    assert _label(server, rows[0]["id"], "burst", "bright") == 200
    assert _label(server, rows[0]["id"], "unsure") == 200  # changed mind: the latest counts
    assert _label(server, "0:.:999", "burst") == 400  # no such candidate
    assert _label(server, rows[1]["id"], "pulsar") == 400  # no such label
    big = json.dumps({"id": rows[1]["id"], "label": "rfi", "note": "x" * MAX_BODY}).encode()
    assert _request(server, "POST", "/api/label", big)[0] == 413
    latest = LabelStore(searched).latest()
    assert latest == {rows[0]["id"]: latest[rows[0]["id"]]}
    assert latest[rows[0]["id"]]["label"] == "unsure" and latest[rows[0]["id"]]["who"] == "tester"
    listed = json.loads(_request(server, "GET", "/api/candidates")[1])["candidates"]
    assert listed[0]["label"] == "unsure"
    assert sorted(p.name for p in searched.iterdir() if p.name.startswith(".")) == [
        f".{LABELS_FILE}.lock"
    ]  # nothing else added beside the search's files


def test_nothing_outside_the_reviewed_directories_is_served(server, searched, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    (searched / "escape").unlink(missing_ok=True)
    (searched / "escape").symlink_to(secret)
    try:
        for path in ("/files/0/../../../../etc/passwd", "/files/0/%2e%2e/%2e%2e/etc/passwd",
                     "/files/0/escape"):  # fmt: skip
            status, data = _request(server, "GET", path)
            assert status in (403, 404) and b"not yours" not in data and b"root:" not in data
        assert _request(server, "GET", "/files/0/escape")[0] == 403
        assert _request(server, "GET", "/files/9/candidates.csv")[0] == 404
        assert _request(server, "GET", "/files/0/candidates.csv")[0] == 200
        assert _request(server, "GET", "/api/image/0:.:999.png")[0] == 404
    finally:
        (searched / "escape").unlink()


def test_two_reviewers_at_once_lose_nothing(server, searched):
    rows = json.loads(_request(server, "GET", "/api/candidates")[1])["candidates"]
    other = ReviewServer(load_catalogue([searched]), ("127.0.0.1", 0), who="second")
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:

        def post(srv, label):
            for k in range(15):
                assert _label(srv, rows[k % len(rows)]["id"], label, f"{label} {k}") == 200

        threads = [threading.Thread(target=post, args=(srv, label))
                   for srv, label in ((server, "rfi"), (other, "noise"))]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        other.shutdown()
        other.server_close()
    written = LabelStore(searched).rows()
    assert len(written) == 30
    assert {r["note"] for r in written} == {f"{x} {k}" for x in ("rfi", "noise") for k in range(15)}


def test_a_crash_mid_write_leaves_the_previous_labels(searched, monkeypatch):
    from drafts_ops.core import atomic

    (searched / LABELS_FILE).unlink(missing_ok=True)
    store = LabelStore(searched)
    store.add("0:.:0", "burst", note="first")
    before = (searched / LABELS_FILE).read_bytes()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies between writing and renaming

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        store.add("0:.:1", "rfi")
    monkeypatch.undo()
    assert (searched / LABELS_FILE).read_bytes() == before
    assert not [p for p in searched.iterdir() if p.name.endswith(".tmp")]


def _chromium():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("websockets.sync.client", reason="websockets drives Chromium here")
    return browser


class _Tab:
    """A Chromium tab driven over the DevTools protocol."""

    def __init__(self, browser: str, port: int) -> None:
        from websockets.sync.client import connect

        args = [browser, "--headless", "--no-sandbox", "--disable-gpu",
                f"--remote-debugging-port={port}", "about:blank"]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/json")
                pages = [p for p in json.loads(conn.getresponse().read()) if p["type"] == "page"]
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.ws = connect(pages[0]["webSocketDebuggerUrl"], max_size=None)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == self.next_id:
                return reply.get("result", {})

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)  # fmt: skip
        return result.get("result", {}).get("value")

    def wait(self, expression: str, timeout_s: float = 30.0):
        deadline = time.monotonic() + timeout_s
        while not self.js(expression):
            assert time.monotonic() < deadline, expression
            time.sleep(0.1)

    def close(self) -> None:
        self.ws.close()
        self.proc.kill()
        self.proc.wait()


def test_the_page_in_chromium_lists_sorts_filters_and_labels(server, searched):
    browser = _chromium()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    tab = _Tab(browser, port)
    try:
        tab.call("Page.navigate", url=server.url)
        tab.wait("document.querySelectorAll('#rows tr').length == 5")
        snr = "Array.from(document.querySelectorAll('#rows tr')).map(r => +r.cells[4].textContent)"
        tab.js("document.querySelector('th[data-k=snr]').click()")  # ascending
        assert tab.js(snr) == sorted(tab.js(snr))
        tab.js("var i = document.getElementById('dmlo'); i.value = '300';"
               "i.dispatchEvent(new Event('input'))")  # fmt: skip
        dms = "Array.from(document.querySelectorAll('#rows tr')).map(r => +r.cells[3].textContent)"
        assert tab.js(dms) and min(tab.js(dms)) >= 300 and len(tab.js(dms)) < 5
        tab.wait("document.getElementById('image').complete && "
                 "document.getElementById('image').naturalWidth > 0")  # fmt: skip
        chosen = tab.js("shown[current].id")
        tab.js("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'b'}))")
        tab.wait("document.getElementById('status').textContent.startsWith('saved')")
        with (searched / LABELS_FILE).open() as fh:
            assert [(r["id"], r["label"]) for r in csv.DictReader(fh)] == [(chosen, "burst")]
        tab.call("Page.reload")
        tab.wait("document.querySelectorAll('#rows tr').length == 5")
        shown = tab.js("Array.from(document.querySelectorAll('#rows tr'))"
                       ".filter(r => r.cells[7].textContent == 'burst')"
                       ".map(r => r.dataset.id)")  # fmt: skip
        assert shown == [chosen]  # the label survived the reload
    finally:
        tab.close()


@pytest.mark.slow
def test_labels_retrain_the_classifier_and_the_search_can_use_it(searched, tmp_path, capsys):
    """Labels from the demo's truth (four bursts, an impulse) join a short training run:
    a new model with its manifest entry scoring the held-out labels before and after, which
    the search then uses with --classifier."""
    pytest.importorskip("torch", reason="training needs the train extra (torch)")
    import hashlib

    from drafts_ops.cli import main
    from drafts_ops.ml.manifest import read_manifest

    (searched / LABELS_FILE).unlink(missing_ok=True)
    store = LabelStore(searched)
    for item in load_catalogue([searched]).items.values():
        store.add(item.id, "burst" if item.candidate.dm < 1000 else "rfi")
    out = tmp_path / "model"
    argv = ["train", "classifier", "--labels", str(searched), "--steps", "20", "--pool", "2"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "held-out labelled candidates, before" in printed and ", after" in printed
    entry = read_manifest(out)["models"]["classifier.onnx"]
    # 4 bursts and 1 impulse: a quarter of the bursts held out; a class of one is all trained on
    assert entry["labels"]["labelled"] == 5 and entry["labels"]["held_out"] == 1
    assert {"accuracy", "recall", "log_loss"} <= set(entry["labels"]["after"])
    shipped = resource_path("models", "classifier.onnx").read_bytes()
    assert hashlib.sha256((out / "classifier.onnx").read_bytes()).digest() != hashlib.sha256(
        shipped).digest()  # fmt: skip
    config = SearchConfig(classifier=str(out), write_h5=False, write_plots=False)
    ours = run_search(resource_path("data", "demo.fil"), tmp_path / "s", config)
    default = load_catalogue([searched]).items
    assert [c.classifier_prob for c in ours.candidates] != [
        default[f"0:.:{k}"].candidate.classifier_prob for k in range(len(ours.candidates))
    ]
