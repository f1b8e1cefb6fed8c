"""`python -m pedl.cli`: the `pedl` command, for environments without its console script."""

import sys

from pedl.cli.main import main

sys.exit(main())
