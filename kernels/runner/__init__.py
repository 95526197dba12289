"""The profiling runner (`python -m kernels.profile`, the dashboard's Profile page): validate -> warm -> rounds ->
traces -> ncu -> manifest. options (command line, torch-free choice lists), run (the order), record (warm-up,
timed and profiled rounds), manifest, ncu (DRAM bytes), roofs (measured ceilings), interleave (the per-variant
split of one profiler session), control (the probe), conditions (clock/power/temperature), envinfo."""
