"""Tiny Google Benchmark suite whose JSON output zlops' google-benchmark adapter is tested on.

Run from an empty directory (see ../PROVENANCE.md for the exact commands).
"""
import google_benchmark as benchmark
from google_benchmark import Counter


@benchmark.register
@benchmark.option.arg(64)
@benchmark.option.arg(4096)
def sum_list(state):
    n = state.range(0)
    data = list(range(n))
    while state:
        sum(data)
    state.bytes_processed = state.iterations * n * 8
    state.items_processed = state.iterations * n


@benchmark.register
@benchmark.option.unit(benchmark.kMillisecond)
def sort_list(state):
    data = list(range(20000, 0, -1))
    while state:
        sorted(data)
    state.counters["elements"] = Counter(len(data))


@benchmark.register
def always_fails(state):
    while state:
        state.skip_with_error("no device found")
        break


if __name__ == "__main__":
    benchmark.main()
