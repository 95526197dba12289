"""Ray engine: the same `run_job` as the local pool, as a Ray task — one rank per task.

No address: start a private local Ray (no dashboard) sized to `workers` CPUs, shut it down afterwards.
With an address ('ray://head:10001' or 'head:6379' or 'auto'): connect to that cluster and leave it running.

What is shipped to a worker (docs/SCALE.md): the analyzer package itself once per job (runtime_env py_modules,
~500 KB) when we connect to a cluster, then per rank a `RankInput` — a path (plus a zip member name), ~260 bytes —
when the set sits on storage every node mounts at the same path (ship="paths", the default), or the rank's raw bytes
through the object store (ship="bytes") when it does not. Only the compact per-rank dict (~10-30 KB) comes back.

Each task asks the scheduler for 1 CPU and an estimate of its peak memory, so Ray never packs more big ranks on a
node than fit in its RAM (Ray's `memory` resource is ~70% of the node's memory by default).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path

from analyzer.errors import TraceError
from analyzer.ranks.inputs import with_data
from analyzer.ranks.worker import DiffJob, SummaryJob, run_job
from fuselens import settings


def _ray():
    try:
        import ray
    except ImportError:
        raise TraceError("--engine ray", "ray is not installed (pip install 'ray[default]')") from None
    return ray


class RayEngine:
    name = "ray"

    def __init__(self, workers: int, address: str | None = None, ship: str = "paths", task_memory_bytes: int = 0):
        if ship not in ("paths", "bytes"):
            raise TraceError("--ship", f"unknown value {ship!r} (paths or bytes)")
        self.workers = max(0, int(workers))
        self.address = address
        self.ship = ship
        self.task_memory_bytes = int(task_memory_bytes)
        self._started_here = False
        self._remote = None

    def __enter__(self):
        ray = _ray()
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False}  # no INFO/WARNING chatter on a normal run
        try:
            if ray.is_initialized():  # the caller (a notebook, the app) already holds a Ray session: use it as is
                pass
            elif self.address:
                reachable(self.address)
                pkg = str(Path(__file__).resolve().parent)
                ray.init(address=self.address, runtime_env={"py_modules": [pkg]}, **quiet)
            else:
                # Workers are started by the raylet this call starts, with its environment: putting the analyzer's
                # parent folder on PYTHONPATH for that moment lets them import it without shipping any code.
                saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "RAY_USAGE_STATS_ENABLED")}
                root = str(Path(__file__).resolve().parent.parent)
                os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, saved["PYTHONPATH"]) if p)
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage-stats upload from a local run
                try:
                    ray.init(num_cpus=max(1, self.workers), include_dashboard=False, **quiet)
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                self._started_here = True
        except (ConnectionError, RuntimeError, ValueError) as err:
            where = self.address or "a local Ray"
            raise TraceError(f"ray {where}", f"cannot start or connect ({_first_line(err)})") from None
        opts = {"num_cpus": 1, "max_retries": 1}
        if self.task_memory_bytes:
            opts["memory"] = self.task_memory_bytes
        self._remote = ray.remote(run_job).options(**opts)
        return self

    def __exit__(self, *exc):
        if self._started_here:
            _ray().shutdown()
        return False

    def map(self, jobs: list, on_done: Callable[[int, int], None] | None = None) -> list[dict]:
        """Results in job order; at most `workers` tasks in flight when workers > 0 (else as many as Ray schedules)."""
        ray = _ray()
        results: list[dict | None] = [None] * len(jobs)
        window = self.workers if self.workers > 0 else len(jobs)
        refs: dict = {}
        nxt = done = 0
        while nxt < len(jobs) or refs:
            while nxt < len(jobs) and len(refs) < window:
                refs[self._remote.remote(self._shipped(jobs[nxt]))] = nxt
                nxt += 1
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                i = refs.pop(ref)
                try:
                    results[i] = ray.get(ref)
                except Exception as err:  # noqa: BLE001 — a worker died or a node went away: fail this rank only
                    results[i] = {"ok": False, "error": f"rank task {i}: Ray task failed ({_first_line(err)})"}
                done += 1
                if on_done:
                    on_done(done, len(jobs))
        return results  # type: ignore[return-value]

    def _shipped(self, job):
        if self.ship == "paths":
            return job
        if isinstance(job, SummaryJob):
            return SummaryJob(with_data(job.input))
        return DiffJob(job.rank, tuple(with_data(i) for i in job.inputs), job.labels)


# ray.init(address=…) retries a dead GCS address for 10+ minutes and a dead ray:// one for ~31 s; a plain TCP
# connect to the address first answers in milliseconds (refused) or this many seconds (a black-holed host).
ENV_CONNECT_TIMEOUT = "FUSELENS_RAY_CONNECT_TIMEOUT_S"
CONNECT_TIMEOUT_S = 5.0


def connect_timeout_s() -> float:
    """$FUSELENS_RAY_CONNECT_TIMEOUT_S (> 0), else 5 s; TraceError (one line naming it) when it is not a number."""
    raw = settings.text(ENV_CONNECT_TIMEOUT)
    if not raw:
        return CONNECT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < 3600:
        raise TraceError(ENV_CONNECT_TIMEOUT, f"{raw[:40]!r} is not a number of seconds between 0 and 3,600")
    return value


_DEFAULT_PORTS = {"ray://": 10001, "": 6379}


def reachable(address: str, timeout_s: float | None = None) -> None:
    """Raise TraceError (one line) unless something accepts a TCP connection at `address` ('host:port',
    'ray://host[:port]'); 'auto' and 'local' are left to Ray (they name no socket)."""
    addr = address.strip()
    if addr in ("auto", "local") or not addr:
        return
    scheme = "ray://" if addr.startswith("ray://") else ""
    rest = addr[len(scheme) :].split("/", 1)[0]
    if rest.startswith("["):  # [IPv6]:port
        host, _, tail = rest[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
    else:  # a bare host name, or a bare IPv6 address
        host, port_text = rest, ""
    try:
        port = int(port_text) if port_text else _DEFAULT_PORTS[scheme]
    except ValueError:
        raise TraceError(f"ray {address}", f"the port {port_text!r} is not a number") from None
    limit = connect_timeout_s() if timeout_s is None else timeout_s
    try:
        with socket.create_connection((host, port), timeout=limit):
            pass
    except TimeoutError:
        why = f"no answer within {limit:g} s"
    except OSError as err:
        why = err.strerror or type(err).__name__
    else:
        not_ray = _not_ray(host, port, scheme, limit)
        if not_ray is None:
            _same_cluster_where_ray_goes(address, host, port, scheme, limit)
            return
        raise TraceError(f"ray {address}", f"{host}:{port} is not a Ray {_SERVICE[scheme][1]} ({not_ray})")
    raise TraceError(f"ray {address}", f"cannot connect to {host}:{port} ({why}); is a Ray head running there?")


# The one call each Ray endpoint answers: the GCS (head:6379) its cluster id; the Ray Client server (ray://…:10001)
# its cluster info. A server that is not Ray (the dashboard's HTTP port 8265 given by mistake, any web server)
# answers neither: ray.init would retry it for minutes; this answers in milliseconds, or after the timeout.
_SERVICE = {
    "": ("/ray.rpc.NodeInfoGcsService/GetClusterId", "GCS (the head's --port, 6379 by default)"),
    "ray://": ("/ray.rpc.RayletDriver/ClusterInfo", "Client server (ray://head:10001)"),
}


def _same_cluster_where_ray_goes(address: str, host: str, port: int, scheme: str, timeout_s: float) -> None:
    """ray.init rewrites a loopback GCS address (127.0.0.1, localhost, ::1) to this node's interface address
    (ray._private.services.resolve_ip_for_localhost) and connects there. Where that is another port's owner (a GCS
    bound to loopback only, another cluster, another program), the job would run elsewhere than the address given:
    refused with one line unless both answer alike (the same cluster id; or, on a cluster with token
    authentication, the same refusal: then it is one GCS listening on every interface, as `ray start` binds it)."""
    if scheme:
        return  # ray:// is the Ray Client's channel: Ray connects to it as given
    try:
        from ray._private.services import resolve_ip_for_localhost

        there = resolve_ip_for_localhost(host)
    except Exception:  # a Ray without that helper, or no interface address: nothing is rewritten
        return
    if not there or there == host:
        return
    here_id, there_id = _gcs_answer(host, port, timeout_s), _gcs_answer(there, port, timeout_s)
    if here_id is None or here_id != there_id:
        raise TraceError(
            f"ray {address}",
            f"Ray would connect to {there}:{port} instead (it rewrites a loopback address to this node's), and the "
            f"Ray GCS at {host}:{port} does not answer there; give --address {there}:{port} if that is the cluster",
        )


def _gcs_answer(host: str, port: int, timeout_s: float) -> bytes | str | None:
    """The GCS's GetClusterId reply (its serialized cluster id), the status it refused the call with (e.g.
    'UNAUTHENTICATED'), or None when no GCS answers."""
    try:
        import grpc
    except ImportError:
        return None
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
        call = channel.unary_unary(_SERVICE[""][0], request_serializer=None, response_deserializer=None)
        try:
            return bytes(call(b"", timeout=timeout_s))
        except grpc.RpcError as err:
            code = err.code() if hasattr(err, "code") else None
            gone = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.DEADLINE_EXCEEDED)
            return None if code is None or code in gone else code.name


def _not_ray(host: str, port: int, scheme: str, timeout_s: float) -> str | None:
    """None when a Ray GCS (or, for ray://, a Ray Client server) answers at host:port, else why not (one phrase).
    A gRPC call with an empty request and a deadline: an answer, or any error but 'unimplemented' or 'unavailable',
    means the service is there."""
    try:
        import grpc
    except ImportError:  # ray always brings grpcio; without it, leave the check to ray.init
        return None
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    method = _SERVICE[scheme][0]
    with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        try:
            call(b"", timeout=timeout_s)
            return None
        except grpc.RpcError as err:
            code = err.code() if hasattr(err, "code") else None
            if code == grpc.StatusCode.UNIMPLEMENTED:
                return "a gRPC server without Ray's service"
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return f"no gRPC answer within {timeout_s:g} s; the Ray dashboard's port (8265) is not the GCS"
            if code == grpc.StatusCode.UNAVAILABLE:
                return "it does not speak gRPC; the Ray dashboard's port (8265) is not the GCS"
            return None


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return " ".join(text[0].split()) if text else type(err).__name__
