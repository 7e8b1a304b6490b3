"""``deltamem.client.Client``: a bank on a deltamem service, with the library's calls.

See :mod:`deltamem.server.client`; needs httpx (``deltamem[server]``).
"""

from deltamem.server.client import Client

__all__ = ["Client"]
