"""The benchmarks: one module per ``mapf-lake bench NAME`` target, ``curriculum/benches/NAME.py``.

They measure the library packages from above (a benchmark may use any of them), so they live here, at the top of
the import graph, and no library package imports them. ``curriculum.benches.cli`` registers the targets from its
``BENCHES`` table; adding a benchmark is its module and one line there.
"""
