"""The ClientApp: hands each message to the site's warm worker (``cotrain site serve``).

The relay imports neither scikit-learn nor torch, so Flower's fresh ``flwr-clientapp``
process per message starts fast; a site without a running worker still takes part (the
relay then runs the round itself, slower). See ``docs/deployment.md``.
"""

from cotrain.flower.relay import make_relay_app

app = make_relay_app()
