"""``python -m mirrorflow.acls TOPOLOGY``: forwarded to :mod:`mirrorflow.needed_acls`, which holds the command."""

from __future__ import annotations

import sys

from mirrorflow.needed_acls.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
