"""Benchmarks of course_utils: run ``python -m benchmarks`` (see benchmarks/suite.py)."""
