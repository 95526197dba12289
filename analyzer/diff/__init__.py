"""Run diffs: step alignment (`align`), evidence-based fusion groups (`match`), run facts and text (`facts`), the
`Diff` object and `diff_runs` (`core`), and `python -m analyzer diff` (`cli`)."""

from analyzer.diff.core import BYTES_RULE, ESTIMATES, CandidateDiff, Diff, FusionRow, RunFacts, diff_runs, run_phases

__all__ = ["BYTES_RULE", "ESTIMATES", "CandidateDiff", "Diff", "FusionRow", "RunFacts", "diff_runs", "run_phases"]
