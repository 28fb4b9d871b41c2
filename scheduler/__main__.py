"""Allows ``python -m scheduler``."""

from scheduler.cli import main

raise SystemExit(main())
