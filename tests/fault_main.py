"""Script entry of the fault tests: ``python fault_main.py audit|run ...`` (see fault_helpers)."""

import sys

from fault_helpers import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
