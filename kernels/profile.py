"""`python -m kernels.profile`: the profiling runner the dashboard's Profile page starts (code: kernels/lab/profile.py)."""

from kernels.lab.profile import main

if __name__ == "__main__":
    main()
