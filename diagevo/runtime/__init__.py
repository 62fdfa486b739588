"""How long work runs: the progress callback and running a coroutine so that Ctrl-C takes effect."""
