"""`python -m torchedge.cli`: the `torchedge` command."""

import sys

from torchedge.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
