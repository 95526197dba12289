"""Multi-rank trace sets: inputs (folder / zip), the per-rank worker, the local process pool and Ray engines, the
cross-rank spread, and `python -m analyzer ranks` (`cli`)."""

from analyzer.ranks.core import FORMAT, RankReport, analyze_ranks, assign_ranks, plan_workers

__all__ = ["FORMAT", "RankReport", "analyze_ranks", "assign_ranks", "plan_workers"]
