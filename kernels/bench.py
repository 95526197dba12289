"""`python -m kernels.bench`: side-by-side timings -> bench/results/kernels_<gpu>.{md,json} (code: kernels/lab/bench.py)."""

import sys

from kernels.lab.bench import main

if __name__ == "__main__":
    sys.exit(main())
