import sys

from pipost.cli import main

sys.exit(main())
