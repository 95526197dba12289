"""Run diffs: step alignment (`align`, `blocks`), evidence-based fusion groups (`match`, `flow`, `attention`),
the accounting of every kernel (`accounting`), the GPU conditions' check (`comparability`), the headline
(`headline`), the result model (`model`), its building (`build`: `diff_runs`) and its text and JSON forms
(`output_text`, `output_json`)."""

from analyzer.diff.build import diff_runs, run_phases
from analyzer.diff.model import CandidateDiff, Diff, FusionRow, RunFacts
from analyzer.diff.output_json import BYTES_RULE, ESTIMATES

__all__ = ["BYTES_RULE", "ESTIMATES", "CandidateDiff", "Diff", "FusionRow", "RunFacts", "diff_runs", "run_phases"]
