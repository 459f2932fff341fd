"""Test cases of this instance (the image needs no inputs)."""
import random
import sys

SEED = %%seed
STATISTIC = "%%statistic"
NEGATIVES = "%%negatives" == "true"
MAX_ARGS = %%{max_args}


def cases():
    """(arguments, expected output) pairs."""
    rng = random.Random(SEED)
    out = []
    for n in sorted({1, MAX_ARGS, rng.randint(1, MAX_ARGS), rng.randint(1, MAX_ARGS)}):
        args = [rng.randint(-50 if NEGATIVES else 0, 99) for _ in range(n)]
        if NEGATIVES:
            args[0] = -abs(args[0]) - 1
        value = {"sum": sum, "max": max, "min": min, "count": len}[STATISTIC](args)
        out.append(([str(a) for a in args], str(value)))
    return out


def generate(root):
    pass


if __name__ == "__main__":
    generate(sys.argv[1])
