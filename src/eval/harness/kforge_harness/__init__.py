"""kforge evaluation harness: embedded in the kforge binary, written to its cache dir as a
package, and run as `python -m kforge_harness serve`. See protocol.py for the process
layout and server.py for the protocol kforge speaks with it."""
