"""The Dramatiq version `shared/broker/` was written against, and the private parts it relies on.

Every private name checked here is used by `shared/broker/` (the module is named beside it): a
Dramatiq release that renames or reshapes one fails this test, by name, before a worker runs.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import dramatiq
import pytest
import redis
from dramatiq.broker import MessageProxy
from dramatiq.brokers import redis as dramatiq_redis
from dramatiq.common import compute_backoff, current_millis, dq_name

from shared.broker.delivery import failure_of, is_delivery, message_of
from shared.broker.version import SUPPORTED_DRAMATIQ, check_dramatiq_version, minor
from shared.errors import UnsupportedDramatiq

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_dramatiq_is_the_supported_minor() -> None:
    installed = metadata.version("dramatiq")

    check_dramatiq_version(installed)  # does not raise
    check_dramatiq_version(dramatiq.__version__)

    assert minor(installed) == SUPPORTED_DRAMATIQ == minor(dramatiq.__version__)


def test_pyproject_pins_dramatiq_to_the_supported_minor() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = (d for d in dependencies if d.startswith("dramatiq"))
    major, minor_number = SUPPORTED_DRAMATIQ.split(".")

    assert pin == f"dramatiq[redis]>={SUPPORTED_DRAMATIQ},<{major}.{int(minor_number) + 1}"


@pytest.mark.parametrize("other", ["2.3.0", "2.1.4", "3.0.0", "1.18.0", "2.20.1", "22.0"])
def test_another_minor_is_refused_with_the_versions_and_what_to_review(other: str) -> None:
    with pytest.raises(UnsupportedDramatiq) as refused:
        check_dramatiq_version(other)

    message = str(refused.value)
    assert f"dramatiq {other} is installed" in message
    assert f"written against dramatiq {SUPPORTED_DRAMATIQ}.x" in message
    assert "shared/broker/consumer.py (FleetRedisConsumer subclasses _RedisConsumer)" in message
    assert (
        "shared/broker/lua/ack_many.lua (the dispatch script's ack command, for many messages)"
        in message
    )
    assert "SUPPORTED_DRAMATIQ in shared/broker/version.py" in message


@pytest.mark.parametrize("release", ["0", "1", "17", "0rc1"])
def test_any_release_of_the_supported_minor_is_accepted(release: str) -> None:
    check_dramatiq_version(f"{SUPPORTED_DRAMATIQ}.{release}")


def test_importing_the_broker_package_with_another_dramatiq_fails_with_the_guards_message() -> None:
    """The guard runs when `shared.broker` is imported, before any module of it imports a
    private part of Dramatiq (which could fail with a bare ImportError instead)."""
    probe = (
        "import dramatiq\n"
        "dramatiq.__version__ = '2.99.0'\n"
        "from shared.errors import UnsupportedDramatiq\n"
        "try:\n"
        "    import shared.broker\n"
        "except UnsupportedDramatiq as exc:\n"
        "    print(exc)\n"
        "    raise SystemExit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 3, done.stderr
    assert "dramatiq 2.99.0 is installed" in done.stdout


def test_the_private_consumer_fleet_redis_consumer_subclasses_is_unchanged() -> None:
    """`consumer.py`: `FleetRedisConsumer(_RedisConsumer)` and the state it shares with it."""
    base = dramatiq_redis._RedisConsumer
    parameters = list(inspect.signature(base.__init__).parameters)
    assert parameters == ["self", "broker", "queue_name", "prefetch", "timeout"]

    consumer = base(object(), "testq", 3, 100)
    assert consumer.message_cache == []
    assert consumer.queued_message_ids == set()
    assert consumer.misses == 0
    assert consumer.outstanding_message_count == 0
    consumer.queued_message_ids.add("m")
    consumer.message_cache.append(b"x")
    assert consumer.outstanding_message_count == 2  # what the fleet consumer's prefetch uses
    for method in ("ack", "nack", "requeue", "close", "__next__"):
        assert callable(getattr(base, method)), method


def test_the_private_broker_methods_the_fleet_broker_uses_are_unchanged() -> None:
    """`redis.py` overrides `_should_do_maintenance`; `lua/ack_many.lua` does what the dispatch
    script does with `RedisBroker._dispatch`'s arguments for `ack`; `consumer.py` and `redis.py`
    call `do_ack`, `do_nack`, `do_requeue` and `do_qsize`."""
    cls = dramatiq_redis.RedisBroker
    assert list(inspect.signature(cls._should_do_maintenance).parameters) == ["self", "command"]
    assert list(inspect.signature(cls._max_unpack_size).parameters) == ["self"]
    assert isinstance(inspect.getattr_static(cls, "consumer_class"), property)

    broker = cls(client=redis.Redis(), namespace="guard", middleware=[])  # connects to nothing
    assert {"dispatch", "maxstack"} <= set(broker.scripts)
    for attribute in ("broker_id", "namespace", "heartbeat_timeout", "dead_message_ttl", "client"):
        assert hasattr(broker, attribute), attribute
    for command in ("ack", "nack", "requeue", "qsize"):
        assert callable(getattr(broker, f"do_{command}")), command

    dispatch = inspect.getsource(cls._dispatch)
    arguments = [
        "command",
        "timestamp",
        "queue_name",
        "self.broker_id",
        "self.heartbeat_timeout",
        "self.dead_message_ttl",
        "self._should_do_maintenance(command)",
        "self._max_unpack_size()",
        "*args",
    ]
    assert ",\n".join(arguments) in ",\n".join(line.strip(" ,") for line in dispatch.splitlines())
    # `redis.py` overrides `do_enqueue` (into the message's lane: `lanes.py`) and calls
    # `_dispatch(command)` for the commands it overrides (`do_ack`, `do_nack`, `do_requeue`,
    # `do_qsize`): Dramatiq's enqueue must still end in that call.
    assert list(inspect.signature(cls._dispatch).parameters) == ["self", "command"]
    enqueue = inspect.getsource(cls.enqueue)
    assert (
        'self.do_enqueue(queue_name, message.options["redis_message_id"], message.encode())'
        in enqueue
    )


def test_the_dispatch_script_keeps_its_arguments_commands_and_key_layout() -> None:
    """`lua/ack_many.lua` re-implements its `ack` command, `lua/fetch.lua` its `fetch` and
    `lua/enqueue_once.lua` its `enqueue`, all on its Redis key layout."""
    script = dramatiq_redis._scripts["dispatch"].decode()

    layout = [
        "command",
        "timestamp",
        "queue_name",
        "worker_id",
        "heartbeat_timeout",
        "dead_message_ttl",
        "do_maintenance",
        "max_unpack_size",
    ]
    for position, name in enumerate(layout, start=1):
        assert f"local {name} = ARGV[{position}]" in script, name
    for command in ("enqueue", "fetch", "requeue", "ack", "nack", "qsize"):
        assert f'command == "{command}"' in script, command
    for line in (
        'local acks = namespace .. ":__acks__." .. worker_id',
        'local heartbeats = namespace .. ":__heartbeats__"',
        'local queue_acks = acks .. "." .. queue_name',
        'local queue_full_name = namespace .. ":" .. queue_name',
        'local queue_messages = queue_full_name .. ".msgs"',
        'redis.call("zadd", heartbeats, timestamp, worker_id)',  # fetch beats the heartbeat
        'local message_id = redis.call("lpop", queue_full_name)',  # fetch
        'redis.call("sadd", queue_acks, message_id)',
        'redis.call("hset", queue_messages, message_id, message_data)',  # enqueue
        'redis.call("rpush", queue_full_name, message_id)',
        'if redis.call("srem", queue_acks, message_id) > 0 then',  # ack
        'redis.call("hdel", queue_messages, message_id)',
    ):
        assert line in script, line


def test_the_public_helpers_and_message_behaviour_the_package_relies_on() -> None:
    """`gate.py` writes a delayed message as `RedisBroker.enqueue` does; `delivery.py` puts the
    per-delivery state on the `MessageProxy`, which must take attributes of its own, and reads
    its private `_message` and `_exception`."""
    assert dq_name("email") == "email.DQ"
    assert isinstance(current_millis(), int)
    assert compute_backoff(0, max_backoff=100)[0] == 1
    enqueue = inspect.getsource(dramatiq_redis.RedisBroker.enqueue)
    assert '"redis_message_id": str(uuid4())' in enqueue
    assert '"eta": message_eta' in enqueue

    message = dramatiq.Message(
        queue_name="q", actor_name="a", args=(), kwargs={}, options={}, message_id="m"
    )
    proxy = MessageProxy(message)
    proxy.fleet = "state"  # type: ignore[attr-defined]
    assert proxy.__dict__["fleet"] == "state"
    assert not hasattr(message, "fleet")
    assert is_delivery(proxy) and not is_delivery(message)
    assert proxy._message is message and message_of(proxy) is message
    assert proxy._exception is None and failure_of(proxy) is None
    error = dramatiq.ActorNotFound("a")
    proxy.stuff_exception(error)
    assert proxy._exception is error and failure_of(proxy) is error


def test_dramatiq_s_consumer_thread_drops_its_delayed_messages_on_a_connection_error() -> None:
    """`consumer.py` (`FleetRedisConsumer._recover`) returns every message of this worker's
    delay-queue unacked set when Dramatiq restarts that consumer, because its consumer thread
    holds none by then: it drops the delayed messages it held on a connection error, and
    requeues them when it closes for any other reason. Its close catches only
    `BrokerConnectionError` (`FleetRedisConsumer.requeue` raises that)."""
    from dramatiq.worker import ConsumerThread

    run = inspect.getsource(ConsumerThread.run)
    assert "except BrokerConnectionError" in run
    assert "self.delay_queue = PriorityQueue()" in run
    close = inspect.getsource(ConsumerThread.close)
    assert "self.requeue_messages(item.message for item in iter_queue(self.delay_queue))" in close
    assert "except BrokerConnectionError" in close
