"""FuseLens analyzer: PyTorch profiler traces → tables, summaries and fusion diffs. No streamlit, no torch."""

from analyzer.errors import DiffError, FuseLensError, TraceError

__all__ = ["DiffError", "FuseLensError", "TraceError", "load_trace", "summarize", "diff_runs"]


def __getattr__(name):  # lazy, so `import analyzer` stays cheap and modules land independently
    if name == "load_trace":
        from analyzer.pipeline import load_trace

        return load_trace
    if name == "summarize":
        from analyzer.summary import summarize

        return summarize
    if name == "diff_runs":
        from analyzer.diff import diff_runs

        return diff_runs
    raise AttributeError(name)
