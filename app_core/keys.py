"""Every st.session_state key the dashboard reads or writes, in one place (widget keys that only name a widget stay
beside their widget). A key's value type is in its comment; app_core.state reads and writes them through typed
accessors, so a page never indexes session_state with a raw string."""

from __future__ import annotations

# app_core.state: the loaded runs and what the pages show about them
RUNS = "fl_runs"  # dict[key, Run], insertion-ordered
BASELINE = "fl_baseline"  # key of the baseline run
ERRORS = "fl_errors"  # list[str]: one-line load errors, shown until dismissed or the next upload
NOTES = "fl_notes"  # list[str]: one-line notices (duplicates, side files attached)
DIFFS = "fl_diffs"  # memo: (baseline key, candidate keys, labels) -> Diff | str (error line)
SUBTITLE = "fl_subtitle"  # str: chart subtitle override for design-review exports (a sidebar text input)
KEEP_UPLOADS = "fl_keep_uploads"  # bool: the user allowed uploads' analysed tables on the on-disk cache (a checkbox)

# app_core.main / sidebar
STARTED = "fl_started"  # bool: the session's first run is done (samples or the shared link applied)
UPLOAD_GEN = "fl_upload_gen"  # int: the uploader widget's generation; bumped to empty it after a load
BASELINE_PICK = "fl_baseline_pick"  # str: the baseline selector's value (a run key)
LOAD_SAMPLE = "fl_load_sample"  # str: a bundled sample set whose button was clicked, loaded on the next run
LABEL_PREFIX = "fl_label_"  # + run key -> str: a run's label text input

# app_core.share (the URL) and the selectors it restores
SHARE_APPLIED = "fl_share_applied"  # bool: the link's parameters were applied (once per session)
SHARE_PENDING = "fl_share_pending"  # params.View whose runs are not loaded yet (uploads): applied once they are
COMPARE_CANDIDATE = "fl_compare_candidate"  # str: Compare's candidate selector (a run key)
TIMELINE_STEP = "fl_timeline_step"  # int: Timeline's step selector
TIMELINE_RUNS = "fl_timeline_runs"  # list[str]: Timeline's run pills (run keys); "…__offered" beside it (params)

# pages' memos
PLANS = "fl_plans"  # run key -> Plan, or the one-line error that stopped it: computed once per run per session
TIMELINE_MEMO = "fl_timeline_memo"  # (memo key, figure, build ms): the last timeline figure
OWNER_TOKEN = "fl_owner_token"  # str: this session's token, owner of the profile job it starts
