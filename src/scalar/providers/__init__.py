"""One module per market or cloud, each behind one Protocol; ``sim`` is the built-in market."""
