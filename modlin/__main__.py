import sys

from ._tools.cli import main

sys.exit(main())
