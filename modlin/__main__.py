import sys

from modlin._tools.cli import main

sys.exit(main())
