"""`python -m pedl.cli`: the `pedl` command, for environments without its console script."""

import sys

from pedl.cli.main import main

if __name__ == "__main__":  # importing the module (as tools that walk the package do) runs nothing
    sys.exit(main())
