"""The ``ncclcheck`` command line: parse options, call one function, render. No logic here.

One module per command, each holding its click command and its options; ``context.py`` (the
per-invocation consoles, ``emit``, ``--fail-on``) and ``options.py`` (option types and bounds)
are what they share; ``main.py`` holds the root group and the entry point. Nothing is
re-exported here: import each name from the module that defines it.
"""
