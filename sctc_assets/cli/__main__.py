"""`python -m sctc_assets.cli`: the `sctc` command."""

from sctc_assets.cli import program

if __name__ == "__main__":
    program()
