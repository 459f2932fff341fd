"""Word statistics for plain-text files."""

from textstats.core import count_words, load_stopwords, top_words

__version__ = "0.3.0"
__all__ = ["count_words", "load_stopwords", "top_words", "__version__"]
