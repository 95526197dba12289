"""Kernel classification (STUB — to be replaced by the classify/cost owner).

classify_names(names: pd.Series) -> DataFrame with the same index and columns category, library, ops.
"""

from __future__ import annotations

import pandas as pd


def classify_names(names: pd.Series) -> pd.DataFrame:
    return pd.DataFrame({"category": "other", "library": "", "ops": ""}, index=names.index)
