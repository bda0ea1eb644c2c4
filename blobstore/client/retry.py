"""When and how long to wait before trying a request again.

Connection failures, 5xx and 429 are retried with exponential backoff and full jitter (so that many clients
that failed together do not return together); any other 4xx is the caller's mistake and is never retried.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio
import httpx

from blobstore.client.problems import error_from_response, unreachable
from blobstore.errors import InvalidRequest

T = TypeVar("T")

_MAX_RETRY_AFTER = 60.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 6
    """Tries per request, the first included."""
    base_delay: float = 0.25
    max_delay: float = 10.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        backoff = random.uniform(0, ceiling)
        if retry_after is not None:
            return max(backoff, min(retry_after, _MAX_RETRY_AFTER))
        return backoff


NO_RETRY = RetryPolicy(attempts=1)


# Answers that may well differ a moment later; "storage full" or "not implemented" will not.
_RETRYABLE = frozenset(
    {
        httpx.codes.TOO_MANY_REQUESTS,
        httpx.codes.INTERNAL_SERVER_ERROR,
        httpx.codes.BAD_GATEWAY,
        httpx.codes.SERVICE_UNAVAILABLE,
        httpx.codes.GATEWAY_TIMEOUT,
    }
)


def is_retryable_status(response: httpx.Response) -> bool:
    return response.status_code in _RETRYABLE


def retry_after_seconds(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


class RetryableResponse(Exception):
    """Raised inside an attempt for a 5xx/429 answer, so that the retry loop tries again."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__("retryable response")
        self.response = response


async def call_with_retries(policy: RetryPolicy, base_url: str, attempt: Callable[[], Awaitable[T]]) -> T:
    """Run ``attempt`` until it returns, retrying transport errors and :class:`RetryableResponse`.

    After the last try a transport failure becomes ``ServerUnreachable`` and a retryable
    response becomes the error its problem body names.
    """
    tries = 0
    while True:
        tries += 1
        try:
            return await attempt()
        except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:
            raise InvalidRequest(f"cannot send a request to {base_url}") from exc
        except httpx.TransportError as exc:
            if tries >= policy.attempts:
                raise unreachable(base_url) from exc
            await anyio.sleep(policy.delay(tries))
        except RetryableResponse as exc:
            if tries >= policy.attempts:
                raise error_from_response(exc.response) from None
            await anyio.sleep(policy.delay(tries, retry_after_seconds(exc.response)))
