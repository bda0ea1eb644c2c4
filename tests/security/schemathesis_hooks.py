"""Schemathesis extensions for tests/security/test_schemathesis.py (loaded through ``SCHEMATHESIS_HOOKS``):
tus PATCH bodies are plain bytes under their own media type (tus core protocol)."""

from __future__ import annotations

import schemathesis

schemathesis.serializer.alias("application/offset+octet-stream", "application/octet-stream")
