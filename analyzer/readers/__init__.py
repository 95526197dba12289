"""Trace readers: bytes in (`load`: paths, uploads, gzip guard, JSON repair) and the typed columnar Kineto decode
(`decode`). A reader's output is the raw-table contract in `analyzer.schema`; `analyzer.trace.build_trace` takes it
from there."""
