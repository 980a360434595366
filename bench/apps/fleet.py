"""The jobfleet worker of the benchmark: `dramatiq bench.apps.fleet`.

Booted exactly like a domain worker (`workers/<domain>/app.py`): `boot_worker` builds the
broker with the fleet middleware (tracking in `job_runs`, retries, heartbeat, metrics, logs)
from the settings in the environment, then the no-op handler is bound to it.
"""

from bench.jobs import bind_fleet
from shared.bootstrap import boot_worker
from shared.runtime import get_runtime

broker = boot_worker("bench")
noop = bind_fleet(broker, get_runtime().settings.broker_namespace)
