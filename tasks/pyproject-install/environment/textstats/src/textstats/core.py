"""Counting words."""

import re
from collections import Counter
from importlib import resources

WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


def load_stopwords() -> frozenset[str]:
    text = resources.files("textstats").joinpath("data/stopwords.txt").read_text(encoding="utf-8")
    return frozenset(w.strip().lower() for w in text.splitlines() if w.strip() and not w.startswith("#"))


def count_words(text: str, stopwords: frozenset[str] = frozenset()) -> Counter:
    return Counter(w for w in (m.group(0).lower() for m in WORD.finditer(text)) if w not in stopwords)


def top_words(counts: Counter, n: int) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
