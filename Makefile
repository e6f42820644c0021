# Entry points; each target installs what it needs first.
.PHONY: setup demo test bench

setup:
	bash scripts/setup.sh

demo: setup
	python demos/my_asic_demo.py

test: setup
	python -m pytest -q tests

bench: setup
	python benchmarks/asic_overhead.py
	python benchmarks/hal_benchmark.py
