"""citewell: grounded answers over your own documents; every answer says where it came from."""

__version__ = "0.1.0"
