"""Worker modules the benchmarks start with the `dramatiq` CLI, as production starts a worker."""
