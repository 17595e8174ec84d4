"""``python -m pipost.contract ARGS``: the contract gate in a process of its own.

``pi-post contract`` runs it so: the gate gathers the contract from the command
line, among the rest, so the command line does not import the gate (DESIGN §10).
"""

import os
import sys

from pipost.contract import gate

sys.exit(gate.main(sys.argv[1:], sys.stdout, sys.stderr, cwd=os.getcwd()))
