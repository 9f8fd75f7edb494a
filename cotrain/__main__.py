"""``python -m cotrain``: the ``cotrain`` command (:func:`cotrain.cli.main`)."""

import sys

from cotrain.cli import main

if __name__ == "__main__":
    sys.exit(main())
