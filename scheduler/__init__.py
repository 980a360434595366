"""The scheduler process (`python -m scheduler`, `make run-scheduler`): APScheduler 3 with one
thread pool running the periodic jobs of `schedule.SCHEDULE`. It imports `shared/` only and
starts domain work by sending jobs, never by importing a worker."""
