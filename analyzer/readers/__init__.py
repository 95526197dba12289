"""Trace readers: bytes in → the raw-table contract (`analyzer.schema.RawTrace`), in one direction.

`load` (paths, uploads, gzip cap and bomb guard; runs the stages) → `document` (the events array split off; `repair`:
what real files need first) → `decode` (the events in one process or two) over `batches` (event Structs of `events`)
and `columns` (`coerce`: values → arrays). `cache` (with `cache_key`, `cache_format`) stores tables and JSON for the
layers above, through their serialisers; `files` opens every file FuseLens reads. `analyzer.trace.build_trace` takes
the raw tables from here; `analyzer.pipeline` ties file → Trace → Summary together.
"""
