"""``python -m interlingua`` is the ``interlingua`` command."""

import sys

from interlingua.cli import main

sys.exit(main())
