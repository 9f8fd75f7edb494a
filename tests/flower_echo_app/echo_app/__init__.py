"""Tiny Flower app used by cotrain's ``LocalFederation`` tests."""
