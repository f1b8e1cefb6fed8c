import sys

from pedl.harness.main import main

if __name__ == "__main__":
    sys.exit(main())
