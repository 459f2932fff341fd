"""The textstats command."""

import argparse
from collections import Counter

from textstats.core import count_words, load_stopwords, top_words


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="textstats")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--keep-stopwords", action="store_true")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    stop = frozenset() if args.keep_stopwords else load_stopwords()
    total = Counter()
    for path in args.files:
        with open(path, encoding="utf-8") as fh:
            total += count_words(fh.read(), stop)
    for word, count in top_words(total, args.top):
        print(f"{count} {word}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
