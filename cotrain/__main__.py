"""``python -m cotrain``: the ``cotrain`` command (:func:`cotrain.cli.main`)."""

import sys

from cotrain.cli import main

sys.exit(main())
