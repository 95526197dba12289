"""`python -m kernels.profile`: the profiling runner the dashboard's Profile page starts (code: kernels/runner/)."""

from kernels.runner.run import main

if __name__ == "__main__":
    main()
