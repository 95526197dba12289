"""`python -m kernels.bench`: side-by-side forward timings -> bench/results/kernels_<gpu>.{md,json}
(code: kernels/lab/forward_bench.py); `python -m kernels.bench --train`: forward + backward steps ->
bench/results/kernels_train_<gpu>.{md,json} (code: kernels/lab/train_bench.py)."""

import sys

if __name__ == "__main__":
    if "--train" in sys.argv[1:]:
        from kernels.lab.train_bench import main
    else:
        from kernels.lab.forward_bench import main
    sys.exit(main())
