"""`python -m scheduler`"""

from __future__ import annotations

import sys

from .process import main

sys.exit(main())
