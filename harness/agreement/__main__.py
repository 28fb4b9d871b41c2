"""`python -m harness.agreement`: see harness.agreement.cli."""

import sys

from harness.agreement.cli import main

sys.exit(main())
