"""The doc tests of the MCP tester need the pinned npm servers (``tests/proxy/js``), as the proxy's do."""

from __future__ import annotations

from tests.proxy.conftest import npm_servers as npm_servers
