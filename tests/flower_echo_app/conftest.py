"""Keep pytest (``--doctest-modules``) from importing the Flower app: it needs ``flwr``."""

collect_ignore = ["echo_app"]
