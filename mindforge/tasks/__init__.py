"""Tasks: the Harbor layout (``model``, ``loader``), Terminal-Bench 1 import, the image map and validation."""
