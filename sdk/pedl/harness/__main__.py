import sys

from pedl.harness.main import exit_now, main

if __name__ == "__main__":
    try:
        code = main()
    except SystemExit as e:
        sys.exit(e.code)
    exit_now(code)
