"""``python -m drafts_ops`` runs the ``drafts`` command line."""

from drafts_ops.cli import console

console()
