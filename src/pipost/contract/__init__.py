"""The contract gate, ``pi-post contract`` (docs/contract.md): development tooling,
which no module of the runtime imports (DESIGN §10).

:mod:`~pipost.contract.gathering` gathers each part of the contract from the code
that carries it out, running the vectors (``pipost_conformance/vectors``), the
command lines of ``corpus.json`` and a scripted exchange;
:mod:`~pipost.contract.compatibility` judges one content against another and keeps
the pins (``pins.json``); :mod:`~pipost.contract.gate` is the command.
"""
