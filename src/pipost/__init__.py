"""pipost: the Python reference implementation of pi-post, asynchronous message
passing between agent sessions on one machine."""
