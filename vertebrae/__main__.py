import sys

from vertebrae.cli import main

sys.exit(main())
