"""The ServerApp: the cotrain server strategy (handshake, rounds, consensus)."""

from cotrain.flower.server_app import make_server_app

app = make_server_app()
