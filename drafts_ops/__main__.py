"""``python -m drafts_ops`` runs the ``drafts`` command line."""

import sys

from drafts_ops.cli import main

sys.exit(main())
