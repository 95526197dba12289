"""The Streamlit script `fuselens app` runs: the same body as a clone's app.py (app_core.main.run)."""

from __future__ import annotations

import sys
from pathlib import Path

# Run by path (`streamlit run …/fuselens/dashboard.py`), Python puts fuselens/ itself on sys.path, not its parent;
# from a clone the parent is the repository, in a wheel it is site-packages (already importable).
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from app_core import main  # noqa: E402

main.run()
