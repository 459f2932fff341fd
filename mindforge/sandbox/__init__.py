"""Sandboxes: an abstract interface (``base``) and the Docker implementation (``docker``)."""
