import sys

from netagg.cli import main

sys.exit(main())
