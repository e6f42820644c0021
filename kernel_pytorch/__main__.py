"""``python -m kernel_pytorch``: see :mod:`kernel_pytorch.cli`."""

from .cli import main

raise SystemExit(main())
