"""``python -m ncclcheck``."""

from ncclcheck.cli import main

if __name__ == "__main__":
    main()
