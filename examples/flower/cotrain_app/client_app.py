"""The ClientApp: one cotrain client step per ``train`` message, at each site."""

from cotrain.flower.client_app import make_client_app

app = make_client_app()
