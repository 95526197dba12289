"""Multi-rank trace sets: inputs (folder / zip), the per-rank worker, the local process pool and Ray engines, the
cross-rank spread, and `python -m analyzer ranks` (`cli`)."""

__all__ = ["FORMAT", "RankReport", "analyze_ranks", "assign_ranks", "plan_workers"]


def __getattr__(name):  # lazy: `python -m analyzer` builds the ranks sub-parser on every command (pandas: 0.25 s)
    if name in __all__:
        from analyzer.ranks import core

        return getattr(core, name)
    raise AttributeError(name)
