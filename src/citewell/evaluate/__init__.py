"""Evaluation: run a data set through a real server and report grounded-answer figures.

``loaders`` reads each data set into ``Case``/``Document``; ``runner`` ingests and asks through
one surface; ``metrics`` computes the figures with confidence intervals; ``report`` renders them.
``citewell eval`` (``cli/evaluate.py``) ties them together.
"""
