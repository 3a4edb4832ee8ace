"""The README is a user guide that works as written: short, search-your-own-file first, no
measurement log, and every shell command in it that needs no Prefect server runs."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: ``drafts`` sub-commands that start a Prefect API (or need a server): not run here; the
#: flow tests run them.
SERVER_COMMANDS = frozenset({"search", "survey", "validate", "deploy", "trigger"})
#: Words that stand for the user's own paths in the README's templates.
PLACEHOLDER = re.compile(r"\b(FILE|DIR|INCOMING|SURVEY|OUT\.fil)\b")


def shell_blocks(text: str) -> list[str]:
    """The contents of the README's ```bash blocks."""
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def commands(block: str) -> list[str]:
    """One command per logical line (backslash continuations joined, comments dropped)."""
    joined = re.sub(r"\\\n\s*", " ", block)
    out = []
    for raw in joined.splitlines():
        line = raw.split("  #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.extend(part.strip() for part in line.split("&&"))
    return out


def runnable(command: str) -> bool:
    """A ``drafts`` command with concrete arguments that needs no server."""
    words = shlex.split(command)
    return (len(words) > 1 and words[0] == "drafts" and words[1] not in SERVER_COMMANDS
            and not PLACEHOLDER.search(command) and "[" not in command)  # fmt: skip


def test_readme_is_a_short_user_guide():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines (a user guide: <= ~300)"
    heading = next(i for i, line in enumerate(lines) if line.startswith("## Search your own"))
    assert heading < 60, "searching your own file must come within the first 60 lines"
    assert "## Outputs" in text and "docs/" in text
    dated = re.findall(r"20\d\d-\d\d-\d\d|\bstop \d+|\bissue \d+|\b[0-9a-f]{7}\b", text)
    assert not dated, f"the README holds measurement-log references: {dated}"


def test_every_readme_command_without_a_server_runs(tmp_path):
    """Run the README's ``drafts`` commands in a fresh directory (``data/`` as in a
    checkout), in order, as a new user would; each must exit 0."""
    (tmp_path / "data").symlink_to(ROOT / "data")
    todo = [c for block in shell_blocks(README.read_text()) for c in commands(block)]
    chosen = [c for c in todo if runnable(c)]
    assert len(chosen) >= 4, f"too few runnable README commands: {chosen}"
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    for command in chosen:
        words = shlex.split(command)
        argv = [sys.executable, "-m", "drafts_ops", *words[1:]]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, f"`{command}` failed:\n{done.stderr[-2000:]}"


@pytest.mark.skipif(shutil.which("drafts") is None, reason="the drafts script is not installed")
def test_readme_commands_are_commands_of_drafts():
    """Every ``drafts X`` the README names, server or not, is a sub-command."""
    from drafts_ops.cli import build_parser

    names = set(build_parser()._subparsers._group_actions[0].choices)
    named = {shlex.split(c)[1] for b in shell_blocks(README.read_text()) for c in commands(b)
             if c.startswith("drafts ")}  # fmt: skip
    assert named and named <= names, sorted(named - names)


def test_quickstart_says_what_the_demo_gives(tmp_path):
    """The quick start's account of the demo: five candidates, four kept by the classifier
    with a .h5 and a PNG each, an unmatched impulse listed only; the closing line's form."""
    from drafts_ops.core.resources import resource_path
    from drafts_ops.search import SearchConfig, run_search
    from flows.commands import closing_line

    text = (ROOT / "docs" / "quickstart.md").read_text()
    result = run_search(resource_path("data", "demo.fil"), tmp_path, SearchConfig())
    summary = result.to_dict()
    assert (summary["candidates"], summary["bursts"], summary["plots"]) == (5, 4, 4)
    assert "five candidates: the four bursts" in text
    assert sum(k.startswith("h5:") for k in result.outputs) == 4
    line = closing_line("data/demo.fil", summary)
    assert line.startswith("data/demo.fil: 5 candidates, 4 kept by the classifier, 4 plots in ")
    assert line.endswith(f"report {tmp_path / 'report.html'}")
    shown = next(x for x in text.splitlines() if x.startswith("data/demo.fil: "))
    assert shown.split(" in ")[0] == line.split(" in ")[0]
