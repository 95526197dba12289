"""The dashboard's non-page code: session state and its keys (`state`), UI helpers and the one Markdown escaper
(`ui`), chart export (`export`), the shared-link URL (`params`, `share`), bundled samples (`samples`), the sidebar
trace manager (`sidebar`), the page registry (`nav`), the script body (`main`), the profiling subprocess
(`profile_job`) and the Compare / Fusion plan view parts (`compare_view`, `plan_view`). Pages live in app_pages/;
everything here reaches the analyzer only through `analyzer.api` and `analyzer.figures`."""
