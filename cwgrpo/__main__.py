"""``python -m cwgrpo ...`` (and ``accelerate launch -m cwgrpo train ...``): the ``cwgrpo`` command line."""

import sys

from cwgrpo.cli import main

sys.exit(main())
