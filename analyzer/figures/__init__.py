"""Pure figure builders: DataFrames / Summaries / Diffs in, Plotly figures out. No streamlit here.

theme     the light slide theme, category colours, chart_title() (GPU, workload, shapes, dtype), safe labels
compare   side-by-side charts of a Diff: per-category time, fusion groups, time breakdown
timeline  GPU timeline of one step per run
roofline  achieved FLOP/s vs arithmetic intensity
"""
