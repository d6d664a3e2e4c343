"""`python -m sctc_assets.cli`: the `sctc` command."""

import sys

from sctc_assets.cli import main

if __name__ == "__main__":
    sys.exit(main())
