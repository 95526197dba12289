"""FuseLens dashboard: `streamlit run app.py`. What did kernel fusion buy us, and where is the rest?

The script body is app_core.main.run (shared with `fuselens app`, the installed command); this file only makes the
clone importable from any working directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

# `streamlit run app.py` puts the app's folder on sys.path; make it explicit so `analyzer`, `app_core` and `app_pages`
# import the same way under AppTest, the browser tests and any working directory.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from app_core import main  # noqa: E402

main.run()
