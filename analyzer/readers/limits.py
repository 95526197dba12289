"""The loader's limits as the environment sets them, without importing the loader (numpy, msgspec): the cache's
light path (analyzer.pipeline.summary_json) must know whether a load would use the default limits before it reads anything.

The values, defaults and meaning: analyzer.readers.load (decompression_cap, gzip_ratio_limit, GzipGuard).
"""

from __future__ import annotations

from fuselens import settings

ENV_MAX_DECOMPRESSED = "FUSELENS_MAX_DECOMPRESSED_BYTES"
ENV_MAX_GZIP_RATIO = "FUSELENS_MAX_GZIP_RATIO"


def default_limits(max_decompressed_bytes=None, max_gzip_ratio=None) -> bool:
    """True when neither an argument nor the environment sets a limit: only such a load may use the cache (a cached
    trace was accepted under the default limits, and must not slip past a stricter or looser one)."""
    return (
        max_decompressed_bytes is None
        and max_gzip_ratio is None
        and not settings.text(ENV_MAX_DECOMPRESSED)
        and not settings.text(ENV_MAX_GZIP_RATIO)
    )
