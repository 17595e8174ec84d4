"""The state machines of the conformance kit: each reaches the implementation it
judges through the driver only (driving.py), so that ``pi-post conformance
--impl COMMAND`` runs it against any implementation; pipost's own test run
(``nox -s check``) runs them against pipost. Those that drive pipost's own
modules live in its repository, under tests/invariants."""
