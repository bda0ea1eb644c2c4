"""The MCP tester behind ``blobstore call``, ``tools``, ``resources``, ``read`` and ``test``.

It is a client of any MCP server (a command on stdio or a streamable-HTTP URL), built on the official SDK's
``Client``: ``target`` connects and says plainly why a server could not be reached, ``arguments`` builds and
checks a call's arguments against the tool's ``inputSchema``, ``blocks`` describes and saves what a result
holds, ``follow`` reads resources in windows to files, ``as_host`` runs a result through the proxy's offload
rules for a host profile, ``script`` runs the steps of a test script and ``junit`` writes their report.
"""
