"""The scheduler process (`python -m scheduler`, `make run-scheduler`): APScheduler 3 with one
thread pool running the periodic jobs of `schedule.SCHEDULE`, and the chain indexer and lottery
keeper (`scheduler/chain/`). It imports `shared/` and the domains' `client` modules only: it
starts domain work by sending or staging jobs, never by importing a worker."""
