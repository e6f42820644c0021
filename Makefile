# Entry points; each target sets up what it needs first (scripts/setup.sh skips the
# steps whose inputs did not change, so a repeated target starts in seconds).
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
	python benchmarks/hardware_abstraction_benchmark.py --output hal_results.json
