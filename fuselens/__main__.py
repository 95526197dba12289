import sys

from fuselens.cli import main

sys.exit(main())
