"""The bank service: banks, tenants and keys, as the HTTP service and the MCP server share them.

No web framework here (pydantic only), so both front ends build on it:

* :mod:`deltamem.service.banks` — where each tenant's banks live (:class:`BankSpace`), the
  open-bank cache (:class:`OpenBanks`), bank and tenant names;
* :mod:`deltamem.service.tenants` — :class:`TenantBanks`: list, recall, learn, stats, tree,
  explain, export, import and delete a tenant's banks;
* :mod:`deltamem.service.keys` — API keys, hashed at rest, mapped to tenants (:class:`KeyRing`);
* :mod:`deltamem.service.models` — request and response bodies (the HTTP API's OpenAPI spec,
  the MCP tools' arguments and results).

HTTP: :mod:`deltamem.server`; MCP: :mod:`deltamem.integrations.mcp`.
"""

from deltamem.service.banks import BankNotFound, BankSpace, OpenBanks, check_name
from deltamem.service.keys import KeyRing, add_key
from deltamem.service.tenants import LOCAL_TENANT, BankNotEmpty, ReadOnlyError, TenantBanks

__all__ = [
    "LOCAL_TENANT",
    "BankNotEmpty",
    "BankNotFound",
    "BankSpace",
    "KeyRing",
    "OpenBanks",
    "ReadOnlyError",
    "TenantBanks",
    "add_key",
    "check_name",
]
