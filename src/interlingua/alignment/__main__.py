"""``python -m interlingua.alignment``: AER of the aligner on the hand-checked sample."""

from interlingua.alignment.aer import _main

_main()
