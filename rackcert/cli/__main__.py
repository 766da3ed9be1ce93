"""`python -m rackcert.cli`: the same as the `rackcert` console script."""

import sys

from rackcert.cli import main

sys.exit(main())
