"""`python -m app` is the `autoprovision` command."""

import sys

from app.cli import main

sys.exit(main())
